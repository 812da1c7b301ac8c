"""Which chunks a read may see, as one rule compiled three ways.

``conditions`` turns a ``ChunkFilter`` (built before ranking by ``retrieval.preselect``) into
a list of conditions on a chunk's filter columns. That one list is then compiled to SQL for
both SQL stores (``to_sql``, with a dialect's small differences), to a numpy mask by the
in-memory vector catalog (``search.catalog``), and to a predicate over one chunk held in
memory (``admitter``; ``admitted`` applies it to the rows a search returns, as the store
holds them). A rule added here holds in every index at once.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, ClassVar, Protocol

from cairn.store.base import ChunkFilter, ChunkMeta, EdgeFilter

__all__ = [
    "AtLeast",
    "Before",
    "Condition",
    "Flag",
    "HeadReadable",
    "In",
    "NotAfter",
    "SqlDialect",
    "StillValid",
    "admitted",
    "admitter",
    "conditions",
    "edge_conditions",
    "edge_sql",
    "to_sql",
]


@dataclass(frozen=True)
class In:
    """The column's value is one of ``values`` (none: nothing passes)."""

    column: str
    values: frozenset[Any]


@dataclass(frozen=True)
class Flag:
    """A boolean column has this value."""

    column: str
    value: bool


@dataclass(frozen=True)
class _TimeBound:
    """A time column compared with the instant ``at``: ``sql_op`` and ``compare`` say how,
    in SQL and in Python, and ``unset_passes`` whether a row without a time passes."""

    column: str
    at: datetime

    sql_op: ClassVar[str]
    compare: ClassVar[Callable[[Any, Any], bool]]
    unset_passes: ClassVar[bool] = False

    def holds(self, value: Any) -> bool:
        return (self.unset_passes and value is None) or type(self).compare(value, self.at)


class NotAfter(_TimeBound):
    """The column is unset or at most ``at`` (a validity start)."""

    sql_op, compare, unset_passes = "<=", operator.le, True


class StillValid(_TimeBound):
    """The column is unset or later than ``at`` (a validity end)."""

    sql_op, compare, unset_passes = ">", operator.gt, True


class AtLeast(_TimeBound):
    sql_op, compare = ">=", operator.ge


class Before(_TimeBound):
    sql_op, compare = "<", operator.lt


@dataclass(frozen=True)
class HeadReadable:
    """The chunk is of its record's head version, or the head of its record passes these
    ACLs: a record's current ACL still governs who reads any of its older versions."""

    acl_ids: frozenset[int]


Condition = In | Flag | NotAfter | StillValid | AtLeast | Before | HeadReadable


def conditions(where: ChunkFilter) -> list[Condition]:
    """The rule, once: every condition a chunk must meet to be read under ``where``."""
    found: list[Condition] = [*_readable(where)]
    if where.kinds is not None:
        found.append(In("kind", where.kinds))
    if where.version_ids is not None:
        found.append(In("version_id", where.version_ids))
        found.append(HeadReadable(where.acl_ids))
    elif where.head_only:
        found.append(Flag("is_head", True))
    if where.record_ids is not None:
        found.append(In("record_id", where.record_ids))
    if not where.include_superseded:
        found.append(Flag("superseded", False))
    found += _valid_at(where.valid_at)
    found += _within("created_at", where.created_after, where.created_before)
    if where.source_kinds is not None:
        found.append(In("source_kind", where.source_kinds))
    found += _within("source_time", where.source_after, where.source_before)
    return found


def edge_conditions(where: EdgeFilter) -> list[Condition]:
    """Every condition an edge must meet to be walked under ``where``: the same scope and
    ACL rule as chunks (edges intern their scope and ACL in the same tables), and the
    states, relation types and validity asked for."""
    found: list[Condition] = [*_readable(where)]
    if where.types is not None:
        found.append(In("type", where.types))
    return found + _valid_at(where.valid_at)


def _readable(where: ChunkFilter | EdgeFilter) -> list[In]:
    """The reader's ACLs and scopes, and the states asked for."""
    found = [In("acl_id", where.acl_ids), In("status", where.statuses)]
    if where.scope_ids is not None:
        found.append(In("scope_id", where.scope_ids))
    return found


def _valid_at(at: datetime | None) -> list[Condition]:
    """Valid at ``at``: begun by then and not ended (nothing asked where ``at`` is None)."""
    return [] if at is None else [NotAfter("valid_from", at), StillValid("valid_to", at)]


def _within(column: str, after: datetime | None, before: datetime | None) -> list[Condition]:
    """``column`` at or after ``after`` and before ``before``, each where given."""
    found: list[Condition] = []
    if after is not None:
        found.append(AtLeast(column, after))
    if before is not None:
        found.append(Before(column, before))
    return found


