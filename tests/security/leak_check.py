"""Checking answers for what a reader may not see, and rendering answers of every door as
comparable text."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import httpx
from pydantic import BaseModel

from cairn.errors import CairnError
from tests.security.leak_world import Secrets

# Fields that differ between two runs of the same read (stage timings, the time of a
# validation): left out when two answers are compared. They hold only numbers and times.
_UNSTABLE = frozenset({"timings_ms", "checked_at"})


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in _UNSTABLE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def as_text(value: Any) -> str:
    return json.dumps(scrub(_jsonable(value)), sort_keys=True, default=str)


def maybe_json(text: str) -> Any:
    try:
        return scrub(json.loads(text))
    except ValueError:
        return text


def library(call: Callable[[], Any]) -> str:
    """A library call's answer: its result, or the kernel error it raised (class, code,
    message, field and details: everything a caller can read)."""
    try:
        return "ok " + as_text(call())
    except CairnError as exc:
        details = json.dumps(_jsonable(exc.details), sort_keys=True, default=str)
        return f"{type(exc).__name__} [{exc.code}] {exc.message} field={exc.field} {details}"


def http(response: httpx.Response) -> str:
    """Status, headers and body of an HTTP answer. A server error is a failure at once."""
    assert response.status_code < 500, (response.request.url, response.text[:2000])
    headers = {k: v for k, v in response.headers.items() if k != "content-length"}
    body = maybe_json(response.text)
    return f"{response.status_code} {json.dumps(headers, sort_keys=True)} {as_text(body)}"


class Checker:
    """Asserts that no answer of one door names a secret."""

    def __init__(self, secrets: Secrets, door: str) -> None:
        self.secrets = secrets
        self.door = door

    def clean(
        self,
        probe: str,
        text: str,
        *,
        echo: Sequence[str] = (),
        tolerate: Collection[str] = (),
    ) -> None:
        """No secret in ``text``, once what the reader typed itself (``echo``: a query it
        sent, content it proposed) is taken out. ``tolerate``: secrets this read is known to
        show today (pinned by an xfail test), not counted here."""
        for typed in sorted({e for e in echo if e}, key=len, reverse=True):
            text = text.replace(typed, "<typed>")
        leaked = [
            f"{token} ({what})"
            for token, what in self.secrets.tokens.items()
            if token in text and token not in tolerate
        ]
        assert not leaked, (
            f"{self.door} / {probe}: the answer names {'; '.join(leaked)}\n{text[:3000]}"
        )

    def alike(
        self,
        probe: str,
        answer: Callable[[str], str],
        hidden: Iterable[str],
        never: str,
        *,
        echo: Sequence[str] = (),
    ) -> None:
        """Asking with a hidden id answers exactly like asking with an id that never
        existed (once the id itself is swapped), and neither answer names a secret."""
        expected = answer(never)
        self.clean(probe, expected, echo=echo)
        for secret in hidden:
            got = answer(secret).replace(secret, never)
            assert got == expected, (
                f"{self.door} / {probe}: {self.secrets.tokens[secret]} ({secret}) is told "
                f"apart from an id that never existed\n  hidden: {got[:1500]}\n"
                f"  never:  {expected[:1500]}"
            )
