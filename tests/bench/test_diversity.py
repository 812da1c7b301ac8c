"""The greedy spread pick of bench/diversity.py: what it replays must be what it says."""

from __future__ import annotations

import numpy as np
from bench._data import LocomoQuestion
from bench.diversity import Question, neighbours, picked, words_alike


def _question(turns: list[str | None], words: list[set[str]]) -> Question:
    asked = LocomoQuestion("q?", "a", 1, ("D1:1",))
    return Question(
        asked, "conv-1", np.linspace(1.0, 0.5, len(turns)), turns,
        ["1"] * len(turns), [frozenset(w) for w in words],
    )  # fmt: skip


def test_no_penalty_keeps_the_kernels_order() -> None:
    scores = np.array([0.9, 0.8, 0.7])
    assert picked(scores, lambda a, b: 1.0, 0.0) == [0, 1, 2]


def test_a_hit_like_a_picked_one_falls_behind_a_weaker_unlike_one() -> None:
    scores = np.array([1.0, 0.9, 0.5])

    def alike(a: int, b: int) -> float:  # hit 1 is like hit 0
        return 1.0 if {a, b} == {0, 1} else 0.0

    assert picked(scores, alike, 0.6) == [0, 2, 1]  # 0.9 x 0.4 = 0.36 < 0.5
    assert picked(scores, alike, 0.3) == [0, 1, 2]  # 0.9 x 0.7 = 0.63 > 0.5


def test_neighbours_are_turns_of_one_session_within_the_window() -> None:
    q = _question(["D1:3", "D1:4", "D1:6", "D2:4", None], [set()] * 5)
    near = neighbours(1)(q)
    assert near(0, 1) == 1.0 and near(1, 2) == 0.0  # one turn apart; two turns apart
    assert near(1, 3) == 0.0 and near(0, 4) == 0.0  # another session; not a turn
    assert neighbours(2)(q)(1, 2) == 1.0


def test_words_alike_is_the_jaccard_overlap() -> None:
    q = _question(["D1:1", "D1:2", "D1:3"], [{"a", "b"}, {"b", "c"}, set()])
    alike = words_alike(q)
    assert alike(0, 1) == 1 / 3 and alike(0, 2) == 0.0 and alike(2, 2) == 0.0
