"""Choose the kernel's ranking defaults on LoCoMo and LongMemEval at once, cross-validated.

    python bench/locomo.py ../shared/data/locomo/locomo_dev.json --cv --capture locomo.pkl
    python bench/longmemeval.py ../shared/data/longmemeval/longmemeval_s_dev.json.xz --cv \\
        --limit 120 --capture lme.pkl
    python bench/defaults.py --locomo-capture locomo.pkl --lme-capture lme.pkl --lme-limit 120 \\
        [--stages fusion,sessions,rerank] [--json defaults.json]

A LongMemEval capture too long for one session can be made in parts (``--every 3 --offset 0``,
then 1, then 2, each with its own ``--capture``) and given together: ``--lme-every 3
--lme-offset 0,1,2 --lme-capture lme-0.pkl lme-1.pkl lme-2.pkl`` puts them back in the data
file's order (every question, here).

A default serves every store, so it is chosen on both benchmarks together: each fold of each
benchmark (a LoCoMo conversation; a third of the LongMemEval questions, by a hash of their
id) is left out in turn, the setting of the grid with the best objective on everything else
(the benchmark's other folds and all of the other benchmark, each benchmark weighing the
same) is chosen, and that choice is scored on the held-out fold. Reported per benchmark, next
to the kernel's current defaults and to the choice each benchmark would make alone: the
held-out mean ±std [min–max] across folds, per category, and the setting chosen on every
question of both (what the defaults should be). Replays the captures of ``--cv`` runs (the
candidates each question recalled through the kernel), so it needs no ingest and takes a few
minutes. Prints tables and writes JSON; never asserts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._data import SHARED_DATA, load_locomo, load_longmemeval
from rich.console import Console
from rich.table import Table

from bench import _cv, locomo, longmemeval

LOCOMO_HEADLINE = ("turn_recall@10", "session_recall@10", "turn_recall@5")
LME_HEADLINE = ("session_recall_any@5", "session_recall@5", "turn_recall@10")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=locomo.DEFAULT_PATH)
    parser.add_argument("--lme", type=Path, default=longmemeval.DEFAULT_PATH)
    parser.add_argument("--locomo-capture", type=Path, required=True)
    parser.add_argument(
        "--lme-capture",
        type=Path,
        nargs="+",
        required=True,
        help="the LongMemEval capture; several files are parts made with --every N, one per "
        "offset of --lme-offset, in that order",
    )
    parser.add_argument(
        "--lme-limit", type=int, help="the --limit the LongMemEval capture was made with"
    )
    parser.add_argument(
        "--lme-every", type=int, default=1, help="the --every the LongMemEval capture was made with"
    )
    parser.add_argument(
        "--lme-offset",
        type=longmemeval.parse_offsets,
        default=(0,),
        help="the --offset the LongMemEval capture was made with (several, comma-separated: "
        "one per file of --lme-capture)",
    )
    parser.add_argument("--lme-folds", type=int, default=3)
    parser.add_argument(
        "--embedder",
        default="minilm",
        help="the embedder both captures were made with: the kernel's defaults for it are "
        "today's (the static embedder's weights differ)",
    )
    parser.add_argument(
        "--stages",
        default="fusion",
        help="the knobs the choice may set: fusion, sessions, rerank (comma-separated)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    console = Console()
    for path, what in ((args.locomo, "locomo_dev.json"), (args.lme, "longmemeval_s_dev")):
        if not path.is_file():
            console.print(
                f"[red]benchmark data not found at {path}[/red]: pass the path to {what} "
                f"(see {SHARED_DATA}/README.md)"
            )
            return 2
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    unknown = set(stages) - {"fusion", "sessions", "rerank"}
    if unknown or "fusion" not in stages:
        console.print(
            f"[red]--stages: fusion, then any of sessions, rerank; not {args.stages}[/red]"
        )
        return 2

    conversations = load_locomo(args.locomo)
    questions = [q for q in load_longmemeval(args.lme) if not q.abstention]
    try:
        questions = longmemeval.sample(
            questions, every=args.lme_every, limit=args.lme_limit, offsets=args.lme_offset
        )
    except ValueError as error:
        console.print(f"[red]--lme-every / --lme-offset: {error}[/red]")
        return 2
    try:
        lme_captures = _cv.load_captures(
            args.lme_capture, every=args.lme_every, offsets=args.lme_offset
        )
    except ValueError as error:
        console.print(f"[red]--lme-capture: {error}[/red]")
        return 2
    locomo_captures = _cv.load_captures([args.locomo_capture])
    locomo_questions = [q.question for conv in conversations for q in conv.questions]
    if not _cv.captures_match(locomo_captures, locomo_questions) or not _cv.captures_match(
        lme_captures, [q.question for q in questions]
    ):
        console.print(
            "[red]a capture does not match its questions[/red] (LoCoMo "
            f"{len(locomo_captures)} captured, {len(locomo_questions)} asked; LongMemEval "
            f"{len(lme_captures)} captured, {len(questions)} asked: are --lme-limit, "
            "--lme-every and --lme-offset the capture's?)"
        )
        return 2

    grid = _cv.make_grid(stages, args.embedder)
    candidates = list(range(len(grid)))
    locomo_values = locomo.replayed(console, conversations, locomo_captures, grid)
    lme_values = longmemeval.replayed(console, questions, lme_captures, grid)
    locomo_folds, locomo_groups = locomo.folds_and_groups(conversations)
    lme_folds, lme_groups = longmemeval.folds_and_groups(questions, args.lme_folds)
    parts = [
        _cv.Part(
            "LoCoMo", locomo_values["hybrid"], locomo_folds, locomo_groups,
            locomo.CV_METRICS, locomo.CV_OBJECTIVE,
        ),
        _cv.Part(
            "LongMemEval", lme_values["hybrid"], lme_folds, lme_groups,
            longmemeval.METRICS, longmemeval.CV_OBJECTIVE,
        ),
    ]  # fmt: skip
    joint, chosen = _cv.cross_validate_joint(parts, candidates)
    procedures: dict[str, dict[str, list[_cv.FoldOutcome]]] = {
        "today's defaults": {p.name: _fixed(p, 0) for p in parts},
        "each benchmark alone": {
            p.name: _cv.cross_validate(
                p.values, candidates, p.fold_of, p.groups, p.metrics, p.objective_metrics
            )
            for p in parts
        },
        "both benchmarks (joint)": joint,
        "keyword alone, defaults": {
            "LoCoMo": _fixed(_as_part(parts[0], locomo_values["keyword"]), 0),
            "LongMemEval": _fixed(_as_part(parts[1], lme_values["keyword"]), 0),
        },
    }
    headlines = {"LoCoMo": LOCOMO_HEADLINE, "LongMemEval": LME_HEADLINE}
    _print(console, procedures, headlines, parts, grid)
    console.print(
        f"chosen on every question of both (the proposed defaults): {grid[chosen].label()}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                _figures(procedures, grid, chosen, stages, args), indent=2, default=_cv.nan_as_null
            )
        )
        console.print(f"figures written to {args.json}")
    return 0


def _as_part(part: _cv.Part, values: np.ndarray) -> _cv.Part:  # type: ignore[type-arg]
    return _cv.Part(
        part.name, values, part.fold_of, part.groups, part.metrics, part.objective_metrics
    )


def _fixed(part: _cv.Part, setting: int) -> list[_cv.FoldOutcome]:
    """``setting`` scored on each held-out fold (nothing chosen)."""
    fold_arr = np.array(part.fold_of)
    return [part.held_out(fold, setting, fold_arr == fold) for fold in sorted(set(part.fold_of))]


def _print(
    console: Console,
    procedures: Mapping[str, Mapping[str, list[_cv.FoldOutcome]]],
    headlines: Mapping[str, Sequence[str]],
    parts: Sequence[_cv.Part],
    grid: Sequence[_cv.Setting],
) -> None:
    for part in parts:
        metrics = headlines[part.name]
        table = Table(title=f"{part.name}, hybrid: held-out mean ±std [min-max] across folds, %")
        table.add_column("procedure")
        for metric in metrics:
            table.add_column(_cv.short_name(metric), justify="right")
        for name, by_part in procedures.items():
            table.add_row(name, *(_cv.spread(by_part[part.name], "all", m) for m in metrics))
        console.print(table)
        groups = sorted(set(part.groups))
        per_group = Table(title=f"{part.name}: held-out {_cv.short_name(metrics[0])} by group, %")
        per_group.add_column("procedure")
        for group in groups:
            per_group.add_column(group, justify="right")
        for name, by_part in procedures.items():
            outcomes = by_part[part.name]
            per_group.add_row(
                name, *(_cv.percent(_cv.summarise(outcomes, g, metrics[0])[0]) for g in groups)
            )
        console.print(per_group)
    chosen = Table(title="settings chosen on the training folds")
    chosen.add_column("procedure")
    chosen.add_column("benchmark")
    chosen.add_column("per held-out fold")
    for name in ("each benchmark alone", "both benchmarks (joint)"):
        for part in parts:
            folds = procedures[name][part.name]
            chosen.add_row(
                name, part.name, "; ".join(f"{o.fold}: {grid[o.chosen].label()}" for o in folds)
            )
    console.print(chosen)


def _figures(
    procedures: Mapping[str, Mapping[str, list[_cv.FoldOutcome]]],
    grid: Sequence[_cv.Setting],
    chosen: int,
    stages: Sequence[str],
    args: argparse.Namespace,
) -> dict[str, object]:
    return {
        name: {
            bench: [
                {"fold": o.fold, "chosen": grid[o.chosen].label(), "held_out": o.held_out}
                for o in outcomes
            ]
            for bench, outcomes in by_part.items()
        }
        for name, by_part in procedures.items()
    } | {
        "chosen_on_both": grid[chosen].label(),
        "meta": {
            "locomo_capture": str(args.locomo_capture),
            "lme_capture": [str(path) for path in args.lme_capture],
            "lme_limit": args.lme_limit,
            "lme_every": args.lme_every,
            "lme_offset": list(args.lme_offset),
            "lme_folds": args.lme_folds,
            "stages": list(stages),
            "grid": len(grid),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
