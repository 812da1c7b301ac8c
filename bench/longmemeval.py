"""LongMemEval (S) session and turn retrieval, hybrid vs keyword vs vector.

    .venv/bin/python bench/longmemeval.py ../shared/data/longmemeval/longmemeval_s_dev.json.xz \
        [--json OUT] [--quick] [--limit N] [--embedders static]

Each question has its own haystack (~50 sessions); it is ingested as one scope (one record per
turn, role as speaker, session date) and the question is asked in that scope. Abstention
questions (``_abs``) are skipped, as upstream's retrieval evaluation does. Reported per
system and question type:

- ``session_recall@k`` (k = 5, 10): share of the ``answer_session_ids`` in the top k sessions;
- ``session_recall_any@k``: 1 when at least one evidence session is in the top k (the figure
  published LLM-free systems report as "recall@5"); ``session_recall_all@k``: 1 when all are;
- ``session_ndcg@10`` (binary relevance) and ``turn_recall@10`` (share of ``has_answer`` turns
  in the top 10 turns).

Systems, all in one run: through the kernel (``cairn.memory.Memory`` on a temporary SQLite
store, ``remember_many`` by a curator, one ``Memory.search`` per question; ``KernelRetriever``
in ``bench/_adapter.py``) ``hybrid``, ``bm25`` (mode ``keyword``) and ``vector``; on the
building blocks, ``recipe`` (``BlockRetriever``: turn BM25 + whole-session keyword documents
+ vectors). No LLM anywhere.

Embedding is cached by content for the whole run, so sessions shared by several haystacks
are embedded once. MiniLM over all ~100k distinct turns takes over an hour on 2 cores, so the
default embedder here is ``static``.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
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
from bench._data import SHARED_DATA, LmeQuestion, load_longmemeval, parse_lme_date, turn_key
from bench._metrics import Aggregate, ndcg_at_k, recall_any_at_k, recall_at_k
from rich.console import Console
from rich.table import Table

from bench import _cv, _progress

DEFAULT_PATH = SHARED_DATA / "longmemeval" / "longmemeval_s_dev.json.xz"
QUICK_QUESTIONS = 6

#: The recipe measured best on longmemeval_s_dev without an LLM.
HYBRID = Recipe(
    keyword_radii={0: 2.0},
    user_turns=1.0,
    vector_weights={"static": 1.0},
    session_docs={"user": 1.0, "all": 1.0},
    session_from_turns=2.0,
    date_in_keyword_text=False,
    date_in_vector_text=False,
    user_speaker="user",
)
METRICS = (
    "session_recall@5",
    "session_recall@10",
    "session_recall_any@5",
    "session_recall_any@10",
    "session_recall_all@5",
    "session_recall_all@10",
    "session_ndcg@10",
    "turn_recall@10",
)


def sample(
    questions: list[LmeQuestion],
    *,
    every: int,
    limit: int | None,
    offsets: Sequence[int] = (0,),
) -> list[LmeQuestion]:
    """The questions whose number (counting from 0) leaves one of ``offsets`` over when
    divided by ``every``, in the data file's order, then the first ``limit`` of those: the
    data file lists its questions in runs of one type, so a stride keeps their mix where a
    limit alone would not, and the offsets 0 to ``every`` - 1 split the questions into parts
    that can be run apart (and replayed together: ``--offset 0,1,2``)."""
    if every < 1:
        raise ValueError("every must be 1 or more")
    if not offsets or any(not 0 <= o < every for o in offsets):
        raise ValueError("each offset must be from 0 to every - 1")
    if len(set(offsets)) != len(offsets):
        raise ValueError("an offset is given twice")
    kept = set(offsets)
    chosen = [q for n, q in enumerate(questions) if n % every in kept]
    return chosen[:limit] if limit else chosen


def parse_offsets(text: str) -> tuple[int, ...]:
    """``--offset``: one number or several, comma-separated ("0" or "0,1,2")."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"offsets are whole numbers, comma-separated, not {text!r}"
        ) from None


