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
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np
from bench._adapter import Captured, Mode, Result
from rich.console import Console
from rich.table import Table

from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig, source_times
from cairn.retrieval.rerank import overlaps
from cairn.retrieval.sessions import session_evidence, session_keys
from cairn.retrieval.types import Hit
from cairn.retrieval.when import TimeWindow, closeness, query_window

__all__ = [
    "PROCEDURES",
    "STAGES",
    "FoldOutcome",
    "Setting",
    "candidates_for",
    "cross_validate",
    "evaluate",
    "hash_folds",
    "make_grid",
    "print_cv",
    "procedures_json",
    "replay",
    "run_procedures",
    "summarise",
]

#: Today's fusion knobs (the keyword share of the weights; how much context chunks add),
#: then the stages this work adds. Each list starts with the kernel's default value.
KEYWORD_SHARES = (0.4, 0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
CONTEXT_WEIGHTS = (1.0, 0.0, 0.5)
SESSION = ((0.0, 2), (0.25, 1), (0.25, 2), (0.5, 1), (0.5, 2), (0.5, 4), (1.0, 2))
RERANK = ((0.0, 0.0), (0.25, 0.0), (0.5, 0.0), (0.0, 0.25), (0.0, 0.5), (0.25, 0.25))
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
        parts = [f"kw {self.keyword:g}", f"ctx {r.context_weight:g}"]
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
        r = self.ranking
        on = {"fusion"}
        if r.session_weight:
            on.add("sessions")
        if r.entity_weight or r.title_weight:
            on.add("rerank")
        if r.time_weight:
            on.add("time")
        return frozenset(on)


def make_grid(stages: Sequence[str] = STAGES) -> list[Setting]:
    """Every combination of the knobs of ``stages`` (others at their default), default
    first; the time boost is combined with the fusion knobs only (the other stages at their
    defaults), which keeps the grid small."""
    sessions = SESSION if "sessions" in stages else SESSION[:1]
    reranks = RERANK if "rerank" in stages else RERANK[:1]
    out: list[Setting] = []
    for keyword, context, (sw, depth), (ew, tw) in itertools.product(
        KEYWORD_SHARES, CONTEXT_WEIGHTS, sessions, reranks
    ):
        ranking = replace(
            DEFAULT_RANKING,
            context_weight=context,
            session_weight=sw,
            session_depth=depth if sw else DEFAULT_RANKING.session_depth,
            entity_weight=ew,
            title_weight=tw,
        )
        out.append(Setting(keyword, ranking))
    if "time" in stages:
        for keyword, context, weight in itertools.product(
            KEYWORD_SHARES, CONTEXT_WEIGHTS, TIME_WEIGHTS[1:]
        ):
            ranking = replace(DEFAULT_RANKING, context_weight=context, time_weight=weight)
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
    cache: dict[tuple[float, float], _Prepared] = {}
    keys = session_keys(captured.rows.values())
    window = query_window(captured.query, now=asked_at) if asked_at is not None else None
    times = source_times(captured.rows.values())  # type: ignore[arg-type]
    for setting in settings:
        r = setting.ranking
        fusion_key = (setting.keyword, r.context_weight)
        prepared = cache.get(fusion_key)
        if prepared is None:
            fused = fuse(captured.keyword, captured.vector, mode=mode, weights=setting.weights)
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
        self.timed = False
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
        p.timed = window is not None
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
        if r.reorders or (r.time_weight and self.timed):
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
    fold_arr = np.array(fold_of)
    group_arr = np.array(groups)
    obj = [metrics.index(name) for name in objective]
    outcomes: list[FoldOutcome] = []
    for fold in sorted(set(fold_of)):
        train = fold_arr != fold
        scores = [float(sum(np.nanmean(values[c][train][:, m]) for m in obj)) for c in candidates]
        # the first best wins: the grid lists the defaults first, so a tie keeps them
        chosen = candidates[int(np.argmax(np.round(scores, 9)))]
        test = ~train
        outcome = FoldOutcome(fold, chosen)
        block = values[chosen][test]
        outcome.held_out["all"] = _means(block, metrics)
        for group in sorted(set(group_arr[test])):
            outcome.held_out[group] = _means(values[chosen][test & (group_arr == group)], metrics)
        outcomes.append(outcome)
    return outcomes


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
    return json.dumps(figures, indent=2, default=_nan)


def _nan(value: object) -> object:
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


def _short(metric: str) -> str:
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


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def _spread(outcomes: Sequence[FoldOutcome], group: str, metric: str) -> str:
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
        table.add_column(_short(metric), justify="right")
    table.add_column("all-dev " + " / ".join(_short(m) for m in headline[:2]), justify="right")
    for name, result in rows.items():
        folds: Sequence[FoldOutcome] = result["folds"]  # type: ignore[assignment]
        dev: FoldOutcome = result["all_dev"]  # type: ignore[assignment]
        table.add_row(
            name,
            *(_spread(folds, "all", m) for m in headline),
            " / ".join(_pct(dev.held_out["all"][m]) for m in headline[:2]),
        )
    console.print(table)
    per_group = Table(
        title=f"held-out {' / '.join(_short(m) for m in by_group)} by group (mean across folds), %"
    )
    per_group.add_column("procedure")
    for group in groups:
        per_group.add_column(group, justify="right")
    for name, result in rows.items():
        folds = result["folds"]  # type: ignore[assignment]
        per_group.add_row(
            name,
            *(" / ".join(_pct(summarise(folds, g, m)[0]) for m in by_group) for g in groups),
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
