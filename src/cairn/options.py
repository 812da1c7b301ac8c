"""The keyword arguments of the verbs that take many, declared once for the kernel's
``Memory``, both Python clients and the doors that pass them through: each a ``TypedDict``
taken as ``**options: Unpack[...]``, every key optional, its default applied by the kernel.
Kept apart from the kernel so that the Python client takes them without loading it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, TypedDict

from cairn.model import EventCursor, VersionPin
from cairn.retrieval.types import Mode

__all__ = [
    "DEFAULT_MODE",
    "EventFilters",
    "KernelReadFilters",
    "PublishChoice",
    "ReadFilters",
    "TaskPage",
    "TimelineFilters",
    "check_names",
]

# What a ranked read's ``mode`` means when left out: the kernel's default, which the Python
# client needs too, to check weights as the kernel does (the HTTP and MCP schemas say the same).
DEFAULT_MODE: Final[Mode] = "hybrid"


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


class PublishChoice(TypedDict, total=False):
    """What ``publish`` takes besides the scope. With neither ``record_ids`` nor ``pins``,
    every active, current record of the scope is published at its head."""

    record_ids: Sequence[str] | None
    """These records, each at its head version."""
    pins: Mapping[str, str | None] | None
    """Records by id, each at the version id given (``None``: its head)."""
    name: str | None
    """The baseline's name."""
    replace: bool
    """Whether records the baseline does not name leave the published set (default: not)."""
    reason: str | None
    """Why, for the audit log."""


class EventFilters(TypedDict, total=False):
    """Which events ``events`` reads, in source-time order, a page at a time."""

    scope: str | None
    """A scope or scope glob; default: every scope the principal may read."""
    session_id: str | None
    """Only this session's events."""
    since: datetime | None
    """Only events at or after this moment (with a time zone)."""
    until: datetime | None
    """Only events before this moment (with a time zone)."""
    after: EventCursor | None
    """The ``(ts, event_id, scope)`` of the last event seen, to read the next page
    (``(ts, event_id)`` within one scope)."""
    limit: int
    """How many events at most, 1 to 10000 (default 100)."""


class TimelineFilters(TypedDict, total=False):
    """What ``timeline_search`` takes besides the query."""

    scope: str | None
    """A scope or scope glob; default: every scope the principal may read."""
    k: int
    """How many hits at most, 1 to 100 (default 10)."""
    since: datetime | None
    """Only what happened at or after this moment (with a time zone)."""
    until: datetime | None
    """Only what happened before this moment (with a time zone)."""


class TaskPage(TypedDict, total=False):
    """Which of a principal's agent-protocol tasks ``tasks`` lists, a page at a time (the
    store's ``list_tasks`` takes the same; the defaults are its)."""

    context_id: str | None
    """Only the tasks of this conversation context."""
    state: int | None
    """Only the tasks in this state (the agent protocol's number for it)."""
    limit: int
    """How many tasks at most, 1 to 1000 (default 50)."""
    offset: int
    """How many to skip (default 0)."""


def keys_of(typed_dict: Any) -> frozenset[str]:
    """Every key a ``TypedDict`` class declares, required or not (for :func:`check_names`)."""
    return frozenset(typed_dict.__required_keys__ | typed_dict.__optional_keys__)


def check_names(options: Mapping[str, object], declared: frozenset[str]) -> None:
    """Refuse a name not ``declared`` (a ``TypedDict``'s ``__optional_keys__``), as Python
    refuses an unknown keyword: a ``**options`` parameter would otherwise drop a misspelt one
    without a word."""
    unknown = sorted(options.keys() - declared)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
