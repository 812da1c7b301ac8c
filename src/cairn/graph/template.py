"""The templater: a short, deterministic answer composed only from the items the budget
gate let in.

    {decision_maker} on {anchor_date}: {anchor_title}.
    Supporting Facts: {event summary} ({date}); … (at most three)
    From: {preceding decision}. Next: {succeeding decision}.
    Note: Some evidence was withheld due to your permissions.   (only when policy withheld)

Every part is clamped, and raw ids (cairn's own and the graph's keys) are scrubbed from the
prose: an id is for citations, never for sentences, and an id in free text could name
something the reader may not see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cairn.graph.preselect import Candidate, Step

__all__ = ["PERMISSION_NOTE", "Envelope", "compose", "scrub"]

PERMISSION_NOTE = "Note: Some evidence was withheld due to your permissions."
MAX_FACTS = 3
MAX_PART_CHARS = 160
MAX_ANSWER_CHARS = 1_200
_CAIRN_ID = re.compile(r"\b[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}\b")


@dataclass(frozen=True)
class Envelope:
    text: str
    lines: tuple[str, ...]
    note: str | None
    cited_ids: tuple[str, ...]
    clamps: int


def scrub(text: str, ids: Iterable[str]) -> str:
    """``text`` without cairn ids and without any of ``ids`` (graph keys, longest first so
    one key inside another is removed whole)."""
    cleaned = _CAIRN_ID.sub("[…]", text)
    for key in sorted({i for i in ids if i}, key=len, reverse=True):
        cleaned = cleaned.replace(key, "[…]")
    return cleaned


def _clamp(text: str, limit: int) -> tuple[str, bool]:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text, False
    return text[: limit - 1].rstrip() + "…", True


def compose(
    anchor: Candidate,
    included: Sequence[Candidate],
    steps: Sequence[Step],
    *,
    withheld: bool,
    scrub_ids: Iterable[str],
) -> Envelope:
    """The envelope for ``anchor`` from the ``included`` neighbours (in selector order)."""
    ids = list(scrub_ids)
    clamps = 0

    def part(text: str) -> str:
        nonlocal clamps
        clean, clamped = _clamp(scrub(text, ids), MAX_PART_CHARS)
        clamps += clamped
        return clean

    date = anchor.fields.get("date")
    maker = anchor.fields.get("decision_maker")
    title = part(anchor.title).rstrip(".")
    if maker and date:
        head = f"{part(str(maker))} on {date}: {title}."
    elif date:
        head = f"On {date}: {title}."
    else:
        head = f"{title}."
    lines = [head]
    events = [c for c in included if c.kind == "event"][:MAX_FACTS]
    if events:
        facts = "; ".join(
            f"{part(str(c.fields.get('snippet') or c.title)).rstrip('.')}"
            + (f" ({c.fields['date']})" if c.fields.get("date") else "")
            for c in events
        )
        lines.append(f"Supporting Facts: {facts}")
    by_id = {c.id: c for c in included}
    before = [
        by_id[s.src] for s in steps
        if s.type == "CAUSAL_PRECEDES" and s.dst == anchor.id and s.src in by_id
        and by_id[s.src].kind == "decision"
    ]  # fmt: skip
    after = [
        by_id[s.dst] for s in steps
        if s.type == "CAUSAL_PRECEDES" and s.src == anchor.id and s.dst in by_id
        and by_id[s.dst].kind == "decision"
    ]  # fmt: skip
    order = {c.id: i for i, c in enumerate(included)}
    links = []
    if before:
        first = min(before, key=lambda c: order[c.id])
        links.append(f"From: {part(first.title).rstrip('.')}.")
    if after:
        first = min(after, key=lambda c: order[c.id])
        links.append(f"Next: {part(first.title).rstrip('.')}.")
    if links:
        lines.append(" ".join(links))
    note = PERMISSION_NOTE if withheld else None
    text, clamped = _clamp_lines(lines)
    clamps += clamped
    if note:
        text = f"{text}\n{note}"
    cited = (anchor.id, *(c.id for c in included))
    return Envelope(
        text=text, lines=tuple(text.split("\n")), note=note, cited_ids=cited, clamps=clamps
    )


def _clamp_lines(lines: list[str]) -> tuple[str, bool]:
    text = "\n".join(lines)
    if len(text) <= MAX_ANSWER_CHARS:
        return text, False
    return text[: MAX_ANSWER_CHARS - 1].rstrip() + "…", True
