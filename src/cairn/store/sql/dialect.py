"""What differs between the two SQL stores when they say the same thing.

The shared SQL (``store.sql.reads``) is written once with ``?`` placeholders; a dialect
turns it into its own spelling and says how values cross the boundary (times, JSON,
booleans, lists, globs). Everything else is the same statement on both stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import pydantic_core

__all__ = ["Dialect", "last_one"]

A = TypeVar("A")
R = TypeVar("R")


def last_one(fn: Callable[[A], R]) -> Callable[[A], R]:
    """``fn`` remembering its last argument (by identity) and result. A batch of writes
    stamps every row with the same time object; spelling it once saves a tenth of the
    rows' cost. Safe across threads: the pair is swapped as one value, and the argument
    it holds cannot be freed, so its identity cannot be reused by another object."""
    last: tuple[object, R] | None = None

    def remembered(value: A) -> R:
        nonlocal last
        pair = last
        if pair is not None and pair[0] is value:
            return pair[1]
        result = fn(value)
        last = (value, result)
        return result

    return remembered


class Dialect:
    """The base spelling, SQLite's: subclasses override what their database says otherwise.

    Shared statements use ``?`` for parameters, ``IN_LIST(column)`` never appears in them:
    ``in_list`` builds membership tests, since SQLite wants ``IN (?, ?, …)`` and PostgreSQL
    one array parameter."""

    placeholder = "?"
    # An id parameter in a keyset comparison ``(ts, id) > (?, ?)``: it must compare the way
    # the id column does, or the database cannot walk its index in that order.
    id_param = "?"

    def sql(self, statement: str) -> str:
        """A shared statement (``?`` placeholders) in this dialect."""
        return statement

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def flag(self, column: str, value: bool) -> str:
        return f"{column} = {int(value)}"

    def time(self, value: datetime) -> Any:
        """A time as a parameter: UTC either way (text on SQLite, so it sorts as text)."""
        return _utc_text(value)

    def when(self, value: Any) -> datetime:
        """A stored time as an aware ``datetime``."""
        if isinstance(value, datetime):
            return _utc(value)
        return _utc(datetime.fromisoformat(str(value)))

    def maybe_when(self, value: Any) -> datetime | None:
        return None if value is None else self.when(value)

    def json(self, value: Any) -> Any:
        """A stored JSON value as Python (text on SQLite, already decoded on PostgreSQL)."""
        return json.loads(value) if isinstance(value, str | bytes) else value

    def json_array_has(self, column: str, key: str) -> str:
        """The JSON array at top-level ``key`` of ``column`` holds the string parameter."""
        return f"EXISTS (SELECT 1 FROM json_each({column}, '$.{key}') WHERE value = ?)"

    def null_id(self) -> str:
        """A NULL of the id columns' type (a recursive query's first row needs its type)."""
        return "NULL"

    def json_text(self, column: str) -> str:
        """A JSON column selected as text (for pydantic's ``model_validate_json``)."""
        return column

    def json_field(self, column: str, key: str) -> str:
        """One top-level text field of a JSON column."""
        return f"json_extract({column}, '$.{key}')"

    def glob(self, column: str, pattern: str) -> tuple[str, list[Any]]:
        """``column`` matches a scope glob (``*``, ``?``, ``[…]``)."""
        return f"{column} GLOB ?", [pattern]

    def graph_key(self, column: str) -> str:
        """A version's graph key (``metadata.graph_id``) as text: the very expression the
        ``versions_graph_key`` index is built on, so a lookup by key is one index probe."""
        return f"json_extract({column}, '$.metadata.graph_id')"

    def json_equals(self, column: str, path: Sequence[str], value: Any) -> tuple[str, list[Any]]:
        """The JSON value at ``path`` inside ``column`` equals ``value``."""
        where = "$." + ".".join(f'"{part}"' for part in path)
        # SQLite compares the JSON text, which keeps a string's escapes and a number's
        # spelling as written: rows written by ``json`` (older versions) say "Jos\\u00e9" and
        # 1e-07, rows written by pydantic (``rows.JsonText``) "José" and 1e-7. Either matches.
        by_json = json.dumps(value, sort_keys=True)
        by_pydantic = pydantic_core.to_json(json.loads(by_json)).decode()
        if by_pydantic == by_json:
            return f"({column} -> ?) = json(?)", [where, by_json]
        return f"({column} -> ?) IN (json(?), json(?))", [where, by_json, by_pydantic]


def _utc(value: datetime) -> datetime:
    # Times without a zone reach a store only from before zones were required: UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@last_one
def _utc_text(value: datetime) -> str:
    return _utc(value).isoformat()
