"""From recall's candidate lists to ranked hits: fuse → collapse → session evidence → rerank
→ time boost.

Every knob these stages take is in :class:`RankingConfig`, so a benchmark can search them
on some questions and score the choice on others (``bench/locomo.py --cv``), and the
defaults are the values chosen that way (docs/retrieval.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.rerank import query_entities, query_words, rerank_scores
from cairn.retrieval.sessions import session_evidence, session_keys
from cairn.retrieval.types import Hit, Mode
from cairn.retrieval.weights import DEFAULT_CONTEXT_WEIGHT, DEFAULT_FUSION, Fusion
from cairn.retrieval.when import TimeWindow, closeness
from cairn.store.base import ChunkRow

__all__ = ["DEFAULT_RANKING", "RankingConfig", "later_scores", "rank", "reorder", "source_times"]


@dataclass(frozen=True, slots=True)
class RankingConfig:
    """How fusion combines the signals and what the stages after it weigh. All boosts at 0
    leave fusion's order as it is."""

    #: how the keyword and vector lists are fused (``weights.Fusion``)
    fusion: Fusion = DEFAULT_FUSION
    #: how much each matching context chunk (``Content.context``) adds to its version
    context_weight: float = DEFAULT_CONTEXT_WEIGHT
    #: session evidence (``sessions.py``): share of the session's other hits' scores added
    session_weight: float = 0.0
    #: how many of those other hits count
    session_depth: int = 2
    #: reranking (``rerank.py``): boost per share of the query's names and numbers held
    entity_weight: float = 0.0
    #: reranking: boost per share of the query's content words in the title
    title_weight: float = 0.0
    #: time in the query (``when.py``): boost for a source time inside the query's window
    time_weight: float = 0.0
    #: how many fused hits the later stages reorder (at least k)
    pool: int = 50

    @property
    def reorders(self) -> bool:
        """Whether a stage after fusion may change the order (whether it does for a given
        query: :meth:`reorders_for`)."""
        return bool(
            self.session_weight or self.entity_weight or self.title_weight or self.time_weight
        )

    def reorders_for(self, query: str, window: TimeWindow | None) -> bool:
        """Whether a stage after fusion changes the order for ``query``. A boost that is
        the same for every candidate leaves fusion's order (ties included) as it is, and
        is skipped with the 50 hits it would build: the entity boost for a query naming no
        name or number, the title boost for one of stopwords only, the time boost for one
        naming no time."""
        return bool(
            self.session_weight
            or (self.entity_weight and query_entities(query))
            or (self.title_weight and query_words(query))
            or (self.time_weight and window is not None)
        )


DEFAULT_RANKING = RankingConfig()


def later_scores(
    hits: Sequence[Hit],
    sessions: Mapping[str, str],
    query: str,
    config: RankingConfig,
    *,
    window: TimeWindow | None = None,
    times: Mapping[str, datetime] | None = None,
) -> list[float]:
    """The hits' scores after session evidence, reranking and the time boost, in the order
    given.

    ``sessions`` maps a version id to its session (:func:`session_keys`), ``times`` a
    version id to when its text was said or written (:func:`source_times`).
    """
    scores = session_evidence(
        [h.scores.fused for h in hits],
        [sessions.get(h.version_id) for h in hits],
        weight=config.session_weight,
        depth=config.session_depth,
    )
    scores = rerank_scores(
        scores,
        [h.title for h in hits],
        [h.text for h in hits],
        query,
        entity_weight=config.entity_weight,
        title_weight=config.title_weight,
    )
    if window is None or not config.time_weight:
        return scores
    known = times or {}
    return [
        score * (1.0 + config.time_weight * closeness(known.get(hit.version_id), window))
        for score, hit in zip(scores, hits, strict=True)
    ]


def source_times(rows: Iterable[ChunkRow]) -> dict[str, datetime]:
    """When each version's text was said or written: its chunks' source time (a turn's,
    an event's), else when the version was stored."""
    return {row.meta.version_id: row.meta.source_time or row.meta.created_at for row in rows}


def reorder(hits: Sequence[Hit], scores: Sequence[float], k: int) -> list[Hit]:
    """The best ``k`` hits by ``scores`` (ties by version id), carrying their new score."""
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], hits[i].version_id))[:k]
    out: list[Hit] = []
    for i in order:
        hit = hits[i]
        if scores[i] != hit.scores.fused:
            scored = hit.scores.model_copy(update={"fused": scores[i]})
            hit = hit.model_copy(update={"scores": scored})
        out.append(hit)
    return out


def rank(
    keyword: Sequence[tuple[int, float]],
    vector: Sequence[tuple[int, float]],
    rows: Mapping[int, ChunkRow],
    scopes: Mapping[int, str],
    *,
    query: str,
    mode: Mode,
    k: int,
    weights: Mapping[str, float] | None = None,
    config: RankingConfig = DEFAULT_RANKING,
    window: TimeWindow | None = None,
    vector_complete: bool = False,
) -> list[Hit]:
    """The best ``k`` hits for recall's ``keyword`` and ``vector`` lists of ``(chunk id,
    score)``; ``rows`` holds those chunks, ``scopes`` names scope ids; ``window`` is the
    time the query names (``when.query_window``), if any; ``vector_complete`` whether recall
    found fewer vector candidates than it asked for (``fuse``)."""
    fused = fuse(
        keyword, vector, mode=mode, weights=weights, fusion=config.fusion,
        vector_complete=vector_complete,
    )  # fmt: skip
    if not config.reorders_for(query, window):
        return collapse(fused, rows, scopes, k, context_weight=config.context_weight)
    hits = collapse(fused, rows, scopes, max(k, config.pool), context_weight=config.context_weight)
    scores = later_scores(
        hits,
        session_keys(rows.values()),
        query,
        config,
        window=window,
        times=source_times(rows.values()) if window is not None else None,
    )
    return reorder(hits, scores, k)
