"""LoCoMo evidence retrieval: turn- and session-level recall, hybrid vs keyword vs vector.

    .venv/bin/python bench/locomo.py ../shared/data/locomo/locomo_dev.json [--json OUT] [--quick]

Every conversation is ingested as one scope (one record per turn, with speaker, session and
session date). Every question of categories 1-4 with evidence is asked in its conversation's
scope. Reported per system and category:

- ``turn_recall@k`` (k = 1, 5, 10, 20): share of the gold evidence turns (``dia_id``) among the
  top k turns, averaged over questions;
- ``session_recall@k`` (k = 5, 10): share of the gold evidence sessions among the top k
  sessions; ``session_hit@k``: 1 when at least one gold session is in the top k.

Systems, all in one run. Through the kernel (``cairn.memory.Memory`` on a temporary SQLite
store, ingested with ``remember_many`` by a curator, one ``Memory.search`` per question, see
``KernelRetriever`` in ``bench/_adapter.py``): ``hybrid``, ``bm25`` (mode ``keyword``) and
``vector``. On cairn's building blocks: ``recipe`` (the best recipe measured, with
neighbour-turn keyword views, see ``BlockRetriever``), the target the kernel should reach.
No LLM anywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._adapter import (
    Captured,
    KernelRetriever,
    Mode,
    Recipe,
    Result,
    Retriever,
    Turn,
    make_retriever,
    parse_weights,
)
from bench._data import (
    LOCOMO_CATEGORIES,
    SHARED_DATA,
    LocomoConversation,
    load_locomo,
    session_of,
)
from bench._metrics import Aggregate, recall_any_at_k, recall_at_k
from rich.console import Console
from rich.table import Table

from bench import _cv, _progress

DEFAULT_PATH = SHARED_DATA / "locomo" / "locomo_dev.json"
TURN_KS = (1, 5, 10, 20)
SESSION_KS = (5, 10)

#: The recipe measured best on locomo_dev (turn recall@10 77.5% with both embedders).
HYBRID = Recipe(
    keyword_radii={1: 1.0, 2: 2.0, 3: 2.0},
    vector_weights={"minilm": 1.0, "static": 1.0},
    session_docs={"all": 1.0},
)


def to_turns(conv: LocomoConversation) -> list[Turn]:
    return [
        Turn(
            key=t.dia_id,
            session=str(t.session),
            speaker=t.speaker,
            text=t.text,
            date=t.session_date,
            caption=t.caption,
        )
        for t in conv.turns
    ]


def score(
    agg: Aggregate, category: int, turns: list[str], sessions: list[str], q_ev: tuple[str, ...]
) -> None:
    gold_sessions = {str(session_of(d)) for d in q_ev}
    values: dict[str, float] = {}
    for k in TURN_KS:
        values[f"turn_recall@{k}"] = recall_at_k(turns, q_ev, k)
    for k in SESSION_KS:
        values[f"session_recall@{k}"] = recall_at_k(sessions, gold_sessions, k)
        values[f"session_hit@{k}"] = recall_any_at_k(sessions, gold_sessions, k)
    agg.add(LOCOMO_CATEGORIES.get(category, str(category)), values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--quick", action="store_true", help="1 conversation, 40 questions")
    parser.add_argument(
        "--embedder", help="the kernel's embedder (default minilm; --quick: static)"
    )
    parser.add_argument(
        "--weights",
        help="kernel fusion weights, e.g. keyword=0.6,vector=0.4 (default: the kernel's)",
    )
    parser.add_argument(
        "--recipe-embedders",
        help="comma-separated embedders of the recipe (default minilm,static; --quick: static)",
    )
    parser.add_argument("--no-recipe", action="store_true", help="measure the kernel only")
    parser.add_argument(
        "--db", help="the kernel's store: an empty PostgreSQL database URL (default: SQLite)"
    )
    parser.add_argument(
        "--cv",
        action="store_true",
        help="cross-validate the ranking knobs, leaving one conversation out at a time",
    )
    parser.add_argument(
        "--capture", type=Path, help="--cv: also save the recalled candidates to this file"
    )
    parser.add_argument(
        "--replay", type=Path, help="--cv: use candidates saved by --capture (no ingest)"
    )
    args = parser.parse_args(argv)
    console = Console()
    if not args.path.is_file():
        console.print(
            f"[red]LoCoMo data not found at {args.path}[/red]: pass the path to "
            "locomo_dev.json (see ../shared/data/locomo/README.md)"
        )
        return 2

    names = args.recipe_embedders or ("static" if args.quick else "minilm,static")
    recipe = replace(HYBRID, vector_weights={n.strip(): 1.0 for n in names.split(",") if n.strip()})
    embedder = args.embedder or ("static" if args.quick else "minilm")
    weights = parse_weights(args.weights)
    conversations = load_locomo(args.path)
    if args.quick:
        # --cv needs two conversations to leave one out
        conversations = conversations[: 2 if args.cv else 1]
        for conv in conversations:
            conv.questions = conv.questions[: 40 // len(conversations)]

    if args.cv or args.replay:
        return run_cv(args, console, conversations, embedder, weights)

    kernel = KernelRetriever(embedder, weights=weights, db=args.db)
    systems: dict[str, tuple[Retriever, Mode]] = {
        "hybrid": (kernel, "hybrid"),
        "bm25": (kernel, "keyword"),
        "vector": (kernel, "vector"),
    }
    if not args.no_recipe:
        systems["recipe"] = (make_retriever(recipe), "hybrid")
    results = {name: Aggregate() for name in systems}
    n_turns = sum(len(c.turns) for c in conversations)
    n_questions = sum(len(c.questions) for c in conversations)
    timings: dict[str, float] = {}
    with _progress.bar(console) as progress:
        retrievers = list({id(r): r for r, _ in systems.values()}.values())
        task = progress.add_task("ingest", total=len(conversations) * len(retrievers))
        start = time.perf_counter()
        for conv in conversations:
            turns = to_turns(conv)
            for retriever in retrievers:
                retriever.ingest(conv.sample_id, turns)
                progress.advance(task)
        timings["ingest_s"] = time.perf_counter() - start
        task = progress.add_task("questions", total=n_questions)
        start = time.perf_counter()
        for conv in conversations:
            for q in conv.questions:
                for name, (retriever, mode) in systems.items():
                    result = retriever.search(conv.sample_id, q.question, mode=mode, k=0)
                    score(results[name], q.category, result.turns, result.sessions, q.evidence)
                progress.advance(task)
        timings["search_ms_per_question"] = (
            1000 * (time.perf_counter() - start) / max(n_questions, 1)
        )

    figures: dict[str, object] = {name: agg.as_dict() for name, agg in results.items()}
    figures["meta"] = {
        "data": str(args.path),
        "conversations": len(conversations),
        "turns": n_turns,
        "questions": n_questions,
        "quick": args.quick,
        "kernel": {
            "embedder": embedder,
            "backend": "postgresql" if args.db else "sqlite",
            "weights": weights,
            "session_records": True,
            "date_in_body": True,
        },
        "recipe": None
        if args.no_recipe
        else {
            "keyword_radii": dict(recipe.keyword_radii),
            "vector_weights": dict(recipe.vector_weights),
            "session_docs": dict(recipe.session_docs),
            "depth": recipe.depth,
            "rrf_k": recipe.rrf_k,
        },
        **timings,
    }
    kernel.close()
    print_tables(console, results, n_questions, timings)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=False, default=_nan))
        console.print(f"figures written to {args.json}")
    return 0


CV_METRICS = (
    "turn_recall@1",
    "turn_recall@5",
    "turn_recall@10",
    "turn_recall@20",
    "session_recall@5",
    "session_recall@10",
    "session_hit@10",
)
#: What the search maximises on the training folds: the two figures the targets name.
CV_OBJECTIVE = ("turn_recall@10", "session_recall@10")


def score_values(
    category: int, turns: list[str], sessions: list[str], q_ev: tuple[str, ...]
) -> dict[str, float]:
    agg = Aggregate()
    score(agg, category, turns, sessions, q_ev)
    return {name: agg.mean(name) for name in CV_METRICS}


def _last_session(conversation: LocomoConversation) -> datetime | None:
    times = [turn.when for turn in conversation.turns if turn.when is not None]
    return max(times) + timedelta(days=1) if times else None


def folds_and_groups(conversations: list[LocomoConversation]) -> tuple[list[str], list[str]]:
    """Each question's fold (its conversation: one is left out at a time) and group (its
    category), in the order ``run_cv`` asks them."""
    questions = [(conv.sample_id, q) for conv in conversations for q in conv.questions]
    folds = [sample_id for sample_id, _ in questions]
    groups = [LOCOMO_CATEGORIES.get(q.category, str(q.category)) for _, q in questions]
    return folds, groups


def replayed(
    console: Console,
    conversations: list[LocomoConversation],
    captures: list[Captured],
    grid: list[_cv.Setting],
) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """``values[setting, question, metric]`` of the hybrid ``grid`` and of keyword and vector
    alone at the defaults, replayed from ``captures`` (one per question, as ``run_cv`` asks)."""
    questions = [(conv.sample_id, q) for conv in conversations for q in conv.questions]

    def scorer(i: int, result: Result) -> dict[str, float]:
        q = questions[i][1]
        return score_values(q.category, result.turns, result.sessions, q.evidence)

    # A question is asked once its conversation is over: "last year" is read against the
    # conversation's last session.
    ended = {conv.sample_id: _last_session(conv) for conv in conversations}
    asked_at = [ended[sample_id] for sample_id, _ in questions]
    return _cv.replay_modes(
        console, "LoCoMo", captures, grid, scorer, CV_METRICS, asked_at=asked_at
    )


def run_cv(
    args: argparse.Namespace,
    console: Console,
    conversations: list[LocomoConversation],
    embedder: str,
    weights: dict[str, float] | None,
) -> int:
    """Capture each question's recall once, replay the grid, cross-validate (bench/_cv.py)."""
    questions = [(conv.sample_id, q) for conv in conversations for q in conv.questions]
    timings: dict[str, float] = {}
    captures: list[Captured]
    if args.replay:
        captures = _cv.load_captures([args.replay])
    else:
        kernel = KernelRetriever(embedder, weights=weights, db=args.db)
        start = time.perf_counter()
        with console.status("ingest"):
            for conv in conversations:
                kernel.ingest(conv.sample_id, to_turns(conv))
        timings["ingest_s"] = time.perf_counter() - start
        captures = []
        with console.status("recall"):
            for n, (sample_id, q) in enumerate(questions):
                captures.append(kernel.capture(sample_id, q.question))
                if n < 20:  # the replay must be the kernel: check its default ranking
                    live = kernel.search(sample_id, q.question, mode="hybrid", k=0)
                    again = _cv.replay(captures[-1], [_cv.default_setting(embedder)])[0]
                    if weights is None and (live.turns, live.sessions) != (
                        again.turns,
                        again.sessions,
                    ):
                        console.print(
                            f"[red]replay differs from Memory.search on {q.question!r}[/red]"
                        )
                        return 1
        kernel.close()
        if args.capture:
            with args.capture.open("wb") as handle:
                pickle.dump(captures, handle)
    if not _cv.captures_match(captures, [q.question for _, q in questions]):
        console.print("[red]the capture does not match these questions[/red]")
        return 2
    grid = _cv.make_grid(("fusion",) if args.quick else _cv.STAGES, embedder)
    start = time.perf_counter()
    values = replayed(console, conversations, captures, grid)
    timings["replay_s"] = time.perf_counter() - start
    folds, groups = folds_and_groups(conversations)
    results, peers = _cv.run_with_peers(values, grid, folds, groups, CV_METRICS, CV_OBJECTIVE)
    _cv.print_cv(
        console,
        f"LoCoMo, leave one conversation out ({len(captures)} questions)",
        results,
        peers,
        grid,
        sorted(set(groups)),
        headline=("turn_recall@10", "session_recall@10", "turn_recall@5", "session_hit@10"),
        by_group=("turn_recall@10", "session_recall@10"),
    )
    if args.json:
        meta = {
            "data": str(args.path),
            "questions": len(captures),
            "grid": len(grid),
            "objective": CV_OBJECTIVE,
            "embedder": embedder,
            **timings,
        }
        args.json.write_text(_cv.figures_json(results, peers, grid, meta))
        console.print(f"figures written to {args.json}")
    return 0


