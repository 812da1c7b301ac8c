"""From recall's candidate lists to ranked hits: fuse → collapse → session evidence → rerank.

Every knob these stages take is in :class:`RankingConfig`, so a benchmark can search them
on some questions and score the choice on others (``bench/locomo.py --cv``), and the
defaults are the values chosen that way (docs/retrieval.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.rerank import rerank_scores
from cairn.retrieval.sessions import session_evidence, session_keys
from cairn.retrieval.types import Hit, Mode
from cairn.store.base import ChunkRow

__all__ = ["DEFAULT_RANKING", "RankingConfig", "later_scores", "rank", "reorder"]


@dataclass(frozen=True, slots=True)
class RankingConfig:
    """What the stages after recall weigh. All boosts at 0 leave fusion's order as it is."""

    #: how much each matching context chunk (``Content.context``) adds to its version
    context_weight: float = 1.0
    #: session evidence (``sessions.py``): share of the session's other hits' scores added
    session_weight: float = 0.0
    #: how many of those other hits count
    session_depth: int = 2
    #: reranking (``rerank.py``): boost per share of the query's names and numbers held
    entity_weight: float = 0.0
    #: reranking: boost per share of the query's content words in the title
    title_weight: float = 0.0
    #: how many fused hits the later stages reorder (at least k)
    pool: int = 50

    @property
    def reorders(self) -> bool:
        return bool(self.session_weight or self.entity_weight or self.title_weight)


DEFAULT_RANKING = RankingConfig()


def later_scores(
    hits: Sequence[Hit], sessions: Mapping[str, str], query: str, config: RankingConfig
) -> list[float]:
    """The hits' scores after session evidence and reranking, in the order given.

    ``sessions`` maps a version id to its session (:func:`session_keys`).
    """
    scores = session_evidence(
        [h.scores.fused for h in hits],
        [sessions.get(h.version_id) for h in hits],
        weight=config.session_weight,
        depth=config.session_depth,
    )
    return rerank_scores(
        scores,
        [h.title for h in hits],
        [h.text for h in hits],
        query,
        entity_weight=config.entity_weight,
        title_weight=config.title_weight,
    )


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
) -> list[Hit]:
    """The best ``k`` hits for recall's ``keyword`` and ``vector`` lists of ``(chunk id,
    score)``; ``rows`` holds those chunks, ``scopes`` names scope ids."""
    fused = fuse(keyword, vector, mode=mode, weights=weights)
    if not config.reorders:
        return collapse(fused, rows, scopes, k, context_weight=config.context_weight)
    hits = collapse(fused, rows, scopes, max(k, config.pool), context_weight=config.context_weight)
    scores = later_scores(hits, session_keys(rows.values()), query, config)
    return reorder(hits, scores, k)
