"""Cross-validation bookkeeping (bench/_cv.py): choices come from the training folds only."""

from __future__ import annotations

import numpy as np
import pytest
from bench._cv import cross_validate, hash_folds, make_grid, summarise


def test_the_choice_is_made_without_the_held_out_fold() -> None:
    # two settings, two folds of two questions, one metric: setting 1 is better on fold a,
    # setting 0 on fold b; each fold must get the setting the *other* fold prefers
    values = np.array([[[0.0], [0.0], [1.0], [1.0]], [[1.0], [1.0], [0.0], [0.0]]])
    folds = ["a", "a", "b", "b"]
    outcomes = cross_validate(values, [0, 1], folds, ["g"] * 4, ["m"], ["m"])
    chosen = {o.fold: o.chosen for o in outcomes}
    assert chosen == {"a": 0, "b": 1}
    # so both held-out folds score 0: all-dev tuning would have claimed 1.0
    assert summarise(outcomes, "all", "m") == pytest.approx((0.0, 0.0, 0.0, 0.0))


def test_ties_keep_the_first_setting() -> None:
    values = np.ones((3, 4, 1))
    outcomes = cross_validate(values, [0, 1, 2], ["a", "a", "b", "b"], ["g"] * 4, ["m"], ["m"])
    assert all(o.chosen == 0 for o in outcomes)


def test_grid_starts_with_the_kernels_defaults() -> None:
    grid = make_grid()
    assert grid[0].keyword == 0.4 and not grid[0].ranking.reorders
    assert len({s.label() for s in grid}) == len(grid)
    assert make_grid(("fusion",)) == [s for s in grid if s.stages() == {"fusion"}]


def test_hash_folds_are_stable_and_cover_every_fold() -> None:
    ids = [f"q{i}" for i in range(60)]
    folds = hash_folds(ids, 3)
    assert folds == hash_folds(ids, 3) and set(folds) == {0, 1, 2}
