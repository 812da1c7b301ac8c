"""Reciprocal rank fusion and weighted score fusion."""

from __future__ import annotations

import pytest

from cairn.search.fusion import FusedHit, rank_and_score_fusion, rrf, weighted_score_fusion


def test_rrf_formula_exact_values() -> None:
    hits = rrf({"vector": ["a", "b"], "keyword": ["b", "c"]}, {"vector": 0.6, "keyword": 0.4})
    scores = {hit.key: hit.score for hit in hits}
    assert scores["a"] == pytest.approx(0.6 / 61)
    assert scores["b"] == pytest.approx(0.6 / 62 + 0.4 / 61)
    assert scores["c"] == pytest.approx(0.4 / 62)
    assert [hit.key for hit in hits] == ["b", "a", "c"]
    b = hits[0]
    assert b.ranks == {"vector": 2, "keyword": 1}


def test_rrf_k_constant_is_used() -> None:
    (hit,) = rrf({"s": ["a"]}, {"s": 1.0}, k=0)
    assert hit.score == 1.0
    (hit,) = rrf({"s": ["x", "a"]}, {"s": 2.0}, k=10)[1:]
    assert hit.score == pytest.approx(2.0 / 12)


def test_weights_change_the_order() -> None:
    lists = {"vector": ["v1", "v2", "shared"], "keyword": ["k1", "k2", "shared"]}
    vector_heavy = rrf(lists, {"vector": 0.9, "keyword": 0.1})
    keyword_heavy = rrf(lists, {"vector": 0.1, "keyword": 0.9})
    # "shared" (found by both) stays on top; the single-signal hits swap places.
    assert [hit.key for hit in vector_heavy] == ["shared", "v1", "v2", "k1", "k2"]
    assert [hit.key for hit in keyword_heavy] == ["shared", "k1", "k2", "v1", "v2"]


def test_found_by_both_beats_found_by_one() -> None:
    hits = rrf({"vector": ["only_v", "both"], "keyword": ["only_k", "both"]})
    assert hits[0].key == "both"
    assert hits[0].ranks == {"vector": 2, "keyword": 2}


def test_ties_break_by_key_deterministically() -> None:
    first = rrf({"a": ["x", "y"], "b": ["y", "x"]}, {"a": 1.0, "b": 1.0})
    second = rrf({"b": ["y", "x"], "a": ["x", "y"]}, {"b": 1.0, "a": 1.0})
    assert [hit.key for hit in first] == [hit.key for hit in second] == ["x", "y"]
    assert first[0].score == first[1].score


def test_repeated_key_keeps_best_rank() -> None:
    hits = rrf({"s": ["a", "b", "a"]})
    assert hits[0] == FusedHit("a", pytest.approx(1 / 61), {"s": 1}, {})  # type: ignore[arg-type]


def test_empty_inputs() -> None:
    assert rrf({}) == []
    assert rrf({"vector": [], "keyword": []}, {"vector": 1.0, "keyword": 1.0}) == []
    assert weighted_score_fusion({}) == []
    assert weighted_score_fusion({"v": []}) == []


def test_raw_scores_are_carried_but_do_not_change_scores() -> None:
    lists = {"vector": ["a", "b"], "keyword": ["b"]}
    plain = rrf(lists)
    shown = rrf(lists, raw_scores={"vector": {"a": 0.91, "b": 0.5}, "keyword": {"b": -7.2}})
    assert [(h.key, h.score) for h in plain] == [(h.key, h.score) for h in shown]
    by_key = {hit.key: hit for hit in shown}
    assert by_key["b"].raw_scores == {"vector": 0.5, "keyword": -7.2}
    assert by_key["a"].raw_scores == {"vector": 0.91}


def test_limit() -> None:
    assert [hit.key for hit in rrf({"s": ["a", "b", "c"]}, limit=2)] == ["a", "b"]


def test_bad_weights_are_rejected() -> None:
    with pytest.raises(ValueError, match="keyword"):
        rrf({"vector": ["a"], "keyword": ["b"]}, {"vector": 1.0})
    with pytest.raises(ValueError):
        rrf({"vector": ["a"]}, {"vector": -1.0})
    with pytest.raises(ValueError):
        rrf({"vector": ["a"]}, k=-1)