def to_turns(question: LmeQuestion) -> list[Turn]:
    return [
        Turn(
            key=turn_key(session.session_id, index),
            session=session.session_id,
            speaker=turn.role,
            text=turn.content,
            date=session.date,
        )
        for session in question.sessions
        for index, turn in enumerate(session.turns)
    ]


def score(agg: Aggregate, question: LmeQuestion, turns: list[str], sessions: list[str]) -> None:
    gold = question.answer_session_ids
    values: dict[str, float] = {}
    for k in (5, 10):
        values[f"session_recall@{k}"] = recall_at_k(sessions, gold, k)
        values[f"session_recall_any@{k}"] = recall_any_at_k(sessions, gold, k)
        values[f"session_recall_all@{k}"] = float(recall_at_k(sessions, gold, k) == 1.0)
    values["session_ndcg@10"] = ndcg_at_k(sessions, gold, 10)
    values["turn_recall@10"] = recall_at_k(turns, question.gold_turns(), 10)
    agg.add(question.question_type, values)


def _kernel(args: argparse.Namespace) -> KernelRetriever:
    """The kernel as the command line sets it up (turn dates in metadata, not the body)."""
    return KernelRetriever(
        args.embedder,
        weights=parse_weights(args.weights),
        date_in_body=False,
        db=args.db,
        vector_cache=args.vector_cache,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument(
        "--quick", action="store_true", help=f"first {QUICK_QUESTIONS} questions only"
    )
    parser.add_argument("--limit", type=int, help="first N questions only")
    parser.add_argument(
        "--every",
        type=int,
        default=1,
        help="every Nth question only: a sample that keeps the mix of question types, "
        "which the data file lists in runs",
    )
    parser.add_argument(
        "--offset",
        type=parse_offsets,
        default=(0,),
        help="with --every N: start at question number OFFSET (0 to N-1), so that the N parts "
        "can be run apart; several, comma-separated, to replay parts together",
    )
    parser.add_argument("--embedder", default="static", help="the kernel's embedder (static)")
    parser.add_argument(
        "--weights",
        help="kernel fusion weights, e.g. keyword=0.6,vector=0.4 (default: the kernel's)",
    )
    parser.add_argument(
        "--recipe-embedders", default="static", help="comma-separated embedders of the recipe"
    )
    parser.add_argument("--no-recipe", action="store_true", help="measure the kernel only")
    parser.add_argument(
        "--db", help="the kernel's store: an empty PostgreSQL database URL (default: SQLite)"
    )
    parser.add_argument("--include-abstention", action="store_true")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="cross-validate the ranking knobs over folds of question ids (--folds)",
    )
    parser.add_argument("--folds", type=int, default=3, help="--cv: folds by question-id hash")
    parser.add_argument(
        "--capture", type=Path, help="--cv: also save the recalled candidates to this file"
    )
    parser.add_argument(
        "--replay",
        type=Path,
        nargs="+",
        help="--cv: use candidates saved by --capture (no ingest); several files are parts "
        "made with --every N, one per --offset, given in the order of --offset's list",
    )
    parser.add_argument(
        "--vector-cache",
        type=Path,
        help="keep the kernel's vectors in this file, so that a later run embeds nothing twice",
    )
    args = parser.parse_args(argv)
    console = Console()
    if not args.path.is_file():
        console.print(
            f"[red]LongMemEval data not found at {args.path}[/red]: pass the path to "
            "longmemeval_s_dev.json.xz (see ../shared/data/longmemeval/README.md)"
        )
        return 2

    with console.status("loading (decompressing) the data"):
        questions = load_longmemeval(args.path)
    if not args.include_abstention:
        questions = [q for q in questions if not q.abstention]
    try:
        questions = sample(
            questions,
            every=args.every,
            limit=QUICK_QUESTIONS if args.quick else args.limit,
            offsets=args.offset,
        )
    except ValueError as error:
        console.print(f"[red]--every / --offset: {error}[/red]")
        return 2
    if args.cv or args.replay:
        return run_cv(args, console, questions)
    recipe = replace(
        HYBRID,
        vector_weights={n.strip(): 1.0 for n in args.recipe_embedders.split(",") if n.strip()},
    )
    kernel = _kernel(args)
    systems: dict[str, tuple[Retriever, Mode]] = {
        "hybrid": (kernel, "hybrid"),
        "bm25": (kernel, "keyword"),
        "vector": (kernel, "vector"),
    }
    if not args.no_recipe:
        systems["recipe"] = (make_retriever(recipe), "hybrid")
    retrievers = list({id(r): r for r, _ in systems.values()}.values())
    results = {name: Aggregate() for name in systems}
    n_turns = sum(len(s.turns) for q in questions for s in q.sessions)
    timings = {"ingest_s": 0.0, "search_s": 0.0}
    with _progress.bar(console) as progress:
        task = progress.add_task("ingest + ask", total=len(questions))
        for question in questions:
            # Ingest and ask one haystack at a time: all scopes share one index, as in a store.
            turns = to_turns(question)
            start = time.perf_counter()
            for retriever in retrievers:
                retriever.ingest(question.question_id, turns)
            timings["ingest_s"] += time.perf_counter() - start
            start = time.perf_counter()
            for name, (retriever, mode) in systems.items():
                result = retriever.search(question.question_id, question.question, mode=mode, k=0)
                score(results[name], question, result.turns, result.sessions)
            timings["search_s"] += time.perf_counter() - start
            progress.advance(task)
    timings["search_ms_per_question"] = 1000 * timings.pop("search_s") / max(len(questions), 1)

    figures: dict[str, object] = {name: agg.as_dict() for name, agg in results.items()}
    figures["meta"] = {
        "data": str(args.path),
        "questions": len(questions),
        "turns": n_turns,
        "quick": args.quick,
        "kernel": {
            "embedder": args.embedder,
            "backend": "postgresql" if args.db else "sqlite",
            "weights": parse_weights(args.weights),
            "session_records": True,
            "date_in_body": False,
        },
        "recipe": None
        if args.no_recipe
        else {
            "keyword_radii": dict(recipe.keyword_radii),
            "vector_weights": dict(recipe.vector_weights),
            "user_turns": recipe.user_turns,
            "session_docs": dict(recipe.session_docs),
            "session_from_turns": recipe.session_from_turns,
            "depth": recipe.depth,
            "rrf_k": recipe.rrf_k,
        },
        **timings,
    }
    kernel.close()
    print_tables(console, results, len(questions), timings)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=_nan))
        console.print(f"figures written to {args.json}")
    return 0


