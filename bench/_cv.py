"""Cross-validation for the retrieval benchmarks: choose knobs on some questions, score on others.

How it stays cheap: each question is recalled once through the kernel
(:meth:`bench._adapter.KernelRetriever.capture`: the keyword and vector candidate lists and
their chunks), and every setting of the grid is then *replayed* from that capture with the
kernel's own ranking functions (``cairn.retrieval.ranking``: fuse, collapse, session
evidence, rerank), which is what ``Memory.search`` runs after recall. Replaying the
kernel's default setting gives exactly ``Memory.search``'s ranking (checked on the first
questions of each run).

For each fold, the setting with the best mean objective on the *other* folds is chosen
(ties go to the earlier setting of the grid, which starts with today's defaults) and scored
on the held-out fold; the report gives the mean and the spread of the held-out figures
across folds, next to the all-dev figure of the same procedure.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import pickle
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import numpy as np
from bench._adapter import Captured, Mode, Result
from rich.console import Console
from rich.table import Table

from bench import _progress
from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig, source_times
from cairn.retrieval.rerank import overlaps
from cairn.retrieval.sessions import session_evidence, session_keys
from cairn.retrieval.types import Hit
from cairn.retrieval.weights import Fusion, embedder_weights
from cairn.retrieval.when import TimeWindow, closeness, query_window

__all__ = [
    "DEFAULT_SETTING",
    "PROCEDURES",
    "STAGES",
    "FoldOutcome",
    "Part",
    "Setting",
    "candidates_for",
    "captures_match",
    "cross_validate",
    "cross_validate_joint",
    "default_setting",
    "evaluate",
    "hash_folds",
    "interleave",
    "load_captures",
    "make_grid",
    "nan_as_null",
    "percent",
    "print_cv",
    "procedures_json",
    "replay",
    "replay_modes",
    "run_procedures",
    "short_name",
    "spread",
    "summarise",
]

T = TypeVar("T")


def _default_first(default: T, values: Sequence[T]) -> tuple[T, ...]:
    return (default, *(v for v in values if v != default))


def keyword_share(weights: Mapping[str, float]) -> float:
    """The keyword share of fusion weights (the vector signal has the rest)."""
    return round(weights["keyword"] / (weights["keyword"] + weights["vector"]), 6)


#: Today's fusion knobs (how the lists are fused; the keyword share of the weights; how
#: much context chunks add), then the stages this work adds. Each list starts with the
#: kernel's default value (the keyword share's is the embedder's: ``make_grid`` puts it
#: first), so the grid's first setting is the kernel's defaults and a tie keeps them.
KEYWORD_SHARES = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
CONTEXT_WEIGHTS = _default_first(DEFAULT_RANKING.context_weight, (0.0, 0.5, 1.0))
FUSIONS: tuple[Fusion, ...] = _default_first(DEFAULT_RANKING.fusion, ("rrf", "similarity"))
SESSION = _default_first(
    (DEFAULT_RANKING.session_weight, DEFAULT_RANKING.session_depth),
    ((0.0, 2), (0.25, 1), (0.25, 2), (0.5, 1), (0.5, 2), (0.5, 4), (1.0, 2)),
)
RERANK = _default_first(
    (DEFAULT_RANKING.entity_weight, DEFAULT_RANKING.title_weight),
    ((0.0, 0.0), (0.25, 0.0), (0.5, 0.0), (0.0, 0.25), (0.0, 0.5), (0.25, 0.25)),
)
TIME_WEIGHTS = (0.0, 0.25, 0.5, 1.0)
STAGES = ("fusion", "sessions", "rerank", "time")


@dataclass(frozen=True, slots=True)
class Setting:
    """One grid point: fusion weights (keyword share, vector the rest) and the ranking knobs."""

    keyword: float
    ranking: RankingConfig = DEFAULT_RANKING

    @property
    def weights(self) -> dict[str, float]:
        return {"keyword": self.keyword, "vector": round(1.0 - self.keyword, 6)}

    def label(self) -> str:
        r = self.ranking
        parts = [f"kw {self.keyword:g}", f"ctx {r.context_weight:g}", r.fusion]
        if r.session_weight:
            parts.append(f"sess {r.session_weight:g}x{r.session_depth}")
        if r.entity_weight:
            parts.append(f"ent {r.entity_weight:g}")
        if r.title_weight:
            parts.append(f"title {r.title_weight:g}")
        if r.time_weight:
            parts.append(f"time {r.time_weight:g}")
        return ", ".join(parts)

    def stages(self) -> frozenset[str]:
        """The stages whose knobs this setting moves from the kernel's defaults."""
        r, d = self.ranking, DEFAULT_RANKING
        on = {"fusion"}
        # the depth counts only where session evidence is weighed
        depth = r.session_depth if r.session_weight else d.session_depth
        if (r.session_weight, depth) != (d.session_weight, d.session_depth):
            on.add("sessions")
        if (r.entity_weight, r.title_weight) != (d.entity_weight, d.title_weight):
            on.add("rerank")
        if r.time_weight != d.time_weight:
            on.add("time")
        return frozenset(on)


