"""Reads of the event log and its outbox, with the same statements on both stores.

Events are appended through ``commit`` (``PutEvents``, one transaction with the outbox rows
and the batch's audit entry); these are the reads, trimmed in SQL by the reader's scopes and
ACLs, and the outbox cursors indexers keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from cairn.model import Event, EventCursor
from cairn.options import check_names, keys_of
from cairn.store.base import EventFilter, EventPage, EventText
from cairn.store.sql import rows
from cairn.store.sql.part import SqlPart, Where

__all__ = ["SqlEvents"]


class SqlEvents(SqlPart):
    def list_events(self, where: EventFilter, **page: Unpack[EventPage]) -> list[Event]:
        clauses, params, order = self._event_where(where, page)
        found = self._read(
            f"SELECT * FROM events WHERE {clauses} ORDER BY {order} LIMIT ?",
            [*params, page.get("limit", 100)],
        )
        return [rows.to_event(row, self.dialect) for row in found]

    def event_texts(
        self, where: EventFilter, *, max_chars: int, **page: Unpack[EventPage]
    ) -> list[EventText]:
        clauses, params, order = self._event_where(where, page)
        found = self._read(
            "SELECT event_id, scope, ts, session_id, substr(text, 1, ?) AS text FROM events "
            f"WHERE {clauses} ORDER BY {order} LIMIT ?",
            [max_chars, *params, page.get("limit", 100)],
        )
        when = self.dialect.when
        return [
            EventText(
                row["event_id"], row["scope"], when(row["ts"]), row["session_id"], row["text"]
            )
            for row in found
        ]

    def _event_where(self, where: EventFilter, page: EventPage) -> tuple[str, list[Any], str]:
        """The WHERE clause, its parameters and the ORDER BY of an event read."""
        check_names(page, keys_of(EventPage))  # a misspelt key would drop a bound silently
        d = self.dialect
        conditions = Where(d)
        add = conditions.add

        # Within one scope the scope is a constant: order and page by (ts, event_id) alone,
        # which the (scope, ts, event_id) index gives in order; across scopes the scope
        # breaks ties between equal ids.
        one_scope = where.scope_ids is not None and len(where.scope_ids) == 1

        def position(cursor: EventCursor, op: str) -> None:
            # a row-value comparison: both databases seek the (scope, ts, event_id) index
            # (ids compare the way their columns do, or the database cannot walk the index)
            key = d.id_param
            if len(cursor) == 2 or one_scope:
                add(f"(ts, event_id) {op} (?, {key})", [d.time(cursor[0]), cursor[1]])
            else:
                add(
                    f"(ts, event_id, scope) {op} (?, {key}, {key})",
                    [d.time(cursor[0]), *cursor[1:]],
                )

        conditions.one_of("acl_id", where.acl_ids)
        conditions.one_of("scope_id", where.scope_ids)
        conditions.equal("session_id", where.session_id)
        conditions.equal("agent", where.agent)
        if where.since is not None:
            add("ts >= ?", [d.time(where.since)])
        if where.until is not None:
            add("ts < ?", [d.time(where.until)])
        tail = "" if one_scope else ", scope"
        if (after := page.get("after")) is not None:
            position(after, ">")
        order = f"ts, event_id{tail}"
        if (before := page.get("before")) is not None:
            position(before, "<")
            order = f"ts DESC, event_id DESC{tail.replace('scope', 'scope DESC')}"
        return conditions.all(), conditions.params, order

    def get_events(self, scope_id: int, event_ids: Sequence[str]) -> dict[str, Event]:
        found: dict[str, Event] = {}
        for test, params in self._in_batches("event_id", event_ids):
            for row in self._read(
                f"SELECT * FROM events WHERE scope_id = ? AND {test}", [scope_id, *params]
            ):
                found[row["event_id"]] = rows.to_event(row, self.dialect)
        return found

    def outbox(self, consumer: str, limit: int = 1000) -> list[tuple[int, Event]]:
        found = self._read(
            "SELECT o.position AS position, e.* FROM event_outbox o "
            "JOIN events e ON e.seq = o.event_seq WHERE o.position > coalesce("
            "(SELECT position FROM outbox_cursors WHERE consumer = ?), 0) "
            "ORDER BY o.position LIMIT ?",
            (consumer, limit),
        )
        return [(int(row["position"]), rows.to_event(row, self.dialect)) for row in found]

    def outbox_lag(self, consumer: str) -> int:
        return self._count(
            "SELECT count(*) AS n FROM event_outbox WHERE position > coalesce("
            "(SELECT position FROM outbox_cursors WHERE consumer = ?), 0)",
            (consumer,),
        )

    def ack_outbox(self, consumer: str, position: int) -> None:
        # A cursor only moves forward: a late or repeated acknowledgement changes nothing.
        self._write_one(
            "INSERT INTO outbox_cursors (consumer, position) VALUES (?, ?) "
            "ON CONFLICT (consumer) DO UPDATE SET position = excluded.position "
            "WHERE outbox_cursors.position < excluded.position",
            (consumer, position),
        )
