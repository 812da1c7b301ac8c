"""Would spreading the first hits over more of a conversation find more of the evidence?

    python bench/locomo.py ../shared/data/locomo/locomo_dev.json --cv --capture locomo.pkl
    python bench/diversity.py locomo.pkl [--json out.json]

In a conversation store the first ten hits of a question crowd together: a turn that
matches lifts its neighbours too (their context chunks hold its words), and on LoCoMo about
half of the first ten hits lie within two turns of a better one. A question whose evidence
is spread over several sessions ("What activities does Melanie partake in?") might find more
of it if the crowd thinned. This replays each captured question's 50 best fused hits (the
kernel's default fusion, as ``Memory.search`` ranks them) through a greedy maximal-marginal-
relevance pick: a hit's score is scaled by ``1 - penalty x its likeness to a hit already
picked``, with two likenesses:

- ``words``: Jaccard overlap of the two hits' content words (what a store of any kind could
  use);
- ``neighbours``: 1 for turns of the same session at most ``window`` turns apart, from the
  benchmark's own turn numbers (which the kernel does not have: an upper bound on what
  knowing the turn order would give).

Reported: turn recall@10 per category and session recall@10 on every question, and the
penalty chosen by leave-one-conversation-out (the best mean of T@10 + S@10 on the other four
conversations, scored on the fifth). Prints a table and writes JSON; never asserts.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._adapter import Captured
from bench._data import LOCOMO_CATEGORIES, LocomoQuestion, load_locomo, session_of
from bench._report import report
from bench.locomo import DEFAULT_PATH, score_values

from bench import _cv
from cairn.retrieval.fuse import collapse, fuse
from cairn.retrieval.rerank import query_words

POOL = 50
Likeness = Callable[[int, int], float]


@dataclass(frozen=True, slots=True)
class Question:
    question: LocomoQuestion
    conversation: str
    scores: np.ndarray  # type: ignore[type-arg]
    turns: list[str | None]  # the hit's turn ("D3:14"), None for a hit that is no turn
    sessions: list[str]
    words: list[frozenset[str]]


def prepare(conversation: str, question: LocomoQuestion, captured: Captured) -> Question:
    """The question's ``POOL`` best hits as the kernel's default fusion ranks them."""
    setting = _cv.DEFAULT_SETTING
    fused = fuse(
        captured.keyword,
        captured.vector,
        mode="hybrid",
        weights=setting.weights,
        fusion=setting.ranking.fusion,
        vector_complete=captured.vector_complete,
    )
    hits = collapse(
        fused, captured.rows, captured.scopes, POOL,  # type: ignore[arg-type]
        context_weight=setting.ranking.context_weight,
    )  # fmt: skip
    refs = [captured.refs.get(h.record_id) for h in hits]
    return Question(
        question, conversation,
        np.array([h.scores.fused for h in hits]),
        [ref[1] if ref is not None and ref[0] == "turn" else None for ref in refs],
        [ref[2] if ref is not None else "" for ref in refs],
        [query_words(h.text) for h in hits]  # content words, the kernel's stopwords out,
    )  # fmt: skip


def words_alike(q: Question) -> Likeness:
    def alike(a: int, b: int) -> float:
        union = q.words[a] | q.words[b]
        return len(q.words[a] & q.words[b]) / len(union) if union else 0.0

    return alike


def neighbours(window: int) -> Callable[[Question], Likeness]:
    def of(q: Question) -> Likeness:
        def alike(a: int, b: int) -> float:
            ta, tb = q.turns[a], q.turns[b]
            if ta is None or tb is None or session_of(ta) != session_of(tb):
                return 0.0
            return 1.0 if abs(_turn_number(ta) - _turn_number(tb)) <= window else 0.0

        return alike

    return of


def _turn_number(dia_id: str) -> int:
    return int(dia_id.split(":")[1])


def picked(scores: np.ndarray, alike: Likeness, penalty: float) -> list[int]:  # type: ignore[type-arg]
    """Greedy MMR: the best score scaled by ``1 - penalty x`` its greatest likeness to a
    hit already picked, again and again."""
    if penalty == 0:
        return list(range(len(scores)))
    left = list(range(len(scores)))
    closest = np.zeros(len(scores))
    order: list[int] = []
    while left:
        best = max(left, key=lambda i: (scores[i] * (1 - penalty * closest[i]), -i))
        order.append(best)
        left.remove(best)
        for i in left:
            closest[i] = max(closest[i], alike(best, i))
    return order


def values(q: Question, likeness: Callable[[Question], Likeness], penalty: float) -> list[float]:
    """[T@10, S@10] of one question with one setting."""
    order = picked(q.scores, likeness(q), penalty)
    turns = [t for t in (q.turns[i] for i in order) if t is not None]
    sessions = list(dict.fromkeys(q.sessions[i] for i in order))
    scored = score_values(q.question.category, turns, sessions, q.question.evidence)
    return [scored["turn_recall@10"], scored["session_recall@10"]]


SETTINGS: list[tuple[str, Callable[[Question], Likeness], float]] = [
    ("none (the kernel's order)", words_alike, 0.0),
    *[(f"words, penalty {p:g}", words_alike, p) for p in (0.2, 0.4, 0.6)],
    *[(f"neighbours ±{w}, penalty {p:g}", neighbours(w), p) for w in (1, 2) for p in (0.2, 0.4)],
]


def run(capture: Path, data: Path) -> dict[str, Any]:
    conversations = load_locomo(data)
    with capture.open("rb") as handle:
        captures: list[Captured] = pickle.load(handle)
    asked = [(c.sample_id, q) for c in conversations for q in c.questions]
    if len(asked) != len(captures):
        raise SystemExit(f"{capture}: not a capture of {data}'s questions")
    questions = [prepare(sid, q, cap) for (sid, q), cap in zip(asked, captures, strict=True)]
    table = np.array([[values(q, like, p) for q in questions] for _, like, p in SETTINGS])
    categories = sorted({LOCOMO_CATEGORIES.get(q.question.category, "?") for q in questions})
    rows: dict[str, dict[str, float]] = {}
    for s, (name, _, _) in enumerate(SETTINGS):
        row = {"T@10": _pct(table[s, :, 0]), "S@10": _pct(table[s, :, 1])}
        for cat in categories:
            mask = [LOCOMO_CATEGORIES.get(q.question.category) == cat for q in questions]
            row[f"T@10 {cat}"] = _pct(table[s, mask, 0])
        rows[name] = row
    return {"capture": str(capture), "questions": len(questions), "pool": POOL,
            "settings": rows, "cross_validated": _cross_validated(questions, table)}  # fmt: skip


def _pct(column: np.ndarray) -> float:  # type: ignore[type-arg]
    return round(100 * float(np.mean(column)), 1)


def _cross_validated(questions: Sequence[Question], table: np.ndarray) -> dict[str, Any]:  # type: ignore[type-arg]
    """Per likeness, the penalty chosen on four conversations and scored on the fifth."""
    folds = sorted({q.conversation for q in questions})
    by_fold = [table[0, [q.conversation == f for q in questions]].mean(axis=0) for f in folds]
    kernel = np.array(by_fold).mean(axis=0)
    out: dict[str, Any] = {
        "none (the kernel's order)": {
            "T@10": round(100 * kernel[0], 1),
            "S@10": round(100 * kernel[1], 1),
            "chosen": [],
        }
    }
    for kind in ("words", "neighbours"):
        candidates = [0] + [s for s, (n, _, _) in enumerate(SETTINGS) if n.startswith(kind)]
        held: list[list[float]] = []
        chosen: list[str] = []
        for fold in folds:
            inside = np.array([q.conversation != fold for q in questions])
            objective = [table[s, inside].mean(axis=0).sum() for s in candidates]
            best = candidates[int(np.argmax(objective))]  # ties: the first, the kernel's order
            chosen.append(SETTINGS[best][0])
            held.append(list(table[best, ~inside].mean(axis=0)))
        means = np.array(held).mean(axis=0)
        out[kind] = {"T@10": round(100 * means[0], 1), "S@10": round(100 * means[1], 1),
                     "chosen": chosen}  # fmt: skip
    return out


def show(figures: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"LoCoMo, {figures['questions']} questions, the {figures['pool']} best hits "
        "picked for spread (all questions)",
        title_justify="left",
    )
    first = next(iter(figures["settings"].values()))
    table.add_column("setting")
    for column in first:
        table.add_column(column, justify="right")
    for name, row in figures["settings"].items():
        table.add_row(name, *(f"{v:.1f}" for v in row.values()))
    console.print(table)
    for kind, cv in figures["cross_validated"].items():
        console.print(
            f"{kind}, leaving one conversation out (mean of the held-out conversations): "
            f"T@10 {cv['T@10']:.1f}, S@10 {cv['S@10']:.1f}"
            + (f" (chosen: {'; '.join(cv['chosen'])})" if cv["chosen"] else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", type=Path, help="a capture of bench/locomo.py --cv --capture")
    parser.add_argument("--data", type=Path, default=DEFAULT_PATH, help="locomo_dev.json")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if not args.capture.is_file():
        parser.error(f"{args.capture}: no such capture (bench/locomo.py --cv --capture FILE)")
    console = Console(width=None if sys.stdout.isatty() else 160)
    return report(run(args.capture, args.data), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