def default_setting(embedder: object) -> Setting:
    """The kernel's default ranking for a store whose vectors ``embedder`` makes (its
    default weights depend on it: ``weights.embedder_weights``)."""
    return Setting(keyword_share(embedder_weights(embedder)))


#: The kernel's default ranking with the default embedder's vectors, as a grid point.
DEFAULT_SETTING = default_setting(None)


def make_grid(stages: Sequence[str] = STAGES, embedder: object = None) -> list[Setting]:
    """Every combination of the knobs of ``stages`` (others at their default), the kernel's
    defaults for ``embedder`` first; the time boost is combined with the fusion knobs only
    (the other stages at their defaults), which keeps the grid small."""
    sessions = SESSION if "sessions" in stages else SESSION[:1]
    reranks = RERANK if "rerank" in stages else RERANK[:1]
    shares = _default_first(default_setting(embedder).keyword, KEYWORD_SHARES)
    out: list[Setting] = []
    for fusion, keyword, context, (sw, depth), (ew, tw) in itertools.product(
        FUSIONS, shares, CONTEXT_WEIGHTS, sessions, reranks
    ):
        ranking = replace(
            DEFAULT_RANKING,
            fusion=fusion,
            context_weight=context,
            session_weight=sw,
            session_depth=depth if sw else DEFAULT_RANKING.session_depth,
            entity_weight=ew,
            title_weight=tw,
        )
        out.append(Setting(keyword, ranking))
    if "time" in stages:
        for fusion, keyword, context, weight in itertools.product(
            FUSIONS, shares, CONTEXT_WEIGHTS, TIME_WEIGHTS[1:]
        ):
            ranking = replace(
                DEFAULT_RANKING, fusion=fusion, context_weight=context, time_weight=weight
            )
            out.append(Setting(keyword, ranking))
    return out


def read_out(hits: Sequence[Hit], refs: Mapping[str, tuple[str, str, str]], k: int) -> Result:
    """Turn keys and sessions from ranked hits, as ``KernelRetriever.search`` reads them."""
    turns: list[str] = []
    session_scores: dict[str, float] = defaultdict(float)
    for hit in hits:
        ref = refs.get(hit.record_id)
        if ref is None:
            continue
        if ref[0] == "turn":
            turns.append(ref[1])
        session_scores[ref[2]] += hit.scores.fused
    sessions = sorted(session_scores, key=lambda session: -session_scores[session])
    return Result(turns[:k] if k else turns, sessions)


