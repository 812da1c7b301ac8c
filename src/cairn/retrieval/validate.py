"""Stage 4, validate: provenance, supersession, validity, confidence, contradictions.

Confidence, clamped to [0, 1]:

    base        = fused score / the best possible fused score for the mode
    − 0.05 × (version − 1)                 older lineages carry more revision risk
    − 0.10 if the version has a valid_to   an expiring belief
    − 0.10 if its confidence is "inferred" not yet supported by evidence or a human
    − 0.20 if it is a draft                drafts are non-authoritative

Results are then sorted by confidence (stable, so ties keep their fused order).
Contradictions are flagged between beliefs/facts of one scope and never resolved.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from cairn.model import Confidence, Record, Status, Version
from cairn.retrieval.types import Citation, Contradiction, Hit, Item, Scores, Why
from cairn.search.fts import fts_tokens

if TYPE_CHECKING:
    from cairn.search.catalog import FloatArray

__all__ = [
    "CONTRADICTION_KINDS",
    "NEGATIONS",
    "SIMILAR_COSINE",
    "SIMILAR_JACCARD",
    "Validated",
    "confidence_score",
    "direct_item",
    "find_contradictions",
    "validate",
]

NEGATIONS = frozenset(
    {
        "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "can't",
        "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't",
        "wouldn't", "shouldn't", "mustn't", "without", "false", "avoid", "stop",
    }
)  # fmt: skip
CONTRADICTION_KINDS = frozenset({"belief", "fact"})
SIMILAR_COSINE = 0.80
SIMILAR_JACCARD = 0.5
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class Validated:
    items: list[Item]
    contradictions: list[Contradiction]
    dropped: dict[str, int] = field(default_factory=dict)


def confidence_score(base: float, version: Version, status: Status) -> float:
    content = version.content
    score = base - 0.05 * (version.number - 1)
    if content.valid_to is not None:
        score -= 0.10
    if content.confidence is Confidence.INFERRED:
        score -= 0.10
    if status is Status.DRAFT:
        score -= 0.20
    return max(0.0, min(1.0, score))


def _why_dropped(
    record: Record | None, version: Version | None, hit: Hit, now: datetime
) -> str | None:
    if record is None or version is None or version.record_id != hit.record_id:
        return "orphan"  # the index points at something the store does not hold
    if record.superseded_by is not None:
        return "superseded"
    if record.status not in (Status.ACTIVE, Status.DRAFT):
        return "status"
    content = version.content
    if content.valid_to is not None and content.valid_to <= now:
        return "expired"
    if content.valid_from is not None and content.valid_from > now:
        return "not_yet_valid"
    return None


def _flags(record: Record, version: Version) -> tuple[str, ...]:
    flags: list[str] = []
    if record.status is Status.DRAFT:
        flags.append("draft_non_authoritative")
    if version.content.confidence is Confidence.INFERRED:
        flags.append("inferred")
    if version.content.provenance.source_kind == "INGESTED_EVIDENCE":
        flags.append("ingested_evidence")
    if version.id != record.current_version_id:
        flags.append("not_head")
    return tuple(flags)


def validate(
    hits: Sequence[Hit],
    *,
    records: Mapping[str, Record],
    versions: Mapping[str, Version],
    now: datetime,
    best_possible: float,
    vector_of: Callable[[int], FloatArray | None],
) -> Validated:
    items: list[Item] = []
    dropped: dict[str, int] = {}
    kept_hits: list[Hit] = []
    for hit in hits:
        record, version = records.get(hit.record_id), versions.get(hit.version_id)
        reason = _why_dropped(record, version, hit, now)
        if reason is not None:
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        assert record is not None and version is not None
        base = hit.scores.fused / best_possible if best_possible > 0 else 0.0
        confidence = confidence_score(min(1.0, base), version, record.status)
        items.append(
            _item(
                record,
                version,
                scope=record.scope,
                text=hit.text or version.content.body or version.content.title,
                citations=hit.citations,
                why_included=hit.why_included,
                scores=hit.scores.model_copy(update={"confidence": round(confidence, 4)}),
            )
        )
        kept_hits.append(hit)
    first_chunk = {hit.version_id: hit.chunk_ids[0] for hit in kept_hits}
    contradictions = find_contradictions(
        items, lambda item: vector_of(first_chunk[item.version_id])
    )
    order = sorted(range(len(items)), key=lambda i: -(items[i].scores.confidence or 0.0))
    return Validated(
        items=[items[i] for i in order], contradictions=contradictions, dropped=dropped
    )


def _polarity(tokens: set[str]) -> bool:
    return bool(tokens & NEGATIONS)


def _similar(
    a: Item,
    b: Item,
    ta: set[str],
    tb: set[str],
    vector_of: Callable[[Item], FloatArray | None],
) -> bool:
    """Both must talk about the same thing: most content words shared (numbers and
    negations aside) and, when vectors exist, close in embedding space too."""
    wa = {t for t in ta - NEGATIONS if not t.isdigit()}
    wb = {t for t in tb - NEGATIONS if not t.isdigit()}
    if not wa or not wb or len(wa & wb) / len(wa | wb) < SIMILAR_JACCARD:
        return False
    va, vb = vector_of(a), vector_of(b)
    return va is None or vb is None or float(va.dot(vb)) >= SIMILAR_COSINE


def find_contradictions(
    items: Sequence[Item], vector_of: Callable[[Item], FloatArray | None] = lambda _item: None
) -> list[Contradiction]:
    """A heuristic (false positives acceptable): two beliefs or facts of one
    scope that say nearly the same thing, where one negates it or the numbers differ."""
    found: list[Contradiction] = []
    candidates = [
        (item, set(fts_tokens(f"{item.title} {item.content}")))
        for item in items
        if item.kind in CONTRADICTION_KINDS
    ]
    for i, (a, ta) in enumerate(candidates):
        for b, tb in candidates[i + 1 :]:
            if a.scope != b.scope or a.record_id == b.record_id:
                continue
            if not _similar(a, b, ta, tb, vector_of):
                continue
            na, nb = set(_NUMBER.findall(a.content)), set(_NUMBER.findall(b.content))
            if _polarity(ta) != _polarity(tb):
                reason = "one negates what the other asserts"
            elif na and nb and na != nb:
                reason = "they state different numbers"
            else:
                continue
            found.append(
                Contradiction(
                    record_ids=(a.record_id, b.record_id),
                    version_ids=(a.version_id, b.version_id),
                    reason=reason,
                )
            )
    return found


def direct_item(record: Record, version: Version, why: Why, *, scope: str) -> Item:
    """A whole version as an item, for direct fetches and relationship reads."""
    return _item(
        record,
        version,
        scope=scope,
        text=version.content.body or version.content.title,
        citations=(Citation(record_id=record.id, version_id=version.id, scope=scope),),
        why_included=(why,),
        scores=Scores(confidence=round(confidence_score(1.0, version, record.status), 4)),
    )


def _item(
    record: Record,
    version: Version,
    *,
    scope: str,
    text: str,
    citations: tuple[Citation, ...],
    why_included: tuple[Why, ...],
    scores: Scores,
) -> Item:
    """``version`` of ``record`` as an item: ``text`` as its content, the rest from the
    version's content and the record's state, with how it was found and scored."""
    content = version.content
    return Item(
        record_id=record.id,
        version_id=version.id,
        version=version.number,
        kind=record.kind,
        scope=scope,
        status=record.status.value,
        title=content.title,
        content=text,
        origin=content.origin.value,
        confidence_label=content.confidence.value,
        provenance=content.provenance,
        valid_from=content.valid_from.isoformat() if content.valid_from else None,
        valid_to=content.valid_to.isoformat() if content.valid_to else None,
        metadata=content.metadata,
        citations=citations,
        why_included=why_included,
        scores=scores,
        flags=_flags(record, version),
    )
