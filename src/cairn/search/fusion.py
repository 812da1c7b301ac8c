"""Fusing ranked lists from several recall signals (keyword, vector, graph, ...).

:func:`rrf` is weighted reciprocal rank fusion (Cormack et al. 2009):
``score(d) = sum_i weight_i / (k + rank_i(d))`` with 1-based ranks, summed over
the signals that returned ``d``. :func:`weighted_score_fusion` is the
alternative: a weighted average of min-max normalised raw scores.
:func:`rank_and_score_fusion` takes some signals by rank and others by score.
Both keep every signal's rank (and raw score when given) so an answer can show
why each item ranked where it did.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["FusedHit", "rank_and_score_fusion", "rrf", "weighted_score_fusion"]


@dataclass(frozen=True, slots=True)
class FusedHit:
    """One fused result.

    ``ranks`` maps each signal that returned the key to its 1-based rank there;
    ``raw_scores`` holds that signal's own score where the caller supplied one.
    """

    key: str
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)
    raw_scores: Mapping[str, float] = field(default_factory=dict)


def _check_weights(signals: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return dict.fromkeys(signals, 1.0)
    missing = [name for name in signals if name not in weights]
    if missing:
        # A typo in a signal name would otherwise silently drop that signal.
        raise ValueError(f"no weight for signal(s): {', '.join(sorted(missing))}")
    checked = {name: float(weights[name]) for name in signals}
    for name, weight in checked.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight of {name!r} must be finite and >= 0, got {weight}")
    return checked


def _ranks(ranked: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for position, key in enumerate(ranked, start=1):
        ranks.setdefault(key, position)  # a repeated key keeps its best rank
    return ranks


def _sorted_hits(hits: list[FusedHit], limit: int | None) -> list[FusedHit]:
    # Ties (equal fused score) break by key so output never depends on dict order.
    hits.sort(key=lambda hit: (-hit.score, hit.key))
    return hits if limit is None else hits[:limit]


def rrf(
    ranked_lists: Mapping[str, Sequence[str]],
    weights: Mapping[str, float] | None = None,
    k: int = 60,
    *,
    raw_scores: Mapping[str, Mapping[str, float]] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Weighted reciprocal rank fusion of ``{signal: [key, ...best first]}``.

    ``weights`` maps every signal to a weight >= 0 (``None``: all 1.0); a signal
    without a weight is an error. ``k`` damps the advantage of top ranks (60 is
    the customary value). ``raw_scores[signal][key]`` is copied onto the hits
    for display only; it does not affect the fused score. Returns hits sorted by
    fused score (best first), ties by key, at most ``limit`` of them.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    signals = sorted(ranked_lists)
    weight = _check_weights(signals, weights)
    ranks_by_signal = {name: _ranks(ranked_lists[name]) for name in signals}
    keys = sorted({key for ranks in ranks_by_signal.values() for key in ranks})
    hits: list[FusedHit] = []
    for key in keys:
        ranks = {
            name: ranks_by_signal[name][key] for name in signals if key in ranks_by_signal[name]
        }
        # fsum is exactly rounded, so equal contributions in any order give equal scores.
        score = math.fsum(weight[name] / (k + rank) for name, rank in ranks.items())
        hits.append(FusedHit(key, score, ranks, _raw(raw_scores, ranks, key)))
    return _sorted_hits(hits, limit)


def weighted_score_fusion(
    scored_lists: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] | None = None,
    *,
    limit: int | None = None,
) -> list[FusedHit]:
    """Weighted average of per-signal min-max normalised scores.

    ``scored_lists`` maps each signal to ``(key, score)`` pairs, best first, with
    higher scores better (negate distances or bm25 values first). Each signal's
    scores are scaled to [0, 1] (all-equal scores become 1.0); a key a signal did
    not return counts 0 there. The fused score is ``sum(w_i * s_i) / sum(w_i)``.
    Unlike RRF this keeps score gaps, but it is sensitive to outliers.
    """
    signals = sorted(scored_lists)
    total_weight = math.fsum(_check_weights(signals, weights).values())
    summed = rank_and_score_fusion({}, scored_lists, weights)
    averaged = [
        FusedHit(hit.key, hit.score / total_weight if total_weight > 0 else 0.0, hit.ranks,
                 hit.raw_scores)
        for hit in summed
    ]  # fmt: skip
    return _sorted_hits(averaged, limit)


def rank_and_score_fusion(
    by_rank: Mapping[str, Sequence[tuple[str, float]]],
    by_score: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float] | None = None,
    k: int = 60,
    *,
    floors: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Signals fused by rank and signals fused by score, on one 0-1 scale.

    Both map each signal to ``(key, score)`` pairs, best first, higher scores better. A
    ``by_rank`` signal adds ``weight * (k + 1) / (k + rank)``: reciprocal rank fusion's
    curve, 1 at the top; its scores are kept for display only. A ``by_score`` signal adds
    ``weight * (score - low) / (high - low)`` over its own pairs (all-equal scores give 1),
    where ``low`` is its lowest score; with ``floors[signal]`` (the score of "matched
    nothing", for a list that holds every match there is) it adds ``weight * (score -
    floor) / (high - floor)`` instead, a score at or below the floor adding 0. A key a
    signal did not return adds 0 there. So a key first in every list scores the sum of the
    weights.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    overlap = set(by_rank) & set(by_score)
    if overlap:
        raise ValueError(f"signal(s) fused both by rank and by score: {', '.join(sorted(overlap))}")
    floored = floors or {}
    if set(floored) - set(by_score):
        raise ValueError("floors apply only to signals fused by score")
    lists = {**by_rank, **by_score}
    signals = sorted(lists)
    weight = _check_weights(signals, weights)
    ranks_by_signal = {name: _ranks([key for key, _ in lists[name]]) for name in signals}
    raw: dict[str, dict[str, float]] = {}
    worth: dict[str, dict[str, float]] = {}
    for name in signals:
        best: dict[str, float] = {}
        for key, value in lists[name]:
            if not math.isfinite(value):
                raise ValueError(f"non-finite score for {key!r} in signal {name!r}")
            best.setdefault(key, float(value))
        raw[name] = best
        if name in by_rank:
            worth[name] = {key: (k + 1) / (k + rank) for key, rank in ranks_by_signal[name].items()}
        elif name in floored:
            floor, high = floored[name], max(best.values(), default=0.0)
            span = high - floor
            worth[name] = {
                key: max(v - floor, 0.0) / span if span > 0 else 0.0 for key, v in best.items()
            }
        elif best:
            high, low = max(best.values()), min(best.values())
            span = high - low
            worth[name] = {key: (v - low) / span if span > 0 else 1.0 for key, v in best.items()}
        else:
            worth[name] = {}
    keys = sorted({key for ranks in ranks_by_signal.values() for key in ranks})
    hits: list[FusedHit] = []
    for key in keys:
        ranks = {
            name: ranks_by_signal[name][key] for name in signals if key in ranks_by_signal[name]
        }
        score = math.fsum(weight[name] * worth[name][key] for name in ranks)
        hits.append(FusedHit(key, score, ranks, {name: raw[name][key] for name in ranks}))
    return _sorted_hits(hits, limit)


def _raw(
    raw_scores: Mapping[str, Mapping[str, float]] | None, ranks: Mapping[str, int], key: str
) -> dict[str, float]:
    if raw_scores is None:
        return {}
    return {
        name: float(raw_scores[name][key])
        for name in ranks
        if name in raw_scores and key in raw_scores[name]
    }
