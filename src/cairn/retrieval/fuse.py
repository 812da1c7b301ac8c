"""Stage 3, fuse: the signals' candidate lists fused over chunks (keyword by rank and vector
by similarity, or both by reciprocal rank), then one hit per version.

A version's own chunks and its search-context chunks (``Content.context``, e.g. the turns
around a conversation turn) compete in the same rankings. A version scores by its best own
chunk (a long document does not win by having many sections) plus what each of its context
chunks scored: context is extra evidence that the version is the one asked about, and on
LoCoMo adding it rather than taking the best chunk lifts hybrid turn recall@10 from 73.0% to
76.6% (docs/benchmarks.md). A version found only through its context is cited whole, never by the
context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cairn.retrieval.chunking import is_context_key
from cairn.retrieval.types import Citation, Excerpt, Hit, Mode, Scores, Why
from cairn.retrieval.weights import (
    DEFAULT_CONTEXT_WEIGHT,
    DEFAULT_FUSION,
    SIGNALS,
    Fusion,
    chosen_weights,
)
from cairn.search.fusion import FusedHit, rank_and_score_fusion, rrf
from cairn.store.base import ChunkRow

__all__ = [
    "CITED_CHUNKS_PER_HIT",
    "RRF_K",
    "collapse",
    "fuse",
    "max_fused_score",
]

RRF_K = 60
CITED_CHUNKS_PER_HIT = 3


def fuse(
    keyword: Sequence[tuple[int, float]],
    vector: Sequence[tuple[int, float]],
    *,
    mode: Mode,
    weights: Mapping[str, float] | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    vector_complete: bool = False,
) -> list[FusedHit]:
    """Recall's ``(chunk id, score)`` lists (higher scores better, best first) fused into one
    ranking of chunks, by the signals ``mode`` uses, as ``fusion`` says (``weights.Fusion``).
    ``vector_complete``: recall found fewer vector candidates than it asked for, so the
    list holds every chunk the reader may see."""
    scored: dict[str, list[tuple[str, float]]] = {}
    if mode in ("hybrid", "keyword"):
        scored["keyword"] = [(str(i), s) for i, s in keyword]
    if mode in ("hybrid", "vector"):
        scored["vector"] = [(str(i), s) for i, s in vector]
    chosen = chosen_weights(weights)
    signal_weights = {name: chosen.get(name, 0.0) for name in scored}
    if fusion == "similarity":
        # Keyword by rank: a keyword score's size weighs the query's words over the whole
        # index, withheld records included, so a fused score made from it would count them
        # (pipeline._without_keyword_score). Vector by similarity, which depends on nothing
        # but the query and the chunk, scaled over the reader's own candidates: from the
        # last (0) to the first (1), or from "similar to nothing" (0) when the list
        # holds every chunk there is.
        vector_side = {"vector": scored.pop("vector")} if "vector" in scored else {}
        floors = {"vector": 0.0} if vector_complete and vector_side else None
        return rank_and_score_fusion(scored, vector_side, signal_weights, RRF_K, floors=floors)
    lists = {name: [key for key, _ in pairs] for name, pairs in scored.items()}
    raw = {name: dict(pairs) for name, pairs in scored.items()}
    return rrf(lists, signal_weights, RRF_K, raw_scores=raw)


def max_fused_score(
    weights: Mapping[str, float] | None, mode: Mode, fusion: Fusion = DEFAULT_FUSION
) -> float:
    """The fused score of a chunk ranked first by every signal in play (for normalising)."""
    chosen = chosen_weights(weights)
    total = sum(chosen.get(n, 0.0) for n in SIGNALS[mode])
    return total if fusion == "similarity" else total / (RRF_K + 1)


@dataclass
class _Group:
    """The chunks of one version among the fused hits (which arrive best first)."""

    row: ChunkRow  # its best own chunk; its best context chunk until an own chunk shows up
    own: float | None = None  # fused score of the best own chunk
    context: float = 0.0  # fused scores of its context chunks, summed
    context_weight: float = DEFAULT_CONTEXT_WEIGHT  # what each matching context chunk adds
    ranks: dict[str, int] = field(default_factory=dict)
    raw: dict[str, float] = field(default_factory=dict)
    # the chunks to cite, as rows: citations are built only for the hits kept, since most
    # groups fall below the limit (building their models took 7% of a server's CPU under
    # MCP recall calls)
    cited: list[ChunkRow] = field(default_factory=list)

    @property
    def score(self) -> float:
        return (self.own or 0.0) + self.context_weight * self.context

    def add(self, row: ChunkRow, hit: FusedHit) -> None:
        for signal, rank in hit.ranks.items():
            if signal not in self.ranks:  # best first: the first rank seen is the best
                self.ranks[signal] = rank
                if signal in hit.raw_scores:
                    self.raw[signal] = hit.raw_scores[signal]
        if is_context_key(row.chunk_key):
            self.context += hit.score
            if not self.cited:
                self.cited.append(row)
            return
        if self.own is None:
            self.own, self.row = hit.score, row
            # an own chunk is the better citation: drop the whole-version one of the context
            self.cited.clear()
        if len(self.cited) < CITED_CHUNKS_PER_HIT:
            self.cited.append(row)


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
    *,
    context_weight: float = DEFAULT_CONTEXT_WEIGHT,
) -> list[Hit]:
    """One hit per record version: best own chunk plus ``context_weight`` times what its
    context chunks scored, best first.

    Further own chunks (up to ``CITED_CHUNKS_PER_HIT``) become citations, not score.
    """
    groups: dict[str, _Group] = {}
    for hit in fused:
        row = rows.get(int(hit.key))
        if row is None:
            continue
        group = groups.get(row.meta.version_id)
        if group is None:
            group = groups[row.meta.version_id] = _Group(row=row, context_weight=context_weight)
        group.add(row, hit)
    # ties break by version id so the order never depends on dict order
    ranked = sorted(groups.values(), key=lambda g: (-g.score, g.row.meta.version_id))
    return [_hit(group, scopes) for group in ranked[:limit]]


def _hit(group: _Group, scopes: Mapping[int, str]) -> Hit:
    row = group.row
    scope = scopes.get(row.meta.scope_id, "")
    why: list[Why] = []
    if "keyword" in group.ranks:
        why.append("keyword_match")
    if "vector" in group.ranks:
        why.append("vector_match")
    return Hit(
        record_id=row.meta.record_id,
        version_id=row.meta.version_id,
        version=row.version_no,
        kind=row.meta.kind,
        scope=scope,
        status=row.meta.status,
        title=row.title,
        text="" if is_context_key(row.chunk_key) else row.text,
        chunk_ids=tuple(cited.meta.id for cited in group.cited),
        citations=tuple(_citation(cited, scope) for cited in group.cited),
        why_included=tuple(why),
        scores=Scores(
            fused=group.score,
            keyword=group.raw.get("keyword"),
            keyword_rank=group.ranks.get("keyword"),
            vector=group.raw.get("vector"),
            vector_rank=group.ranks.get("vector"),
        ),
    )
