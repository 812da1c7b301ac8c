"""Stage 3, fuse: weighted reciprocal rank fusion over chunks, then one hit per version.

A version's own chunks and its search-context chunks (``Content.context``, e.g. the turns
around a conversation turn) compete in the same keyword ranking; a version ranks by its
best chunk. A version found only through its context is cited whole, never by the context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cairn.retrieval.chunking import is_context_key
from cairn.retrieval.types import Citation, Excerpt, Hit, Mode, Scores, Why
from cairn.search.fusion import FusedHit, rrf
from cairn.store.base import ChunkRow

RRF_K = 60
DEFAULT_WEIGHTS: Mapping[str, float] = {"vector": 0.6, "keyword": 0.4}
CITED_CHUNKS_PER_HIT = 3


def fuse(
    keyword: Sequence[tuple[int, float]],
    vector: Sequence[tuple[int, float]],
    *,
    mode: Mode,
    weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    lists: dict[str, list[str]] = {}
    raw: dict[str, dict[str, float]] = {}
    if mode in ("hybrid", "keyword"):
        lists["keyword"] = [str(i) for i, _ in keyword]
        raw["keyword"] = {str(i): s for i, s in keyword}
    if mode in ("hybrid", "vector"):
        lists["vector"] = [str(i) for i, _ in vector]
        raw["vector"] = {str(i): s for i, s in vector}
    chosen = dict(weights or DEFAULT_WEIGHTS)
    return rrf(lists, {name: chosen.get(name, 0.0) for name in lists}, RRF_K, raw_scores=raw)


def max_fused_score(weights: Mapping[str, float] | None, mode: Mode) -> float:
    """The fused score of a chunk ranked first by every signal in play (for normalising)."""
    chosen = dict(weights or DEFAULT_WEIGHTS)
    names = {"hybrid": ("keyword", "vector"), "keyword": ("keyword",), "vector": ("vector",)}
    return sum(chosen.get(n, 0.0) for n in names[mode]) / (RRF_K + 1)


@dataclass
class _Group:
    row: ChunkRow
    best: FusedHit
    citations: list[Citation] = field(default_factory=list)
    chunk_ids: list[int] = field(default_factory=list)


def _citation(row: ChunkRow, scope: str) -> Citation:
    if is_context_key(row.chunk_key):
        # found through its context: cite the whole version, never the context text
        return Citation(record_id=row.meta.record_id, version_id=row.meta.version_id, scope=scope)
    return Citation(
        record_id=row.meta.record_id,
        version_id=row.meta.version_id,
        scope=scope,
        chunk_key=row.chunk_key,
        excerpt=Excerpt(chunk_key=row.chunk_key, start=row.start, end=row.end),
    )


def collapse(
    fused: Sequence[FusedHit],
    rows: Mapping[int, ChunkRow],
    scopes: Mapping[int, str],
    limit: int,
) -> list[Hit]:
    """One hit per record version, ranked by its best chunk; later chunks become citations."""
    groups: dict[str, _Group] = {}
    for hit in fused:
        row = rows.get(int(hit.key))
        if row is None:
            continue
        group = groups.get(row.meta.version_id)
        if group is None:
            if len(groups) >= limit:
                continue
            group = groups[row.meta.version_id] = _Group(row=row, best=hit)
        elif len(group.citations) >= CITED_CHUNKS_PER_HIT or is_context_key(row.chunk_key):
            continue
        group.citations.append(_citation(row, scopes.get(row.meta.scope_id, "")))
        group.chunk_ids.append(row.meta.id)
    return [_hit(group, scopes) for group in groups.values()]


def _hit(group: _Group, scopes: Mapping[int, str]) -> Hit:
    row, best = group.row, group.best
    why: list[Why] = []
    if "keyword" in best.ranks:
        why.append("keyword_match")
    if "vector" in best.ranks:
        why.append("vector_match")
    return Hit(
        record_id=row.meta.record_id,
        version_id=row.meta.version_id,
        version=row.version_no,
        kind=row.meta.kind,
        scope=scopes.get(row.meta.scope_id, ""),
        status=row.meta.status,
        title=row.title,
        text="" if is_context_key(row.chunk_key) else row.text,
        chunk_ids=tuple(group.chunk_ids),
        citations=tuple(group.citations),
        why_included=tuple(why),
        scores=Scores(
            fused=best.score,
            keyword=best.raw_scores.get("keyword"),
            keyword_rank=best.ranks.get("keyword"),
            vector=best.raw_scores.get("vector"),
            vector_rank=best.ranks.get("vector"),
        ),
    )
