"""The filters of a ranked read (``search``, ``retrieve``, ``recall``), declared once for the
kernel, both Python clients and the doors that pass them through. Kept apart from the
pipeline so that the Python client takes them without loading the kernel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final, TypedDict

from cairn.model import VersionPin
from cairn.retrieval.types import Mode

__all__ = [
    "DEFAULT_K",
    "DEFAULT_MODE",
    "KernelReadFilters",
    "ReadFilters",
    "check_filter_names",
]

# What ``mode`` and ``k`` mean when left out (the HTTP and MCP schemas state the same).
DEFAULT_MODE: Final[Mode] = "hybrid"
DEFAULT_K: Final = 10


class ReadFilters(TypedDict, total=False):
    """How a ranked read ranks and what it may read, besides the query: the keyword
    arguments of ``search`` and ``retrieve`` on ``Memory`` and on both clients. Every key may
    be left out; each says what leaving it out means."""

    mode: Mode
    """``"hybrid"`` (keyword and vector, fused; the default), ``"keyword"`` or ``"vector"``."""
    k: int
    """How many hits or items at most, 1 to 1000 (default 10)."""
    weights: Mapping[str, float] | None
    """Fusion weights of the ``"keyword"`` and ``"vector"`` signals; one left out keeps its
    default (``cairn.retrieval.weights``)."""
    scope: str | None
    """A scope or scope glob (``acme/*``); default: every scope the principal may read."""
    selector: VersionPin | None
    """Which version of each record is read (published, a baseline's, …); default: the head."""
    kinds: Sequence[str]
    """Only records of these kinds; default: every kind."""
    include_drafts: bool
    """Whether drafts are read too (default: not)."""
    created_after: datetime | None
    """Only records created after this moment."""
    created_before: datetime | None
    """Only records created before this moment."""
    record_ids: Sequence[str] | None
    """Only these records; default: any."""


class KernelReadFilters(ReadFilters, total=False):
    """``ReadFilters`` and the one knob only ``Memory`` takes (for tuning and benchmarks; the
    doors do not offer it)."""

    candidates: int | None
    """How many candidates each signal recalls before fusion, 1 to 10000 (default: the
    larger of 50 and ``5 * k``)."""


def check_filter_names(filters: Mapping[str, object], declared: frozenset[str]) -> None:
    """Refuse a name not ``declared`` (``ReadFilters.__optional_keys__``, or the kernel's), as
    Python refuses an unknown keyword: a ``**filters`` parameter would otherwise drop a
    misspelt one without a word."""
    unknown = sorted(filters.keys() - declared)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