def replay(
    captured: Captured,
    settings: Sequence[Setting],
    *,
    mode: Mode = "hybrid",
    k: int = 100,
    turns_cut: int = 0,
    sessions_cut: int = 0,
    asked_at: datetime | None = None,
) -> list[Result]:
    """Each setting's ranking of one captured question, through the kernel's stages.

    Fusion and collapse run through the kernel's functions once per fusion setting; the
    later stages' score arithmetic (``later_scores``: session evidence, then the rerank
    boost) is done here on arrays, with the support and overlap terms computed by the
    kernel's own functions, since rebuilding hit objects for every setting would take hours.
    ``turns_cut`` / ``sessions_cut`` (0: all) shorten the lists a scorer does not need.
    ``asked_at`` is when the question is asked (what "last week" is read against; the
    kernel reads it at the moment of the search): without it the time boost does nothing.
    """
    out: list[Result] = []
    cache: dict[tuple[float, float, str], _Prepared] = {}
    keys = session_keys(captured.rows.values())
    window = query_window(captured.query, now=asked_at) if asked_at is not None else None
    times = source_times(captured.rows.values())  # type: ignore[arg-type]
    for setting in settings:
        r = setting.ranking
        fusion_key = (setting.keyword, r.context_weight, r.fusion)
        prepared = cache.get(fusion_key)
        if prepared is None:
            fused = fuse(
                captured.keyword,
                captured.vector,
                mode=mode,
                weights=setting.weights,
                fusion=r.fusion,
                vector_complete=captured.vector_complete,
            )
            hits = collapse(
                fused,
                captured.rows,
                captured.scopes,
                max(k, r.pool),
                context_weight=r.context_weight,
            )
            prepared = cache[fusion_key] = _Prepared.of(hits, keys, captured, window, times)
        out.append(prepared.rank(r, k, turns_cut, sessions_cut))
    return out


class _Prepared:
    """One fusion setting's hits as arrays, with each depth's session support."""

    def __init__(self) -> None:
        self.base = np.zeros(0)
        self.tie = np.zeros(0)
        self.entity = np.zeros(0)
        self.title = np.zeros(0)
        self.time = np.zeros(0)
        self.support: dict[int, np.ndarray] = {}  # type: ignore[type-arg]
        self.sessions: list[str | None] = []
        self.turn_of: list[str | None] = []
        self.session_of: np.ndarray = np.zeros(0, dtype=np.int64)  # type: ignore[type-arg]
        self.session_names: list[str] = []

    @classmethod
    def of(
        cls,
        hits: Sequence[Hit],
        keys: Mapping[str, str],
        captured: Captured,
        window: TimeWindow | None,
        times: Mapping[str, datetime],
    ) -> _Prepared:
        p = cls()
        p.time = np.array(
            [closeness(times.get(h.version_id), window) if window else 0.0 for h in hits]
        )
        p.base = np.array([h.scores.fused for h in hits], dtype=np.float64)
        ids = [h.version_id for h in hits]
        order = sorted(range(len(ids)), key=ids.__getitem__)
        p.tie = np.empty(len(ids))
        p.tie[order] = np.arange(len(ids))
        shares = overlaps([h.title for h in hits], [h.text for h in hits], captured.query)
        p.entity = np.array([e for e, _ in shares])
        p.title = np.array([t for _, t in shares])
        p.sessions = [keys.get(h.version_id) for h in hits]
        base = list(p.base)
        for depth in {d for _, d in SESSION}:
            boosted = session_evidence(base, p.sessions, weight=1.0, depth=depth)
            p.support[depth] = np.array(boosted) - p.base
        names: dict[str, int] = {}
        codes: list[int] = []
        for h in hits:
            ref = captured.refs.get(h.record_id)
            p.turn_of.append(ref[1] if ref is not None and ref[0] == "turn" else None)
            if ref is None:
                codes.append(-1)
            else:
                codes.append(names.setdefault(ref[2], len(names)))
        p.session_of = np.array(codes, dtype=np.int64)
        p.session_names = list(names)
        return p

    def rank(self, r: RankingConfig, k: int, turns_cut: int, sessions_cut: int) -> Result:
        scores = self.base
        if r.reorders:
            scores = self.base + r.session_weight * self.support.get(
                r.session_depth, np.zeros_like(self.base)
            )
            scores = scores * (1.0 + r.entity_weight * self.entity + r.title_weight * self.title)
            scores = scores * (1.0 + r.time_weight * self.time)
            order = np.lexsort((self.tie, -scores))[:k]
        else:
            order = np.arange(min(k, len(scores)))
        turns = [t for t in (self.turn_of[i] for i in order) if t is not None]
        codes = self.session_of[order]
        known = codes >= 0
        sums = np.bincount(codes[known], weights=scores[order][known], minlength=0)
        first = np.full(len(self.session_names), len(order))
        for position, code in enumerate(codes):
            if code >= 0 and first[code] == len(order):
                first[code] = position
        present = np.flatnonzero(first < len(order))
        ranked = present[np.lexsort((first[present], -sums[present]))]
        sessions = [self.session_names[i] for i in ranked]
        return Result(
            turns[:turns_cut] if turns_cut else turns,
            sessions[:sessions_cut] if sessions_cut else sessions,
        )


