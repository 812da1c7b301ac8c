"""Cross-validation bookkeeping (bench/_cv.py): choices come from the training folds only."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from bench._adapter import Captured
from bench._cv import (
    DEFAULT_SETTING,
    Part,
    Setting,
    cross_validate,
    cross_validate_joint,
    hash_folds,
    make_grid,
    replay,
    summarise,
)

from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig, rank
from cairn.retrieval.weights import DEFAULT_WEIGHTS
from cairn.retrieval.when import query_window
from cairn.store.base import ChunkRow
from tests.factories import T0, chunk_meta


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


def _part(name: str, per_question: list[list[float]], folds: list[str]) -> Part:
    """A benchmark of one metric: ``per_question[setting][question]``."""
    values = np.array(per_question, dtype=float)[:, :, None]
    return Part(name, values, folds, ["g"] * len(folds), ["m"], ["m"])


def test_a_joint_choice_weighs_both_benchmarks_and_never_its_held_out_fold() -> None:
    # Setting 0 is best on benchmark A alone, setting 1 on B alone; setting 2 is second best
    # on both, and best on the two together.
    a = _part("A", [[1, 1, 1, 1], [0, 0, 0, 0], [0.8, 0.8, 0.8, 0.8]], ["a1", "a1", "a2", "a2"])
    b = _part("B", [[0, 0, 0, 0], [1, 1, 1, 1], [0.8, 0.8, 0.8, 0.8]], ["b1", "b1", "b2", "b2"])
    outcomes, everywhere = cross_validate_joint([a, b], [0, 1, 2])
    assert everywhere == 2
    assert {o.chosen for o in outcomes["A"] + outcomes["B"]} == {2}
    assert summarise(outcomes["A"], "all", "m")[0] == pytest.approx(0.8)
    # A held-out fold's questions do not vote: on A's fold a1, setting 0 scores 5 there
    # (enough to win were a1 counted), but a2 and all of B choose setting 2.
    a = _part("A", [[5, 5, 0, 0], [0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]], ["a1", "a1", "a2", "a2"])
    outcomes, _ = cross_validate_joint([a, b], [0, 1, 2])
    chosen = {o.fold: o.chosen for o in outcomes["A"]}
    assert chosen["a1"] == 2
    assert chosen["a2"] == 0  # a1's 5 outweighs B's preference once a1 trains


def test_ties_keep_the_first_setting() -> None:
    values = np.ones((3, 4, 1))
    outcomes = cross_validate(values, [0, 1, 2], ["a", "a", "b", "b"], ["g"] * 4, ["m"], ["m"])
    assert all(o.chosen == 0 for o in outcomes)


def test_grid_starts_with_the_kernels_defaults() -> None:
    grid = make_grid()
    share = DEFAULT_WEIGHTS["keyword"] / (DEFAULT_WEIGHTS["keyword"] + DEFAULT_WEIGHTS["vector"])
    assert grid[0] == DEFAULT_SETTING
    assert grid[0].keyword == pytest.approx(share) and grid[0].ranking == DEFAULT_RANKING
    assert len({s.label() for s in grid}) == len(grid)
    assert make_grid(("fusion",)) == [s for s in grid if s.stages() == {"fusion"}]


def test_hash_folds_are_stable_and_cover_every_fold() -> None:
    ids = [f"q{i}" for i in range(60)]
    folds = hash_folds(ids, 3)
    assert folds == hash_folds(ids, 3) and set(folds) == {0, 1, 2}


def test_the_time_boost_replays_as_the_kernel_ranks() -> None:
    def turn(i: int) -> ChunkRow:
        meta = chunk_meta(i, kind="episode", source_time=T0 + timedelta(days=10 * i))
        return ChunkRow(meta, 1, "", "", 0, 4, f"text {i}", f"turn {i}")

    rows = {i: turn(i) for i in range(1, 5)}
    keyword = [(i, 5.0 - i / 100) for i in (1, 2, 3, 4)]  # turn 1 first, nearly a tie
    asked = T0 + timedelta(days=41)
    query = "what did we say 11 days ago?"  # turn 3's day
    captured = Captured(
        query, keyword, [], rows, {1: "chat/a"},
        {f"rec-{i}": ("turn", f"D1:{i}", "s1") for i in rows},
    )  # fmt: skip
    timed = Setting(1.0, replace(DEFAULT_RANKING, time_weight=1.0))
    plain, boosted = replay(captured, [Setting(1.0), timed], mode="keyword", asked_at=asked)
    assert plain.turns[0] == "D1:1" and boosted.turns[0] == "D1:3"
    kernel = rank(
        keyword, [], rows, {1: "chat/a"}, query=query, mode="keyword", k=4,
        weights={"keyword": 1.0, "vector": 0.0}, config=RankingConfig(time_weight=1.0),
        window=query_window(query, now=asked), vector_complete=captured.vector_complete,
    )  # fmt: skip
    assert [f"D1:{h.record_id.removeprefix('rec-')}" for h in kernel] == boosted.turns
    # asked at no known moment, the boost does nothing
    assert replay(captured, [timed], mode="keyword")[0].turns == plain.turns


def test_a_longmemeval_sample_takes_every_nth_question_then_the_limit() -> None:
    from bench._data import LmeQuestion
    from bench.longmemeval import sample

    # the data file lists its questions in runs of one type: a stride keeps every type
    types = ["multi-session"] * 6 + ["temporal-reasoning"] * 6
    questions = [
        LmeQuestion(f"q{i}", kind, "?", "", "2023/05/20 (Sat) 07:47", (), frozenset())
        for i, kind in enumerate(types)
    ]
    every_third = sample(questions, every=3, limit=None)
    assert [q.question_id for q in every_third] == ["q0", "q3", "q6", "q9"]
    assert {q.question_type for q in every_third} == set(types)
    assert [q.question_id for q in sample(questions, every=3, limit=2)] == ["q0", "q3"]
    assert sample(questions, every=1, limit=None) == questions
    with pytest.raises(ValueError, match="every"):
        sample(questions, every=0, limit=None)
    # the offsets split the questions into parts that meet nowhere and miss nothing
    parts = [sample(questions, every=3, limit=None, offsets=(n,)) for n in range(3)]
    assert [q.question_id for q in parts[1]] == ["q1", "q4", "q7", "q10"]
    assert sorted((q.question_id for part in parts for q in part), key=lambda i: int(i[1:])) == [
        q.question_id for q in questions
    ]
    # several offsets keep their questions in the data file's order
    assert [q.question_id for q in sample(questions, every=3, limit=None, offsets=(2, 0))] == [
        "q0", "q2", "q3", "q5", "q6", "q8", "q9", "q11"
    ]  # fmt: skip
    for offsets in ((-1,), (3,), (), (1, 1)):
        with pytest.raises(ValueError, match="offset"):
            sample(questions, every=3, limit=None, offsets=offsets)


def test_a_capture_of_other_questions_is_caught_even_when_the_counts_agree() -> None:
    from bench._cv import captures_match

    def captured(query: str) -> Captured:
        return Captured(query, [], [], {}, {}, {})

    made = [captured("where did I park?"), captured("who won?")]
    assert captures_match(made, ["where did I park?", "who won?"])
    assert not captures_match(made, ["where did I park?", "what did I cook?"])
    assert not captures_match(made, ["who won?", "where did I park?"])  # order counts
    assert not captures_match(made, ["where did I park?"])


def test_parts_made_with_offsets_go_back_in_the_data_files_order() -> None:
    from bench._cv import captures_match, interleave
    from bench._data import LmeQuestion
    from bench.longmemeval import sample

    questions = [
        LmeQuestion(f"q{i}", "single-session-user", f"question {i}?", "", "", (), frozenset())
        for i in range(11)  # 11 = 4 + 4 + 3: the last part is one short
    ]

    def part(offset: int) -> list[Captured]:
        chosen = sample(questions, every=3, limit=None, offsets=(offset,))
        return [Captured(q.question, [], [], {}, {}, {}) for q in chosen]

    parts = [part(n) for n in range(3)]
    whole = interleave(parts, every=3, offsets=(0, 1, 2))
    assert captures_match(whole, [q.question for q in questions])
    # two parts of three: the questions those two offsets keep
    two = interleave([parts[2], parts[0]], every=3, offsets=(2, 0))
    kept = sample(questions, every=3, limit=None, offsets=(0, 2))
    assert captures_match(two, [q.question for q in kept])
    # parts given in another order than their offsets: the question texts catch it
    swapped = interleave([parts[1], parts[0], parts[2]], every=3, offsets=(0, 1, 2))
    assert not captures_match(swapped, [q.question for q in questions])
    # a part short of a question: caught too
    short = interleave([parts[0], parts[1][:-1], parts[2]], every=3, offsets=(0, 1, 2))
    assert not captures_match(short, [q.question for q in questions])
    with pytest.raises(ValueError, match="parts"):
        interleave(parts, every=3, offsets=(0, 1))


def test_load_captures_reads_one_file_as_it_is_and_parts_in_order(tmp_path: Path) -> None:
    import pickle

    from bench._cv import load_captures

    def saved(name: str, queries: list[str]) -> Path:
        path = tmp_path / name
        path.write_bytes(pickle.dumps([Captured(q, [], [], {}, {}, {}) for q in queries]))
        return path

    one = saved("all.pkl", ["a", "b", "c"])
    assert [c.query for c in load_captures([one])] == ["a", "b", "c"]
    halves = [saved("even.pkl", ["a", "c", "e"]), saved("odd.pkl", ["b", "d"])]
    assert [c.query for c in load_captures(halves, every=2, offsets=(0, 1))] == list("abcde")
    with pytest.raises(ValueError, match="one each"):
        load_captures(halves, every=3, offsets=(0, 1, 2))
