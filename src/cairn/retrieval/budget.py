"""The budget gate: clip an ordered candidate list to a token budget.

Items are taken strictly in the order given until the next one would overflow
the budget; that item and everything after it are excluded with reason
``"token_budget"``. Nothing is re-ranked and no later, smaller item is pulled
forward, so the caller's ranking is exactly what the reader sees, cut short.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

__all__ = [
    "CHARS_PER_TOKEN",
    "ITEM_OVERHEAD_TOKENS",
    "BudgetResult",
    "Excluded",
    "apply_budget",
    "estimate_item_tokens",
    "estimate_tokens",
]

T = TypeVar("T")

CHARS_PER_TOKEN = 4
"""Tokens are estimated as ``len(text) / 4``, rounded up."""

ITEM_OVERHEAD_TOKENS = 40
"""Per-item allowance for the citation and framing sent with each item.

A version-pinned citation as JSON (record id and version id as 26-character
ULIDs, chunk key, excerpt offsets, why_included, per-signal scores) is about
160 characters, i.e. 40 tokens at 4 characters per token.
"""


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` by the chars/4 heuristic, rounded up (0 for empty text).

    Deliberately model-agnostic and cheap; it overestimates English prose
    slightly for GPT/Claude-style tokenizers, which errs on the safe side.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_item_tokens(text: str, *, overhead: int = ITEM_OVERHEAD_TOKENS) -> int:
    """Tokens for one returned item: its text plus the fixed citation ``overhead``."""
    return estimate_tokens(text) + overhead


@dataclass(frozen=True, slots=True)
class Excluded(Generic[T]):
    """An item the budget left out, with its estimated cost."""

    item: T
    tokens: int
    reason: Literal["token_budget"] = "token_budget"


@dataclass(frozen=True, slots=True)
class BudgetResult(Generic[T]):
    """What the gate kept and dropped, with the arithmetic for the trace."""

    included: tuple[T, ...]
    excluded: tuple[Excluded[T], ...]
    used_tokens: int
    max_tokens: int

    @property
    def token_budget_exceeded(self) -> bool:
        """True when at least one item was left out for lack of budget."""
        return bool(self.excluded)

    @property
    def excluded_count(self) -> int:
        return len(self.excluded)

    @property
    def remaining_tokens(self) -> int:
        return self.max_tokens - self.used_tokens


def apply_budget(items: Sequence[T], cost: Callable[[T], int], max_tokens: int) -> BudgetResult[T]:
    """Include ``items`` in order while their summed ``cost`` fits ``max_tokens``.

    Stops at the first item that would overflow (an item that exactly fills the
    budget fits). Raises ``ValueError`` for a negative budget or cost.
    """
    if max_tokens < 0:
        raise ValueError("max_tokens must be >= 0")
    costs = [cost(item) for item in items]
    if any(c < 0 for c in costs):
        raise ValueError("item costs must be >= 0")
    used = 0
    cut = len(items)
    for index, item_cost in enumerate(costs):
        if used + item_cost > max_tokens:
            cut = index
            break
        used += item_cost
    return BudgetResult(
        included=tuple(items[:cut]),
        excluded=tuple(Excluded(item, c) for item, c in zip(items[cut:], costs[cut:], strict=True)),
        used_tokens=used,
        max_tokens=max_tokens,
    )
