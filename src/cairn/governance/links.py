"""Edges through the gate: what a link or unlink proposal must satisfy, and the edge it
writes. The gate calls these; they read the store but never write it.

An edge lives in the scope of its source record and, unless a curator chose otherwise, is
read under the source record's ACL. Both ends must be records the proposer may read (a
record it may not read answers "not found", as everywhere), the relation must be one the
policy's catalog declares for those kinds, and the kernel's own relations (supersession and
the other bookkeeping links) are never proposed.
"""

from __future__ import annotations

from datetime import datetime

from cairn.errors import Conflict, InvalidInput, NotFound
from cairn.governance import access
from cairn.governance.policy import Policy, Relation
from cairn.governance.visible import readable_record, visible_record
from cairn.limits import is_id
from cairn.model import (
    SYSTEM_RELATIONS,
    Acl,
    Edge,
    EdgeDraft,
    EdgeStatus,
    Origin,
    Principal,
    Record,
    Sensitivity,
    Status,
    new_id,
)
from cairn.store.base import Store

__all__ = [
    "CURATORS_ONLY",
    "check_ends",
    "check_link",
    "default_acl",
    "linked_edge",
    "removed_edge",
    "system_edge",
    "visible_edge",
]

# The ACL of a bookkeeping edge that concerns no record (a publish): curators read it.
CURATORS_ONLY = Acl(roles=("curator",), labels=(), sensitivity=Sensitivity.HIGH)


def default_acl(source: Record) -> Acl:
    """Who reads an edge nobody chose an ACL for: whoever reads its source record."""
    return source.content.acl


def check_ends(policy: Policy, draft: EdgeDraft, src: Record, dst: Record) -> Relation:
    """The catalog's relation for ``draft``, once it may join ``src`` to ``dst``: a
    declared, non-system type, two different records, neither archived nor rejected, of
    the kinds the relation joins."""
    if draft.type in SYSTEM_RELATIONS:
        raise InvalidInput(f"{draft.type} is the kernel's own relation", field="type")
    relation = policy.relation(draft.type)
    if src.id == dst.id:
        raise InvalidInput("an edge joins two different records", field="dst")
    for end, record in (("src", src), ("dst", dst)):
        if record.status in (Status.ARCHIVED, Status.REJECTED):
            raise InvalidInput(f"{record.id} is {record.status.value}", field=end)
    if relation.from_kinds and src.kind not in relation.from_kinds:
        raise InvalidInput(
            f"{relation.name} links from {', '.join(relation.from_kinds)}, not {src.kind}",
            field="src",
        )
    if relation.to_kinds and dst.kind not in relation.to_kinds:
        raise InvalidInput(
            f"{relation.name} links to {', '.join(relation.to_kinds)}, not {dst.kind}",
            field="dst",
        )
    return relation


def check_link(
    store: Store, policy: Policy, draft: EdgeDraft, principal: Principal
) -> tuple[Record, Record]:
    """The source and target of a proposed edge, once every rule holds."""
    if draft.type in SYSTEM_RELATIONS:
        raise InvalidInput(f"{draft.type} is the kernel's own relation", field="type")
    policy.relation(draft.type)
    if draft.src == draft.dst:
        raise InvalidInput("an edge joins two different records", field="dst")
    src = visible_record(store, draft.src, principal, "src")
    dst = visible_record(store, draft.dst, principal, "dst")
    relation = check_ends(policy, draft, src, dst)
    for edge in store.list_edges(None, node_id=src.id, limit=10_000):
        same = (edge.src, edge.dst) == (src.id, dst.id) or (
            not relation.directed and (edge.src, edge.dst) == (dst.id, src.id)
        )
        # Only an edge the proposer may see is named: a hidden one is no reason to refuse.
        if (
            same
            and edge.type == draft.type
            and edge.status is EdgeStatus.ACTIVE
            and access.can_read(principal, edge.scope, edge.acl)
        ):
            raise Conflict(f"{src.id} is already linked to {dst.id} by {edge.id}", field="dst")
    return src, dst


def linked_edge(
    draft: EdgeDraft, source: Record, *, actor: str, proposal_id: str, now: datetime
) -> Edge:
    return Edge(
        id=new_id("edg"),
        type=draft.type,
        src=draft.src,
        dst=draft.dst,
        scope=source.scope,
        acl=draft.acl if draft.acl is not None else default_acl(source),
        metadata=draft.metadata,
        valid_from=draft.valid_from,
        valid_to=draft.valid_to,
        origin=draft.origin,
        created_at=now,
        created_by=actor,
        proposal_id=proposal_id,
    )


def visible_edge(store: Store, edge_id: str, principal: Principal) -> Edge:
    """An edge the principal may read, with both its ends, or "not found" (never
    "forbidden"): an edge would otherwise name a record the principal may not see."""
    edge = store.get_edge(edge_id) if is_id(edge_id) else None
    if edge is None or not access.can_read(principal, edge.scope, edge.acl):
        raise NotFound(f"no edge {edge_id}", field="edge_id")
    if any(readable_record(store, end, principal) is None for end in (edge.src, edge.dst)):
        raise NotFound(f"no edge {edge_id}", field="edge_id")
    return edge


def removed_edge(edge: Edge, *, actor: str, now: datetime) -> Edge:
    if edge.status is EdgeStatus.REMOVED:
        raise Conflict(f"edge {edge.id} is already removed", field="edge_id")
    if edge.type in SYSTEM_RELATIONS:
        raise InvalidInput(f"{edge.type} edges are the kernel's own", field="edge_id")
    return edge.model_copy(
        update={"status": EdgeStatus.REMOVED, "removed_at": now, "removed_by": actor}
    )


def system_edge(
    relation: str,
    src: str,
    dst: str,
    *,
    scope: str,
    acl: Acl,
    now: datetime,
    proposal_id: str | None,
) -> Edge:
    """One of the kernel's bookkeeping links, in the same model as proposed edges."""
    assert relation in SYSTEM_RELATIONS
    return Edge(
        id=new_id("edg"),
        type=relation,
        src=src,
        dst=dst,
        scope=scope,
        acl=acl,
        origin=Origin.SYSTEM,
        created_at=now,
        created_by="system",
        proposal_id=proposal_id,
    )