#: What the search maximises on the training folds: any@5 is the target, S@5 breaks its
#: frequent ties (one question is 0.42 points).
CV_OBJECTIVE = ("session_recall_any@5", "session_recall@5")


def score_values(question: LmeQuestion, turns: list[str], sessions: list[str]) -> dict[str, float]:
    agg = Aggregate()
    score(agg, question, turns, sessions)
    return {name: agg.mean(name) for name in METRICS}


def folds_and_groups(questions: list[LmeQuestion], folds: int) -> tuple[list[str], list[str]]:
    """Each question's fold (by a hash of its id) and group (its question type)."""
    fold_of = [f"fold {n}" for n in _cv.hash_folds([q.question_id for q in questions], folds)]
    return fold_of, [q.question_type for q in questions]


def replayed(
    console: Console,
    questions: list[LmeQuestion],
    captures: list[Captured],
    grid: list[_cv.Setting],
) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """``values[setting, question, metric]`` of the hybrid ``grid`` and of keyword and vector
    alone at the defaults, replayed from ``captures`` (one per question)."""

    def scorer(i: int, result: Result) -> dict[str, float]:
        return score_values(questions[i], result.turns, result.sessions)

    # "a couple of days ago" is read against the question's own date
    asked_at = [parse_lme_date(q.question_date) for q in questions]
    return _cv.replay_modes(
        console, "LongMemEval", captures, grid, scorer, METRICS, cut=(10, 10), asked_at=asked_at
    )