Scorer = Callable[[int, Result], dict[str, float]]


def evaluate(
    captures: Sequence[Captured],
    settings: Sequence[Setting],
    scorer: Scorer,
    metrics: Sequence[str],
    *,
    mode: Mode = "hybrid",
    progress: Callable[[], None] | None = None,
    cut: tuple[int, int] = (0, 0),
    asked_at: Sequence[datetime | None] | None = None,
) -> np.ndarray:  # type: ignore[type-arg]
    """``values[setting, question, metric]`` (nan where a metric does not apply);
    ``asked_at``: when each question is asked (see :func:`replay`)."""
    values = np.full((len(settings), len(captures), len(metrics)), np.nan, dtype=np.float32)
    for q, captured in enumerate(captures):
        results = replay(
            captured, settings, mode=mode, turns_cut=cut[0], sessions_cut=cut[1],
            asked_at=asked_at[q] if asked_at is not None else None,
        )  # fmt: skip
        for s, result in enumerate(results):
            scored = scorer(q, result)
            for m, name in enumerate(metrics):
                values[s, q, m] = scored.get(name, math.nan)
        if progress is not None:
            progress()
    return values


def replay_modes(
    console: Console,
    title: str,
    captures: Sequence[Captured],
    grid: Sequence[Setting],
    scorer: Scorer,
    metrics: Sequence[str],
    *,
    cut: tuple[int, int] = (0, 0),
    asked_at: Sequence[datetime | None] | None = None,
) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """``values[setting, question, metric]`` of the hybrid ``grid``, and of keyword and vector
    alone at the grid's first setting (the defaults), with a progress bar."""
    with _progress.bar(console) as progress:
        task = progress.add_task(f"{title}: replay {len(grid)} settings", total=len(captures) * 3)

        def advance() -> None:
            progress.advance(task)

        values = {
            "hybrid": evaluate(
                captures, grid, scorer, metrics, progress=advance, cut=cut, asked_at=asked_at
            )
        }
        for mode in ("keyword", "vector"):
            values[mode] = evaluate(
                captures, grid[:1], scorer, metrics, mode=mode, progress=advance, cut=cut
            )
    return values


def captures_match(captures: Sequence[Captured], questions: Sequence[str]) -> bool:
    """Whether ``captures`` were made for ``questions``, one each and in order: a capture
    keeps its question's text, so a capture of other questions (another ``--limit``,
    ``--every`` or ``--offset``) is caught even where the counts agree."""
    return len(captures) == len(questions) and all(
        captured.query == question for captured, question in zip(captures, questions, strict=True)
    )


def load_captures(
    paths: Sequence[Path], *, every: int = 1, offsets: Sequence[int] = (0,)
) -> list[Captured]:
    """The captures saved by ``--capture`` at ``paths``: one file as it is, several as the
    parts made with ``--every every``, one per offset of ``offsets`` and in that order, put
    back in the data file's order (:func:`interleave`)."""
    if len(paths) > 1 and len(paths) != len(offsets):
        raise ValueError(f"{len(paths)} capture files for {len(offsets)} offsets: give one each")
    parts: list[list[Captured]] = []
    for path in paths:
        with path.open("rb") as handle:
            parts.append(pickle.load(handle))
    return parts[0] if len(parts) == 1 else interleave(parts, every=every, offsets=offsets)


