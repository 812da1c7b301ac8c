"""The gate's event path: conversation events vetted against the policy's event rules and
appended in batches, and the timeline's nodes written by the system's rollup only."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.errors import Conflict, InvalidInput, PermissionDenied
from cairn.governance import access
from cairn.governance.gate_core import GateCore
from cairn.limits import MAX_EVENT_BATCH, MAX_LIST_ITEMS
from cairn.model import AppendReport, Event, EventDraft, Principal, PrincipalKind
from cairn.store.base import PutEvents, PutTocNode

__all__ = ["EventGate"]


class EventGate(GateCore):
    """Mixed into ``Gate``: ``append_events``, ``check_events`` and ``write_timeline``."""

    def append_events(self, drafts: Sequence[EventDraft], principal: Principal) -> AppendReport:
        """Append a batch of events in one transaction with one audit entry. Each event is
        stamped here (who appended it, when, and the policy's ACL). An event is identified
        by its scope and id: one already stored there with the same content is reported as
        a duplicate, with other content the whole batch is refused; the same id in another
        scope is another event."""
        rules = self.policy.events
        if not 1 <= len(drafts) <= MAX_EVENT_BATCH:
            raise InvalidInput(f"send 1 to {MAX_EVENT_BATCH} events at a time", field="events")
        sent, stored = self._vet_events(drafts, principal)
        now = self.clock()
        fresh: list[Event] = []
        for key, draft in sent.items():
            if key in stored:
                continue
            fresh.append(
                Event(
                    **draft.model_dump(), acl=rules.acl, appended_at=now, appended_by=principal.id
                )
            )
        report = AppendReport(
            stored=tuple(e.event_id for e in fresh),
            duplicates=tuple(key[1] for key in sent if key in stored),
        )
        if not fresh:
            return report
        audit = self._audit(
            principal,
            "append",
            subject=None,
            details={
                "op": "append",
                "events": len(fresh),
                "first": fresh[0].event_id,
                "last": fresh[-1].event_id,
                "scopes": sorted({e.scope for e in fresh})[:MAX_LIST_ITEMS],
            },
        )
        self._commit(audit, [PutEvents(tuple(fresh))])
        return report

    def check_events(self, drafts: Sequence[EventDraft], principal: Principal) -> None:
        """Everything ``append_events`` checks, for any number of events, storing nothing:
        a file appended in batches is checked whole first, so that a bad line stores no
        batch."""
        self._vet_events(drafts, principal)

    def _vet_events(
        self, drafts: Sequence[EventDraft], principal: Principal
    ) -> tuple[dict[tuple[str, str], EventDraft], set[tuple[str, str]]]:
        """The events by (scope, id), refusing an appender without an append role, a scope
        it may not write, and an id sent twice to a scope or stored there before with other
        content; and which of them are stored already, as sent. Only the caller's own
        scopes are looked at: an id taken in a scope it may not write is no concern of its.
        An id taken by someone else's event that the caller may not read is refused the same
        way whatever the content, so an append is never an oracle for what that event says
        (that the id is taken cannot be hidden without losing the caller's event)."""
        rules = self.policy.events
        if not set(principal.roles) & set(rules.append_roles):
            raise PermissionDenied(
                f"{principal.id} may not append events (roles allowed: "
                f"{', '.join(rules.append_roles)})"
            )
        sent: dict[tuple[str, str], EventDraft] = {}
        for draft in drafts:
            access.require_scope(principal, draft.scope)
            key = (draft.scope, draft.event_id)
            earlier = sent.get(key)
            if earlier is not None and earlier.digest() != draft.digest():
                raise Conflict(
                    f"event {draft.event_id} is in the batch twice with different content",
                    field="event_id",
                )
            sent[key] = draft
        by_scope: dict[str, list[str]] = {}
        for scope, event_id in sent:
            by_scope.setdefault(scope, []).append(event_id)
        interned = {name: scope_id for scope_id, name in self.store.scopes().items()}
        stored: set[tuple[str, str]] = set()
        for scope, ids in by_scope.items():
            if scope not in interned:
                continue  # nothing was ever stored in it
            for start in range(0, len(ids), MAX_EVENT_BATCH):
                part = ids[start : start + MAX_EVENT_BATCH]
                for event_id, known in self.store.get_events(interned[scope], part).items():
                    if known.appended_by != principal.id and not access.can_read(
                        principal, scope, known.acl
                    ):
                        # someone else's event the caller may not read: the same answer
                        # whatever content was sent, so that appending never tells whether
                        # a guess matches what it holds
                        raise Conflict(
                            f"event id {event_id} is taken in {scope}: send the event under "
                            "another id",
                            field="event_id",
                        )
                    if known.digest() != sent[(scope, event_id)].digest():
                        raise Conflict(
                            f"event {event_id} was appended before with other content; events "
                            "are never rewritten: send a correction as a new event",
                            field="event_id",
                        )
                    stored.add((scope, event_id))
        return sent, stored

    def write_timeline(self, writes: Sequence[PutTocNode], principal: Principal) -> None:
        """Store new versions of timeline nodes in one transaction with one audit entry.
        Nodes are derived from events by the kernel's rollup, never sent by a caller: only
        the system principal writes them."""
        if principal.kind is not PrincipalKind.SYSTEM:
            raise PermissionDenied("timeline nodes are built by cairn's rollup only")
        if not writes:
            return
        levels: dict[str, int] = {}
        for write in writes:
            levels[write.node.level.value] = levels.get(write.node.level.value, 0) + 1
        audit = self._audit(
            principal,
            "rollup",
            subject=None,
            details={"op": "rollup", "nodes": len(writes), "levels": levels},
        )
        self._commit(audit, writes)
