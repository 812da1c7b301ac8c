"""The token budget gate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.retrieval.budget import (
    ITEM_OVERHEAD_TOKENS,
    apply_budget,
    estimate_item_tokens,
    estimate_tokens,
)


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 400, 100)]
)
def test_estimate_tokens_is_chars_over_four_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_item_estimate_adds_citation_overhead() -> None:
    assert estimate_item_tokens("abcdefgh") == 2 + ITEM_OVERHEAD_TOKENS
    assert estimate_item_tokens("abcdefgh", overhead=0) == 2


def test_stops_at_first_overflow_without_skipping_ahead() -> None:
    items = [("a", 30), ("b", 50), ("c", 40), ("d", 5)]  # "d" would fit, but comes after "c"
    result = apply_budget(items, lambda item: item[1], max_tokens=100)
    assert result.included == (("a", 30), ("b", 50))
    assert [e.item[0] for e in result.excluded] == ["c", "d"]
    assert all(e.reason == "token_budget" for e in result.excluded)
    assert [e.tokens for e in result.excluded] == [40, 5]
    assert result.used_tokens == 80
    assert result.token_budget_exceeded is True
    assert result.excluded_count == 2
    assert result.remaining_tokens == 20


def test_everything_fits_and_exact_fill_is_included() -> None:
    result = apply_budget([10, 20, 70], lambda c: c, max_tokens=100)
    assert result.included == (10, 20, 70)
    assert result.used_tokens == 100
    assert result.token_budget_exceeded is False
    assert result.excluded_count == 0


def test_first_item_too_big_excludes_all() -> None:
    result = apply_budget(["long text" * 100, "x"], estimate_tokens, max_tokens=10)
    assert result.included == ()
    assert result.excluded_count == 2
    assert result.used_tokens == 0


def test_empty_input_and_zero_budget() -> None:
    empty = apply_budget([], estimate_tokens, max_tokens=0)
    assert empty.included == () and not empty.token_budget_exceeded
    zero = apply_budget(["", "a"], estimate_tokens, max_tokens=0)
    assert zero.included == ("",) and zero.excluded_count == 1


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        apply_budget([1], lambda c: c, max_tokens=-1)
    with pytest.raises(ValueError):
        apply_budget([-1], lambda c: c, max_tokens=10)


@given(st.lists(st.integers(min_value=0, max_value=50)), st.integers(min_value=0, max_value=300))
def test_included_is_the_longest_fitting_prefix(costs: list[int], budget: int) -> None:
    result = apply_budget(costs, lambda c: c, max_tokens=budget)
    n = len(result.included)
    assert list(result.included) + [e.item for e in result.excluded] == costs
    assert result.used_tokens == sum(costs[:n]) <= budget
    if n < len(costs):
        assert sum(costs[: n + 1]) > budget