def interleave(parts: Sequence[Sequence[T]], *, every: int, offsets: Sequence[int]) -> list[T]:
    """Strided parts back in their first order: part ``k`` holds the items numbered
    ``offsets[k]``, ``offsets[k] + every``, ``offsets[k] + 2 * every``, ... (``--every``,
    ``--offset``), so that a capture too long for one session can be made a part at a time
    and replayed together. A part missing, short or given out of order is caught afterwards
    by :func:`captures_match`, from the question texts."""
    if len(parts) != len(offsets) or not parts:
        raise ValueError(f"{len(parts)} parts for {len(offsets)} offsets")
    numbered = [
        (offset + n * every, item)
        for offset, part in zip(offsets, parts, strict=True)
        for n, item in enumerate(part)
    ]
    return [item for _, item in sorted(numbered, key=lambda pair: pair[0])]


def hash_folds(ids: Sequence[str], folds: int) -> list[int]:
    """A fold number per id from its SHA-256: stable across runs and machines."""
    return [int(hashlib.sha256(i.encode()).hexdigest(), 16) % folds for i in ids]


@dataclass
class FoldOutcome:
    fold: str
    chosen: int  # index into the grid
    held_out: dict[str, dict[str, float]] = field(default_factory=dict)  # group -> metric -> v


def _means(block: np.ndarray, metrics: Sequence[str]) -> dict[str, float]:  # type: ignore[type-arg]
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            means = np.nanmean(block, axis=0)
    return {name: float(means[m]) for m, name in enumerate(metrics)}


def cross_validate(
    values: np.ndarray,  # type: ignore[type-arg]
    candidates: Sequence[int],
    fold_of: Sequence[str],
    groups: Sequence[str],
    metrics: Sequence[str],
    objective: Sequence[str],
) -> list[FoldOutcome]:
    """Leave each fold out: choose among ``candidates`` (grid indexes) on the rest, by the
    summed mean of the ``objective`` metrics, and score the choice on the fold, overall and
    per group."""
    part = Part("", values, fold_of, groups, metrics, objective)
    fold_arr = np.array(fold_of)
    outcomes: list[FoldOutcome] = []
    for fold in sorted(set(fold_of)):
        train = fold_arr != fold
        chosen = _best(candidates, part.objective(candidates, train))
        outcomes.append(part.held_out(fold, chosen, ~train))
    return outcomes


def _best(candidates: Sequence[int], scores: np.ndarray) -> int:  # type: ignore[type-arg]
    # the first best wins: the grid lists the defaults first, so a tie keeps them
    return candidates[int(np.argmax(np.round(scores, 9)))]