def run_cv(args: argparse.Namespace, console: Console, questions: list[LmeQuestion]) -> int:
    """Capture each question's recall once, replay the grid, cross-validate (bench/_cv.py)."""
    timings: dict[str, float] = {}
    weights = parse_weights(args.weights)
    if args.replay:
        try:
            captures = _cv.load_captures(args.replay, every=args.every, offsets=args.offset)
        except ValueError as error:
            console.print(f"[red]--replay: {error}[/red]")
            return 2
    else:
        kernel = _kernel(args)
        captures: list[Captured] = []
        start = time.perf_counter()
        with _progress.bar(console) as progress:
            task = progress.add_task("ingest + recall", total=len(questions))
            for n, question in enumerate(questions):
                # one haystack at a time: all scopes share one index, as in a store
                kernel.ingest(question.question_id, to_turns(question))
                captures.append(kernel.capture(question.question_id, question.question))
                if n < 10 and weights is None:  # the replay must be the kernel
                    qid = question.question_id
                    live = kernel.search(qid, question.question, mode="hybrid", k=0)
                    again = _cv.replay(captures[-1], [_cv.default_setting(args.embedder)])[0]
                    if (live.turns, live.sessions) != (again.turns, again.sessions):
                        console.print(f"[red]replay differs on {question.question_id}[/red]")
                        return 1
                progress.advance(task)
        timings["ingest_and_recall_s"] = time.perf_counter() - start
        kernel.close()
        if args.capture:
            with args.capture.open("wb") as handle:
                pickle.dump(captures, handle)
    if not _cv.captures_match(captures, [q.question for q in questions]):
        console.print("[red]the capture does not match these questions[/red]")
        return 2
    grid = _cv.make_grid(("fusion",) if args.quick else _cv.STAGES, args.embedder)
    start = time.perf_counter()
    values = replayed(console, questions, captures, grid)
    timings["replay_s"] = time.perf_counter() - start
    folds, groups = folds_and_groups(questions, args.folds)
    results, peers = _cv.run_with_peers(values, grid, folds, groups, METRICS, CV_OBJECTIVE)
    _cv.print_cv(
        console,
        f"LongMemEval S, {args.folds} folds by question-id hash ({len(captures)} questions)",
        results,
        peers,
        grid,
        sorted(set(groups)),
        headline=(
            "session_recall_any@5",
            "session_recall@5",
            "session_recall_any@10",
            "turn_recall@10",
        ),
        by_group=("session_recall_any@5",),
    )
    if args.json:
        meta = {
            "data": str(args.path),
            "questions": len(captures),
            "every": args.every,
            "offset": list(args.offset),
            "folds": args.folds,
            "grid": len(grid),
            "objective": CV_OBJECTIVE,
            "embedder": args.embedder,
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
    table = Table(
        title=f"LongMemEval S retrieval, {n_questions} questions, %",
        caption="S@k session recall, any@k / all@k: some / every evidence session in the top k",
    )
    table.add_column("system")
    for metric in METRICS:
        short = metric.replace("session_recall_", "").replace("session_recall", "S")
        table.add_column(short.replace("session_", "").replace("turn_recall", "T"), justify="right")
    for name, agg in results.items():
        table.add_row(name, *(_pct(agg.mean(metric)) for metric in METRICS))
    console.print(table)

    by_type = Table(title="by question type, % (S@5 session recall, any@5, T@10 turn recall)")
    by_type.add_column("type")
    shown = [name for name in ("hybrid", "recipe") if name in results]
    for name in shown:
        for short in ("S@5", "any@5", "T@10"):
            by_type.add_column(f"{name} {short}", justify="right")
    first = next(iter(results.values()))
    for group in first.groups():
        cells: list[str] = []
        for name in shown:
            for metric in ("session_recall@5", "session_recall_any@5", "turn_recall@10"):
                cells.append(_pct(results[name].mean(metric, group)))
        by_type.add_row(f"{group} ({first.count(group)})", *cells)
    console.print(by_type)
    console.print(
        f"ingest {timings['ingest_s']:.1f} s, "
        f"search {timings['search_ms_per_question']:.1f} ms per question (all systems)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
