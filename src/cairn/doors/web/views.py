"""What the console's pages show, worked out from kernel values: text to diff, side-by-side
diff rows, one-line summaries, links. Presentation only; no rule lives here."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cairn.model import (
    Content,
    CreateChange,
    LinkChange,
    Proposal,
    PublishChange,
    SupersedeChange,
    TransitionChange,
    UnlinkChange,
    UpdateChange,
)

__all__ = [
    "AGES",
    "DiffRow",
    "content_lines",
    "older_than",
    "proposed_content",
    "side_by_side",
    "subject_link",
    "summary",
]

# The queue's age filter: label → how old a proposal must at least be.
AGES: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def older_than(age: str | None, now: datetime | None = None) -> datetime | None:
    if not age or age not in AGES:
        return None
    return (now or datetime.now(UTC)) - AGES[age]


@dataclass(frozen=True)
class DiffRow:
    left_no: int | None
    left: str
    right_no: int | None
    right: str
    tag: str  # equal, replace, delete, insert


def content_lines(content: Content | None) -> list[str]:
    """A version's content as the lines a curator compares: the fields, then the body."""
    if content is None:
        return []
    lines = [
        f"title: {content.title}",
        f"kind: {content.kind}",
        f"scope: {content.scope}",
        f"tags: {', '.join(content.tags)}",
        f"confidence: {content.confidence.value}",
        f"labels: {', '.join(content.acl.labels)}",
    ]
    if content.metadata:
        lines += [f"metadata.{k}: {v}" for k, v in sorted(content.metadata.items())]
    return [*lines, "", *content.body.splitlines()]


def side_by_side(before: list[str], after: list[str]) -> list[DiffRow]:
    """Line-aligned rows of ``before`` against ``after``."""
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [
                DiffRow(i + 1, before[i], j + 1, after[j], tag)
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            continue
        span = max(i2 - i1, j2 - j1)
        for n in range(span):
            i, j = i1 + n, j1 + n
            rows.append(
                DiffRow(
                    i + 1 if i < i2 else None,
                    before[i] if i < i2 else "",
                    j + 1 if j < j2 else None,
                    after[j] if j < j2 else "",
                    tag,
                )
            )
    return rows


def proposed_content(proposal: Proposal, base: Content | None) -> Content | None:
    """The content the proposal would leave, given the content it is based on (``None``
    for a change that makes no content: a link, a publish, a status move)."""
    change = proposal.change
    if isinstance(change, CreateChange):
        return change.content
    if isinstance(change, UpdateChange):
        return change.patch.apply(base) if base is not None else None
    if isinstance(change, SupersedeChange):
        return change.content
    return None


def summary(proposal: Proposal) -> str:
    """One line saying what a proposal asks for."""
    change = proposal.change
    if isinstance(change, CreateChange):
        draft = " (draft)" if change.draft else ""
        return f"new {change.content.kind}{draft}: {change.content.title}"
    if isinstance(change, UpdateChange):
        fields = ", ".join(sorted(change.patch.model_dump(exclude_none=True))) or "no fields"
        return f"update {change.record_id} ({fields})"
    if isinstance(change, SupersedeChange):
        by = change.by or (change.content.title if change.content else "new content")
        return f"supersede {change.record_id} by {by}"
    if isinstance(change, TransitionChange):
        return f"move {change.record_id} to {change.to.value}"
    if isinstance(change, PublishChange):
        return f"publish {len(change.pins)} record(s) in {change.scope}"
    if isinstance(change, LinkChange):
        edge = change.edge
        return f"link {edge.src} {edge.type} {edge.dst}"
    if isinstance(change, UnlinkChange):
        return f"remove edge {change.edge_id}"
    return proposal.change.op


def subject_link(subject_id: str | None) -> str | None:
    """The console page of an id an audit entry names, if it has one."""
    if not subject_id:
        return None
    if subject_id.startswith("rec_"):
        return f"/ui/records/{subject_id}"
    if subject_id.startswith("prp_"):
        return f"/ui/proposals/{subject_id}"
    return None
