"""Benchmark metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest
from bench._data import normalise_evidence, parse_lme_date, parse_locomo_date
from bench._metrics import Aggregate, dedupe, ndcg_at_k, recall_any_at_k, recall_at_k


def test_recall_at_k_counts_share_of_gold_in_top_k() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at_k(ranked, {"a", "d"}, 1) == 0.5
    assert recall_at_k(ranked, {"a", "d"}, 3) == 0.5
    assert recall_at_k(ranked, {"a", "d"}, 4) == 1.0
    assert recall_at_k(ranked, {"x"}, 4) == 0.0
    assert recall_at_k(ranked, {"a", "b", "c"}, 2) == pytest.approx(2 / 3)


def test_recall_ignores_repeats_so_k_counts_distinct_keys() -> None:
    # Sessions derived from turns repeat; the 2nd distinct session is "s2" at position 3.
    assert dedupe(["s1", "s1", "s2", "s1", "s3"]) == ["s1", "s2", "s3"]
    assert recall_at_k(["s1", "s1", "s2"], {"s2"}, 2) == 1.0


def test_recall_with_no_gold_is_nan_and_bad_k_is_rejected() -> None:
    assert math.isnan(recall_at_k(["a"], set(), 5))
    with pytest.raises(ValueError):
        recall_at_k(["a"], {"a"}, 0)


def test_recall_any() -> None:
    assert recall_any_at_k(["a", "b", "c"], {"c", "z"}, 3) == 1.0
    assert recall_any_at_k(["a", "b", "c"], {"c", "z"}, 2) == 0.0


def test_ndcg_hand_computed() -> None:
    # Gold {b, d}; hits at ranks 2 and 4: DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068.
    # Ideal: ranks 1 and 2: 1 + 1/log2(3) = 1.63093. NDCG = 1.06161 / 1.63093 = 0.650921.
    assert ndcg_at_k(["a", "b", "c", "d"], {"b", "d"}, 10) == pytest.approx(0.650921, abs=1e-6)
    assert ndcg_at_k(["b", "d", "a"], {"b", "d"}, 10) == pytest.approx(1.0)
    # Beyond k nothing counts: one gold at rank 3 with k=2 -> 0.
    assert ndcg_at_k(["a", "c", "b"], {"b"}, 2) == 0.0
    # One gold at rank 3: 1/log2(4) = 0.5 over ideal 1.
    assert ndcg_at_k(["a", "c", "b"], {"b"}, 10) == pytest.approx(0.5)


def test_aggregate_means_per_group_and_overall_skipping_nan() -> None:
    agg = Aggregate()
    agg.add("x", {"turn_recall@10": 1.0, "turn_recall@5": 0.5})
    agg.add("x", {"turn_recall@10": 0.0, "turn_recall@5": math.nan})
    agg.add("y", {"turn_recall@10": 0.5, "turn_recall@5": 0.5})
    assert agg.mean("turn_recall@10", "x") == 0.5
    assert agg.mean("turn_recall@10") == pytest.approx(0.5)
    assert agg.mean("turn_recall@5", "x") == 0.5  # the nan is skipped
    assert agg.mean("turn_recall@5") == 0.5
    assert agg.count() == 3 and agg.count("x") == 2
    assert agg.groups() == ["x", "y", "all"]
    assert agg.metrics() == ["turn_recall@5", "turn_recall@10"]  # numeric order of k
    out = agg.as_dict()
    assert out["n"] == 3
    assert out["by_group"] == {
        "x": {"n": 2, "turn_recall@5": 0.5, "turn_recall@10": 0.5},
        "y": {"n": 1, "turn_recall@5": 0.5, "turn_recall@10": 0.5},
    }


def test_locomo_evidence_normalisation() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D1:3"}
    assert normalise_evidence(["D8:6; D9:17"], known) == ("D8:6", "D9:17")
    assert normalise_evidence(["D:11:26"], known) == ("D11:26",)
    assert normalise_evidence(["D", "D99:1", "D1:3", "D1:3"], known) == ("D1:3",)


def test_date_parsing() -> None:
    when = parse_locomo_date("1:56 pm on 8 May, 2023")
    assert when is not None and (when.year, when.month, when.day, when.hour) == (2023, 5, 8, 13)
    assert parse_locomo_date("not a date") is None
    lme = parse_lme_date("2023/05/20 (Sat) 07:47")
    assert lme is not None and (lme.month, lme.day, lme.minute) == (5, 20, 47)