# ---- to SQL -----------------------------------------------------------------------------


class SqlDialect(Protocol):
    """What differs between the SQL stores when a filter becomes SQL."""

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (never empty), as SQL and its parameters."""
        ...

    def flag(self, column: str, value: bool) -> str: ...

    def time(self, value: datetime) -> Any:
        """A time as the stores' time columns compare (UTC either way)."""
        ...

    @property
    def placeholder(self) -> str: ...


def to_sql(where: ChunkFilter, dialect: SqlDialect, alias: str = "c") -> tuple[str, list[Any]]:
    """``where`` as a SQL condition over ``chunks {alias}`` and its parameters."""
    return _compile(conditions(where), dialect, alias)


def edge_sql(where: EdgeFilter, dialect: SqlDialect, alias: str = "e") -> tuple[str, list[Any]]:
    """``where`` as a SQL condition over ``edges {alias}`` and its parameters."""
    return _compile(edge_conditions(where), dialect, alias)


def _compile(found: list[Condition], dialect: SqlDialect, alias: str) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    mark = dialect.placeholder
    for cond in found:
        if isinstance(cond, In):
            if not cond.values:
                clauses.append("1 = 0")
                continue
            sql, values = dialect.in_list(f"{alias}.{cond.column}", sorted(cond.values))
            clauses.append(sql)
            params.extend(values)
        elif isinstance(cond, Flag):
            clauses.append(dialect.flag(f"{alias}.{cond.column}", cond.value))
        elif isinstance(cond, _TimeBound):
            column = f"{alias}.{cond.column}"
            test = f"{column} {cond.sql_op} {mark}"
            clauses.append(f"({column} IS NULL OR {test})" if cond.unset_passes else test)
            params.append(dialect.time(cond.at))
        else:
            if not cond.acl_ids:
                clauses.append(dialect.flag(f"{alias}.is_head", True))
                continue
            acl_sql, acl_params = dialect.in_list("h.acl_id", sorted(cond.acl_ids))
            clauses.append(
                f"({dialect.flag(f'{alias}.is_head', True)} OR EXISTS (SELECT 1 FROM chunks h "
                f"WHERE h.record_id = {alias}.record_id AND {dialect.flag('h.is_head', True)} "
                f"AND {acl_sql}))"
            )
            params.extend(acl_params)
    return " AND ".join(clauses) or "1 = 1", params


# ---- for one chunk ------------------------------------------------------------------------


def _test(cond: Condition) -> Callable[[ChunkMeta], bool]:
    """``cond`` as a test of one chunk held in memory (``HeadReadable``: only as the head of
    its record, since whether the head of another may be read is not a fact of this chunk)."""
    if isinstance(cond, HeadReadable):
        return attrgetter("is_head")
    value_of = attrgetter(cond.column)
    if isinstance(cond, In):
        values = cond.values
        return lambda meta: value_of(meta) in values
    if isinstance(cond, Flag):
        wanted = cond.value
        return lambda meta: bool(value_of(meta)) is wanted
    return lambda meta: cond.holds(value_of(meta))


def admitter(where: ChunkFilter) -> Callable[[ChunkMeta], bool]:
    """Whether ``where`` admits one chunk held in memory, as a test compiled once for many
    chunks. An older version's chunk is not admitted: whether its record's head may be read
    is not a fact of the chunk alone, so this may say no where the indexes say yes, never
    the reverse."""
    tests = [_test(cond) for cond in conditions(where)]
    return lambda meta: all(test(meta) for test in tests)


def admitted(
    where: ChunkFilter,
    metas: Mapping[int, ChunkMeta],
    heads_readable: Callable[[Collection[str], Collection[int]], set[str]],
) -> set[int]:
    """The chunks among ``metas`` (chunk id -> its filter columns as the store holds them
    now) that ``where`` admits, the whole rule: ``heads_readable`` (the store's) answers,
    for older versions, whether their record's head may be read.

    Recall trims inside the index; a search checks what it returns once more here, so that
    an index out of step with the store (a saved one, stale or altered) can cost a result,
    never show one the reader may not see."""
    rule = conditions(where)
    head_rule = next((c for c in rule if isinstance(c, HeadReadable)), None)
    tests = [_test(c) for c in rule if not isinstance(c, HeadReadable)]
    passed = {i for i, meta in metas.items() if all(test(meta) for test in tests)}
    if head_rule is None:
        return passed
    older = {metas[i].record_id for i in passed if not metas[i].is_head}
    readable = heads_readable(older, head_rule.acl_ids) if older else set()
    return {i for i in passed if metas[i].is_head or metas[i].record_id in readable}