def _nan(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.1f}"


def print_tables(
    console: Console, results: dict[str, Aggregate], n_questions: int, timings: dict[str, float]
) -> None:
    metrics = [f"turn_recall@{k}" for k in TURN_KS] + [
        name for k in SESSION_KS for name in (f"session_recall@{k}", f"session_hit@{k}")
    ]
    table = Table(
        title=f"LoCoMo evidence retrieval, {n_questions} questions (categories 1-4), %",
        caption="T@k turn recall, S@k session recall, H@k session hit (any gold session)",
    )
    table.add_column("system")
    for metric in metrics:
        short = metric.replace("turn_recall", "T").replace("session_recall", "S")
        table.add_column(short.replace("session_hit", "H"), justify="right")
    for name, agg in results.items():
        table.add_row(name, *(_pct(agg.mean(metric)) for metric in metrics))
    console.print(table)

    by_cat = Table(title="turn recall@10 / session recall@10 by category, %")
    by_cat.add_column("system")
    groups = next(iter(results.values())).groups()
    for group in groups:
        n = next(iter(results.values())).count(group)
        by_cat.add_column(f"{group} (n={n})", justify="right")
    for name, agg in results.items():
        by_cat.add_row(
            name,
            *(
                f"{_pct(agg.mean('turn_recall@10', g))} / {_pct(agg.mean('session_recall@10', g))}"
                for g in groups
            ),
        )
    console.print(by_cat)
    console.print(
        f"ingest {timings['ingest_s']:.1f} s, "
        f"search {timings['search_ms_per_question']:.1f} ms per question (all systems)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
