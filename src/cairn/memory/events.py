"""``Memory``'s conversation events: appended in batches through the gate, checked whole
before a file's batches, read a page at a time within what the principal may read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Unpack

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.limits import MAX_SCOPE_CHARS, check_input
from cairn.memory.core import MemoryCore
from cairn.model import AppendReport, Event, EventDraft, Principal
from cairn.options import EventFilters, check_names
from cairn.retrieval.preselect import ReadRequest, readable
from cairn.store.base import EventFilter

__all__ = ["EventVerbs"]


class EventVerbs(MemoryCore):
    """Mixed into ``Memory``: ``append_events``, ``check_events`` and ``events``."""

    if TYPE_CHECKING:

        def _events_appended(self) -> None:
            """Wakes the timeline's rollup (``TimelineVerbs``)."""

    def append_events(self, events: Sequence[EventDraft], *, principal: Principal) -> AppendReport:
        """Append a batch of events in one transaction (one audit entry for the batch).
        Sending an event again is a no-op reported in ``duplicates``; the same id with other
        content refuses the whole batch."""
        report = self._gate.append_events(events, principal)
        if report.stored:
            self._events_appended()
        return report

    def check_events(self, events: Sequence[EventDraft], *, principal: Principal) -> None:
        """Refuse what ``append_events`` would refuse of these events (any number of them),
        storing nothing: a file appended in batches is checked whole first."""
        self._gate.check_events(events, principal)

    def events(self, *, principal: Principal, **filters: Unpack[EventFilters]) -> list[Event]:
        """Events the principal may read, in source-time order, a page at a time (``after``:
        the ``(ts, event_id, scope)`` of the last one seen; ``(ts, event_id)`` within one
        scope). ``scope`` is a glob (``EventFilters``)."""
        check_names(filters, EventFilters.__optional_keys__)
        scope, session_id = filters.get("scope"), filters.get("session_id")
        since, until = filters.get("since"), filters.get("until")
        limit = filters.get("limit", 100)
        if not 1 <= limit <= 10_000:
            raise InvalidInput("limit must be between 1 and 10000", field="limit")
        for value, what in ((scope, "scope"), (session_id, "session_id")):
            if value is not None:
                check_input(value, what, MAX_SCOPE_CHARS)
        for moment, what in ((since, "since"), (until, "until")):
            if moment is not None and moment.tzinfo is None:
                raise InvalidInput(f"{what} needs a time zone", field=what)
        allowed = readable(self._store, principal, ReadRequest(scope=scope))
        where = EventFilter(
            acl_ids=allowed.acl_ids,
            scope_ids=allowed.scope_ids,
            session_id=session_id,
            since=since,
            until=until,
        )
        found = self._store.list_events(where, after=filters.get("after"), limit=limit)
        # Trimmed in the store already; the read rule is checked once more here.
        return [e for e in found if access.can_read(principal, e.scope, e.acl)]