@dataclass(frozen=True)
class Part:
    """One benchmark's replayed ``values[setting, question, metric]``, with each question's
    fold and group, and the metrics its choice maximises."""

    name: str
    values: np.ndarray  # type: ignore[type-arg]
    fold_of: Sequence[str]
    groups: Sequence[str]
    metrics: Sequence[str]
    objective_metrics: Sequence[str]

    def objective(self, candidates: Sequence[int], mask: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        """Per candidate, the summed mean of the objective metrics over the ``mask``ed
        questions."""
        obj = [self.metrics.index(name) for name in self.objective_metrics]
        return np.array(
            [float(sum(np.nanmean(self.values[c][mask][:, m]) for m in obj)) for c in candidates]
        )

    def held_out(self, fold: str, chosen: int, test: np.ndarray) -> FoldOutcome:  # type: ignore[type-arg]
        """Setting ``chosen`` scored on the ``test`` questions, overall and per group."""
        group_arr = np.array(self.groups)
        outcome = FoldOutcome(fold, chosen)
        outcome.held_out["all"] = _means(self.values[chosen][test], self.metrics)
        for group in sorted(set(group_arr[test])):
            block = self.values[chosen][test & (group_arr == group)]
            outcome.held_out[group] = _means(block, self.metrics)
        return outcome


def cross_validate_joint(
    parts: Sequence[Part], candidates: Sequence[int]
) -> tuple[dict[str, list[FoldOutcome]], int]:
    """One setting for several benchmarks at once. Each fold of each benchmark is left out
    in turn; the setting is chosen on everything else (the benchmark's other folds and every
    question of the others), each benchmark weighing the same (the sum of the means of its
    objective metrics), and scored on the held-out fold. Returns the held-out outcomes per
    benchmark, and the setting chosen on every question of every benchmark (the one a
    default would take)."""
    whole = [p.objective(candidates, np.ones(len(p.fold_of), dtype=bool)) for p in parts]
    outcomes: dict[str, list[FoldOutcome]] = {}
    for i, part in enumerate(parts):
        others = sum((whole[j] for j in range(len(parts)) if j != i), np.zeros(len(candidates)))
        fold_arr = np.array(part.fold_of)
        outcomes[part.name] = []
        for fold in sorted(set(part.fold_of)):
            train = fold_arr != fold
            chosen = _best(candidates, others + part.objective(candidates, train))
            outcomes[part.name].append(part.held_out(fold, chosen, ~train))
    return outcomes, _best(candidates, sum(whole, np.zeros(len(candidates))))


def summarise(
    outcomes: Sequence[FoldOutcome], group: str, metric: str
) -> tuple[float, float, float, float]:
    """(mean, std, min, max) of a held-out figure across folds."""
    vals = [o.held_out[group][metric] for o in outcomes if group in o.held_out]
    vals = [v for v in vals if not math.isnan(v)]
    if not vals:
        return (math.nan,) * 4
    arr = np.array(vals)
    return float(arr.mean()), float(arr.std()), float(arr.min()), float(arr.max())


#: The procedures compared: which stages' knobs the search may set (today's defaults fixed,
#: today's fusion knobs searched, then with each new stage, then both).
PROCEDURES: dict[str, tuple[str, ...] | None] = {
    "defaults (fixed)": None,
    "fusion knobs": ("fusion",),
    "+ session evidence": ("fusion", "sessions"),
    "+ rerank": ("fusion", "rerank"),
    "+ both": ("fusion", "sessions", "rerank"),
    "+ time in the query": ("fusion", "time"),
}


def candidates_for(grid: Sequence[Setting], stages: tuple[str, ...] | None) -> list[int]:
    if stages is None:
        return [0]
    allowed = frozenset(stages)
    return [i for i, s in enumerate(grid) if s.stages() <= allowed]


def run_procedures(
    values: np.ndarray,  # type: ignore[type-arg]
    grid: Sequence[Setting],
    fold_of: Sequence[str],
    groups: Sequence[str],
    metrics: Sequence[str],
    objective: Sequence[str],
) -> dict[str, dict[str, object]]:
    """Per procedure: its folds (choice and held-out figures) and its all-dev choice."""
    out: dict[str, dict[str, object]] = {}
    everyone = ["all"] * len(fold_of)
    for name, stages in PROCEDURES.items():
        candidates = candidates_for(grid, stages)
        folds = cross_validate(values, candidates, fold_of, groups, metrics, objective)
        # all-dev: the same choice made on every question, scored on them too (optimistic)
        whole = cross_validate(
            np.concatenate([values, values], axis=1),
            candidates,
            [*everyone, *(["dev"] * len(fold_of))],
            [*groups, *groups],
            metrics,
            objective,
        )
        dev = next(o for o in whole if o.fold == "dev")
        out[name] = {"folds": folds, "all_dev": dev}
    return out


def run_with_peers(
    values: Mapping[str, np.ndarray],  # type: ignore[type-arg]
    grid: Sequence[Setting],
    fold_of: Sequence[str],
    groups: Sequence[str],
    metrics: Sequence[str],
    objective: Sequence[str],
) -> tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]:
    """Every procedure on the hybrid values, and keyword and vector alone at the defaults
    (the peers a hybrid figure is read against), over the same folds."""
    results = run_procedures(values["hybrid"], grid, fold_of, groups, metrics, objective)
    peers = {
        mode: run_procedures(values[mode], grid[:1], fold_of, groups, metrics, objective)[
            "defaults (fixed)"
        ]
        for mode in ("keyword", "vector")
    }
    return results, peers


