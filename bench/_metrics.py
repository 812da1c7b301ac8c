"""Retrieval metrics for the benchmarks: recall@k, NDCG@k and per-group aggregation.

All metrics take a ranked list of keys (best first) and the set of gold keys. Repeated keys in
a ranking count once, at their best position (a session returned through two of its turns is
one session).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = [
    "Aggregate",
    "dedupe",
    "ndcg_at_k",
    "recall_any_at_k",
    "recall_at_k",
]

K = TypeVar("K", bound=Hashable)


def dedupe(ranked: Iterable[K]) -> list[K]:
    """Keep the first occurrence of each key, in order."""
    return list(dict.fromkeys(ranked))


def recall_at_k(ranked: Sequence[K], gold: Iterable[K], k: int) -> float:
    """Share of gold keys found among the first ``k`` distinct keys of ``ranked``.

    An empty gold set gives ``nan`` (such questions are skipped by :class:`Aggregate`).
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    wanted = set(gold)
    if not wanted:
        return math.nan
    top = set(dedupe(ranked)[:k])
    return len(wanted & top) / len(wanted)


def recall_any_at_k(ranked: Sequence[K], gold: Iterable[K], k: int) -> float:
    """1.0 when at least one gold key is among the first ``k`` distinct keys, else 0.0."""
    wanted = set(gold)
    if not wanted:
        return math.nan
    return 1.0 if wanted & set(dedupe(ranked)[:k]) else 0.0


def ndcg_at_k(ranked: Sequence[K], gold: Iterable[K], k: int = 10) -> float:
    """Binary-relevance NDCG@k: ``DCG = sum 1/log2(rank+1)`` over gold hits, over the ideal DCG."""
    if k < 1:
        raise ValueError("k must be at least 1")
    wanted = set(gold)
    if not wanted:
        return math.nan
    dcg = sum(
        1.0 / math.log2(rank + 1)
        for rank, key in enumerate(dedupe(ranked)[:k], start=1)
        if key in wanted
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


class Aggregate:
    """Mean of named metrics, overall and per group (e.g. category or question type).

    ``add(group, {"turn_recall@10": 0.5, ...})`` per question; ``nan`` values are skipped, so a
    question with no gold for one metric does not drag that metric's mean.
    """

    def __init__(self) -> None:
        self._sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._questions: dict[str, int] = defaultdict(int)

    def add(self, group: str, values: Mapping[str, float]) -> None:
        self._questions[group] += 1
        self._questions["all"] += 1
        for name, value in values.items():
            if math.isnan(value):
                continue
            for bucket in (group, "all"):
                self._sums[bucket][name] += value
                self._counts[bucket][name] += 1

    def groups(self) -> list[str]:
        """Group names, sorted, then ``"all"``."""
        return [*sorted(g for g in self._questions if g != "all"), "all"]

    def count(self, group: str = "all") -> int:
        return self._questions.get(group, 0)

    def mean(self, name: str, group: str = "all") -> float:
        count = self._counts.get(group, {}).get(name, 0)
        return self._sums[group][name] / count if count else math.nan

    def metrics(self) -> list[str]:
        names = {name for bucket in self._counts.values() for name in bucket}
        return sorted(names, key=_metric_order)

    def as_dict(self) -> dict[str, object]:
        """``{metric: mean over all, ..., "n": count, "by_group": {group: {...}}}``."""
        out: dict[str, object] = {name: self.mean(name) for name in self.metrics()}
        out["n"] = self.count()
        out["by_group"] = {
            group: {"n": self.count(group), **{m: self.mean(m, group) for m in self.metrics()}}
            for group in self.groups()
            if group != "all"
        }
        return out


def _metric_order(name: str) -> tuple[str, int]:
    base, _, k = name.partition("@")
    return (base, int(k) if k.isdigit() else 0)
