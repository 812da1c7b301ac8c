"""``Memory``'s graph reads: one edge, a record's edges, and walks of a few hops, each hop
checked against what the principal may read, inside the store."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.governance import links as edge_rules
from cairn.limits import MAX_LIST_ITEMS
from cairn.memory.core import MemoryCore
from cairn.model import SYSTEM_RELATIONS, Direction, Edge, EdgeStatus, Neighbourhood, Principal
from cairn.store.base import ChunkFilter, EdgeFilter

__all__ = ["MAX_HOPS", "EdgeVerbs"]

# A walk's reach: each hop multiplies what a walk touches, and the questions a decision graph
# answers ("why", "what depends on this") are a few steps deep.
MAX_HOPS = 4


class EdgeVerbs(MemoryCore):
    """Mixed into ``Memory``: ``edge``, ``edges`` and ``neighbours``."""

    def _edge_filters(
        self,
        principal: Principal,
        types: Sequence[str] | None,
        statuses: frozenset[str] = frozenset({EdgeStatus.ACTIVE.value}),
        valid_at: datetime | None = None,
    ) -> tuple[EdgeFilter, ChunkFilter]:
        """What a principal may walk: edges under its ACLs and scopes, and records it may
        read (in any state) at either end."""
        if types is not None:
            if len(types) > MAX_LIST_ITEMS:
                raise InvalidInput(f"at most {MAX_LIST_ITEMS} relation types", field="types")
            for name in types:
                if name not in SYSTEM_RELATIONS:
                    self._policy.relation(name)
        vertices = self._everything_readable(principal)
        edges = EdgeFilter(
            acl_ids=vertices.acl_ids,
            scope_ids=vertices.scope_ids,
            types=frozenset(types) if types is not None else None,
            statuses=statuses,
            valid_at=valid_at,
        )
        return edges, vertices

    def edge(self, edge_id: str, *, principal: Principal) -> Edge:
        """One edge the principal may read, both its ends included."""
        return edge_rules.visible_edge(self._store, edge_id, principal)

    def edges(
        self,
        record_id: str,
        *,
        principal: Principal,
        types: Sequence[str] | None = None,
        include_removed: bool = False,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Edge]:
        """A page of the edges touching a record (by id, after ``after``): only edges the
        principal may read whose other end it may read too, trimmed in the store."""
        self._visible(record_id, principal)
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000", field="limit")
        statuses = {EdgeStatus.ACTIVE.value}
        if include_removed:
            statuses.add(EdgeStatus.REMOVED.value)
        where, vertices = self._edge_filters(principal, types, frozenset(statuses))
        found = self._store.list_edges(
            where, node_id=record_id, ends=vertices, after=after, limit=limit
        )
        return [e for e in found if access.can_read(principal, e.scope, e.acl)]

    def neighbours(
        self,
        anchors: Sequence[str],
        *,
        principal: Principal,
        types: Sequence[str] | None = None,
        direction: Direction = Direction.OUT,
        hops: int = 1,
        limit: int = 100,
        valid_at: datetime | None = None,
    ) -> Neighbourhood:
        """The records within ``hops`` edges of ``anchors``, walking only edges and records
        the principal may read: permission is checked on every hop, inside the store, so
        nothing is reached through something hidden. ``withheld`` counts what the walk met
        and could not take, by reason, without naming it."""
        if not 1 <= len(anchors) <= MAX_LIST_ITEMS:
            raise InvalidInput(f"give 1 to {MAX_LIST_ITEMS} anchors", field="anchors")
        if not 1 <= hops <= MAX_HOPS:
            raise InvalidInput(f"hops must be between 1 and {MAX_HOPS}", field="hops")
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000", field="limit")
        for anchor in anchors:
            self._visible(anchor, principal)
        where, vertices = self._edge_filters(principal, types, valid_at=valid_at)
        either_way = frozenset(r.name for r in self._policy.relations if not r.directed)
        found = self._store.neighbours(
            anchors,
            edges=where,
            vertices=vertices,
            direction=direction,
            hops=hops,
            limit=limit,
            either_way=either_way,
        )
        # Trimmed in the store already; the read rule is checked once more here.
        shown = tuple(e for e in found.edges if access.can_read(principal, e.scope, e.acl))
        return found.model_copy(update={"edges": shown})