def test_weighted_score_fusion_values() -> None:
    hits = weighted_score_fusion(
        {
            "vector": [("a", 0.9), ("b", 0.7), ("c", 0.5)],
            "keyword": [("c", 12.0), ("a", 2.0)],
        },
        {"vector": 0.75, "keyword": 0.25},
    )
    scores = {hit.key: hit.score for hit in hits}
    # vector normalised: a 1.0, b 0.5, c 0.0; keyword: c 1.0, a 0.0
    assert scores["a"] == pytest.approx(0.75)
    assert scores["b"] == pytest.approx(0.375)
    assert scores["c"] == pytest.approx(0.25)
    assert [hit.key for hit in hits] == ["a", "b", "c"]
    assert hits[2].raw_scores == {"vector": 0.5, "keyword": 12.0}
    assert hits[2].ranks == {"vector": 3, "keyword": 1}


def test_weighted_score_fusion_weights_change_order() -> None:
    lists = {"vector": [("v", 1.0), ("k", 0.0)], "keyword": [("k", 5.0), ("v", 1.0)]}
    assert weighted_score_fusion(lists, {"vector": 0.9, "keyword": 0.1})[0].key == "v"
    assert weighted_score_fusion(lists, {"vector": 0.1, "keyword": 0.9})[0].key == "k"


def test_weighted_score_fusion_equal_scores_normalise_to_one() -> None:
    (hit,) = weighted_score_fusion({"s": [("a", 3.0)]})
    assert hit.score == 1.0
    with pytest.raises(ValueError):
        weighted_score_fusion({"s": [("a", float("nan"))]})


def test_rank_and_score_fusion_takes_ranks_from_one_and_sizes_from_the_other() -> None:
    hits = rank_and_score_fusion(
        {"keyword": [("a", 12.0), ("b", 3.0)]},
        {"vector": [("b", 0.9), ("c", 0.7), ("a", 0.5)]},
        {"keyword": 0.4, "vector": 0.6},
        k=10,
    )
    scores = {hit.key: hit.score for hit in hits}
    # keyword: 11 / (10 + rank), 1 at the top; vector: min-max over its own list
    assert scores["a"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.0)
    assert scores["b"] == pytest.approx(0.4 * 11 / 12 + 0.6 * 1.0)
    assert scores["c"] == pytest.approx(0.6 * 0.5)
    assert [hit.key for hit in hits] == ["b", "a", "c"]
    # the rank-fused signal's scores are kept for display, never weighed
    assert hits[0].raw_scores == {"keyword": 3.0, "vector": 0.9}
    assert hits[0].ranks == {"keyword": 2, "vector": 1}


def test_rank_and_score_fusion_floors_scale_from_matching_nothing() -> None:
    vector = [("a", 0.8), ("b", 0.4), ("c", -0.2)]
    floored = rank_and_score_fusion({}, {"vector": vector}, floors={"vector": 0.0})
    assert {h.key: h.score for h in floored} == pytest.approx({"a": 1.0, "b": 0.5, "c": 0.0})
    # nothing above the floor: nothing is worth anything (not all 1, as equal scores are)
    (alone,) = rank_and_score_fusion({}, {"vector": [("a", -0.3)]}, floors={"vector": 0.0})
    assert alone.score == 0.0
    (equal,) = rank_and_score_fusion({}, {"vector": [("a", 0.4)]})
    assert equal.score == 1.0


def test_rank_and_score_fusion_refuses_what_it_cannot_mean() -> None:
    with pytest.raises(ValueError, match="both by rank and by score"):
        rank_and_score_fusion({"s": [("a", 1.0)]}, {"s": [("a", 1.0)]})
    with pytest.raises(ValueError, match="floors apply only"):
        rank_and_score_fusion({"s": [("a", 1.0)]}, {}, floors={"s": 0.0})
    with pytest.raises(ValueError, match="non-finite"):
        rank_and_score_fusion({}, {"s": [("a", float("inf"))]})
    with pytest.raises(ValueError, match="k must be"):
        rank_and_score_fusion({"s": [("a", 1.0)]}, {}, k=-1)
