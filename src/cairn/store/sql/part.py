"""What each part of the shared SQL (reads, graph, tasks, events, timeline) is built on.

A part is a mixin of ``SqliteStore`` and ``PostgresStore``: it writes its statements once,
with ``?`` placeholders, and the store it is mixed into runs them (``_read``,
``_write_one``) and says how its database spells them (``dialect``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from cairn.store.sql.dialect import Dialect

__all__ = ["BATCH", "Row", "SqlPart", "Where", "any_of"]

Row = Mapping[str, Any]
BATCH = 500  # ids per membership test


class SqlPart:
    dialect: Dialect

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one shared statement (``?`` placeholders) and return its rows."""
        raise NotImplementedError

    def _read_each(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """The rows of each statement, in order. A store that can runs them side by side
        (SQLite, on its read threads): reads that wait on the disk then overlap."""
        return [self._read(sql, params) for sql, params in statements]

    def _write_one(self, sql: str, params: Sequence[Any]) -> None:
        """Run one writing statement in its own transaction (each store knows how)."""
        raise NotImplementedError

    def _count(self, sql: str, params: Sequence[Any] = ()) -> int:
        """The one number a statement selects, named ``n`` (a count, a sum, a maximum)."""
        return int(self._read(sql, params)[0]["n"])

    def _in_batches(self, column: str, values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
        """``column`` is one of ``values`` (repeats dropped), as one membership test and its
        parameters per ``BATCH`` of them: a statement's parameters are bounded."""
        unique = list(dict.fromkeys(values))
        for start in range(0, len(unique), BATCH):
            yield self.dialect.in_list(column, unique[start : start + BATCH])


class Where:
    """The conditions of a read, each with its parameters, in the order they are added."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.clauses: list[str] = []
        self.params: list[Any] = []

    def add(self, sql: str, values: Sequence[Any] = ()) -> None:
        self.clauses.append(sql)
        self.params.extend(values)

    def equal(self, column: str, value: Any) -> None:
        """``column = value``; no condition at all where ``value`` is None (not asked)."""
        if value is not None:
            self.add(f"{column} = ?", [value])

    def one_of(self, column: str, values: Collection[Any] | None) -> None:
        """``column`` is one of ``values``: no condition where ``values`` is None (not
        asked), and none passes where it is empty."""
        if values is None:
            return
        if not values:
            self.add("1 = 0")
        else:
            self.add(*self.dialect.in_list(column, sorted(values)))

    def all(self) -> str:
        """Every condition, as one (which the caller puts after its own WHERE)."""
        return " AND ".join(self.clauses)

    def sql(self) -> str:
        """`` WHERE`` and every condition, or nothing where there is none."""
        return f" WHERE {self.all()}" if self.clauses else ""


def any_of(tests: Iterable[tuple[str, Sequence[Any]]]) -> tuple[str, list[Any]]:
    """One condition that holds where any of ``tests`` does (none: where nothing does)."""
    found = list(tests)
    either = " OR ".join(sql for sql, _ in found) or "1 = 0"
    return f"({either})", [value for _, values in found for value in values]
