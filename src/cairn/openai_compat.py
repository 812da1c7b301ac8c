"""The HTTP client every optional OpenAI-compatible endpoint is reached through (embeddings,
timeline summaries, graph answers, reranking): one place that sets the base URL, the bearer
key and the timeout, so the callers cannot drift apart; the model endpoint the last three
are, and the chat model two of them ask."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Required, TypedDict

if TYPE_CHECKING:
    import httpx

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "MAX_ANSWER_BYTES",
    "AnswerTooLarge",
    "ChatEndpoint",
    "CompressedAnswer",
    "EndpointOptions",
    "ModelEndpoint",
    "RefusedAnswer",
    "endpoint_client",
    "post_bounded",
]

# The model asked when an address names none (``URL`` rather than ``URL#model``).
DEFAULT_CHAT_MODEL = "gpt-4o-mini"


def endpoint_client(
    base_url: str,
    *,
    api_key: str | None,
    timeout: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    # httpx is imported only when an endpoint is configured: every store opens this module
    # (the reranker's settings), and most CLI commands would otherwise pay for it at start-up.
    import httpx

    # Answers are asked for uncompressed, and a compressed one is refused (post_bounded):
    # a small gzip can unpack to gigabytes, in layers, before any bound could be checked.
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    mounts = None
    if transport is None:
        from cairn._endpoint_transport import DeadlineTransport, environment_mounts

        transport, mounts = DeadlineTransport(), environment_mounts(base_url)
    return httpx.Client(
        base_url=base_url.rstrip("/"),
        headers=headers,
        timeout=timeout,
        transport=transport,
        mounts=mounts,
    )


#: The most an endpoint's answer may hold once decoded: far more than any embeddings batch,
#: ranking or summary needs (64 vectors of 3,072 dimensions as JSON are ~4 MB).
MAX_ANSWER_BYTES = 32 * 1024 * 1024

# Headers that described the body as it came over the wire, not the whole, decoded body a
# bounded answer is rebuilt with.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class RefusedAnswer(ValueError):
    """An endpoint's answer that is not read: too large, or compressed."""


class AnswerTooLarge(RefusedAnswer):
    """An endpoint's answer went past ``MAX_ANSWER_BYTES``; it was read no further."""


class CompressedAnswer(RefusedAnswer):
    """An endpoint compressed its answer though asked not to: it is not unpacked."""


def post_bounded(
    client: httpx.Client,
    path: str,
    body: dict[str, Any],
    *,
    max_bytes: int = MAX_ANSWER_BYTES,
) -> httpx.Response:
    """``POST`` ``body`` as JSON and the answer, read whole: within the client's timeout in
    all and no larger than ``max_bytes`` (``AnswerTooLarge``), and not compressed
    (``CompressedAnswer``).

    httpx's timeout bounds each wait, not the answer: an endpoint that sends a byte every
    second would hold a search (the reranker and query embedding run on the read path) for
    as long as it liked, and one that sends gigabytes, or a small gzip that unpacks to
    them, would fill memory. A late answer is an ``httpx.ReadTimeout`` like a silent one.
    """
    import httpx

    from cairn._endpoint_transport import deadline

    budget = client.timeout.read
    started = time.monotonic()
    with deadline(budget), client.stream("POST", path, json=body) as streamed:
        encoding = streamed.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise CompressedAnswer(f"the answer is compressed ({encoding}): it is not unpacked")
        try:  # an answer made in memory (httpx.MockTransport) comes already read
            pieces: Iterable[bytes] = [streamed.content]
        except httpx.ResponseNotRead:
            pieces = streamed.iter_raw()
        chunks: list[bytes] = []
        size = 0
        for chunk in pieces:
            size += len(chunk)
            if size > max_bytes:
                raise AnswerTooLarge(f"the answer is over {max_bytes:,} bytes")
            if budget is not None and time.monotonic() - started > budget:
                raise httpx.ReadTimeout(
                    f"no whole answer within {budget:g} s", request=streamed.request
                )
            chunks.append(chunk)
    headers = [
        (name, value)
        for name, value in streamed.headers.multi_items()
        if name.lower() not in _WIRE_HEADERS
    ]
    return httpx.Response(
        streamed.status_code,
        headers=headers,
        content=b"".join(chunks),
        request=streamed.request,
    )


class EndpointOptions(TypedDict, total=False):
    """Where a model endpoint is and how it is reached (``ModelEndpoint``'s arguments)."""

    base_url: Required[str]
    model: Required[str]
    timeout: Required[float]
    api_key: str | None
    transport: httpx.BaseTransport | None


class ModelEndpoint:
    """A model served behind an OpenAI-compatible address: its client (base URL, bearer
    key, timeout) and its name, ``openai:MODEL``, what its answers are stamped with."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        timeout: float,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self._client = endpoint_client(
            base_url, api_key=api_key, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._client.close()

    @staticmethod
    def split_address(address: str) -> tuple[str, str]:
        """``URL#model`` as (URL, model); the model is empty when the address names none."""
        url, _, model = address.partition("#")
        return url, model


class ChatEndpoint(ModelEndpoint):
    """A chat model behind an OpenAI-compatible ``POST {base_url}/chat/completions``, asked
    at temperature 0 (the timeline's summaries and the graph's answers are both to be
    repeatable)."""

    @staticmethod
    def parse_address(address: str) -> tuple[str, str]:
        """``URL#model`` as (URL, model); the model is ``DEFAULT_CHAT_MODEL`` when not named."""
        url, model = ModelEndpoint.split_address(address)
        return url, model or DEFAULT_CHAT_MODEL

    def chat(
        self, messages: Sequence[dict[str, str]], *, max_tokens: int | None = None
    ) -> tuple[dict[str, Any], Any]:
        """The whole answer, and its first choice's message content. Raises what httpx
        raises (``HTTPStatusError`` for an error status), and ``ValueError``, ``KeyError``,
        ``IndexError`` or ``TypeError`` for an answer of another shape."""
        body: dict[str, Any] = {"model": self.model, "temperature": 0}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body["messages"] = list(messages)
        response = post_bounded(self._client, "/chat/completions", body)
        response.raise_for_status()
        raw = response.json()
        return raw, raw["choices"][0]["message"]["content"]