def figures_json(
    results: Mapping[str, Mapping[str, object]],
    peers: Mapping[str, Mapping[str, object]],
    grid: Sequence[Setting],
    meta: Mapping[str, object],
) -> str:
    """The JSON a ``--cv`` run writes (NaN, a metric a fold had no question for, as null)."""
    figures = {
        "hybrid": procedures_json(results, grid),
        **{
            f"{mode} (defaults)": procedures_json({"defaults (fixed)": r}, grid)
            for mode, r in peers.items()
        },
        "meta": dict(meta),
    }
    return json.dumps(figures, indent=2, default=nan_as_null)


def nan_as_null(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def procedures_json(
    results: Mapping[str, Mapping[str, object]], grid: Sequence[Setting]
) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, result in results.items():
        folds: Sequence[FoldOutcome] = result["folds"]  # type: ignore[assignment]
        dev: FoldOutcome = result["all_dev"]  # type: ignore[assignment]
        out[name] = {
            "folds": [
                {"fold": o.fold, "chosen": grid[o.chosen].label(), "held_out": o.held_out}
                for o in folds
            ],
            "all_dev": {"chosen": grid[dev.chosen].label(), "figures": dev.held_out},
        }
    return out


def short_name(metric: str) -> str:
    for long, short in (
        ("session_recall_any", "any"),
        ("session_recall_all", "all"),
        ("session_recall", "S"),
        ("session_hit", "H"),
        ("session_ndcg", "NDCG"),
        ("turn_recall", "T"),
    ):
        metric = metric.replace(long, short)
    return metric


def percent(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def spread(outcomes: Sequence[FoldOutcome], group: str, metric: str) -> str:
    mean, std, low, high = summarise(outcomes, group, metric)
    if math.isnan(mean):
        return "-"
    return f"{100 * mean:.1f} ±{100 * std:.1f} [{100 * low:.1f}-{100 * high:.1f}]"


def print_cv(
    console: Console,
    title: str,
    results: Mapping[str, Mapping[str, object]],
    peers: Mapping[str, Mapping[str, object]],
    grid: Sequence[Setting],
    groups: Sequence[str],
    *,
    headline: Sequence[str],
    by_group: Sequence[str],
) -> None:
    """Held-out mean ±std [min-max] across folds per procedure, then per group, then the
    settings each fold chose."""
    rows = {
        **{f"hybrid: {k}": v for k, v in results.items()},
        **{f"{k} (defaults)": v for k, v in peers.items()},
    }
    table = Table(title=f"{title}: held-out mean ±std [min-max] across folds; all-dev, %")
    table.add_column("procedure")
    for metric in headline:
        table.add_column(short_name(metric), justify="right")
    table.add_column("all-dev " + " / ".join(short_name(m) for m in headline[:2]), justify="right")
    for name, result in rows.items():
        folds: Sequence[FoldOutcome] = result["folds"]  # type: ignore[assignment]
        dev: FoldOutcome = result["all_dev"]  # type: ignore[assignment]
        table.add_row(
            name,
            *(spread(folds, "all", m) for m in headline),
            " / ".join(percent(dev.held_out["all"][m]) for m in headline[:2]),
        )
    console.print(table)
    named = " / ".join(short_name(m) for m in by_group)
    per_group = Table(title=f"held-out {named} by group (mean across folds), %")
    per_group.add_column("procedure")
    for group in groups:
        per_group.add_column(group, justify="right")
    for name, result in rows.items():
        folds = result["folds"]  # type: ignore[assignment]
        per_group.add_row(
            name,
            *(" / ".join(percent(summarise(folds, g, m)[0]) for m in by_group) for g in groups),
        )
    console.print(per_group)
    chosen = Table(title="settings chosen on the training folds (and on all dev)")
    chosen.add_column("procedure")
    chosen.add_column("per held-out fold")
    chosen.add_column("all dev")
    for name, result in results.items():
        folds = result["folds"]  # type: ignore[assignment]
        dev = result["all_dev"]  # type: ignore[assignment]
        chosen.add_row(
            name,
            "; ".join(f"{o.fold}: {grid[o.chosen].label()}" for o in folds),
            grid[dev.chosen].label(),
        )
    console.print(chosen)
