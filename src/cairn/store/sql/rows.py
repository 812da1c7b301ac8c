"""Domain values to table rows and back, for both SQL stores.

Writes go out as plain dicts of column values (the SQLite store inserts them, the PostgreSQL
store hands them to ``cairn_commit`` as JSON); reads come back through a ``Dialect``, which
knows how each database returns times and JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cairn.limits import STORED
from cairn.model import (
    Acl,
    AuditEntry,
    Baseline,
    Content,
    Edge,
    Event,
    EventRole,
    Grip,
    PathLink,
    Proposal,
    Record,
    Status,
    TocNode,
    Version,
)
from cairn.store.base import ChunkMeta, PublishedRow
from cairn.store.sql.dialect import Dialect, last_one

__all__ = [
    "AUDIT_COLUMNS",
    "EDGE_COLUMNS",
    "EDGE_STATE",
    "META_COLUMNS",
    "PROPOSAL_COLUMNS",
    "audit_row",
    "baseline_row",
    "dumps",
    "edge_row",
    "event_row",
    "path_link_row",
    "proposal_row",
    "record_row",
    "to_audit",
    "to_baseline",
    "to_edge",
    "to_event",
    "to_meta",
    "to_path_link",
    "to_proposal",
    "to_published",
    "to_record",
    "to_version",
    "version_row",
]

Row = Mapping[str, Any]

PROPOSAL_COLUMNS = (
    "id", "op", "scope", "record_id", "base_version_id", "base_baseline_id", "principal_id",
    "principal_roles", "status", "change", "created_at", "reason", "rule", "decided_by",
    "decided_at", "rebased_from", "rebased_to", "result_record_id", "result_version_id",
)  # fmt: skip
AUDIT_COLUMNS = (
    "id", "at", "actor", "actor_roles", "action", "subject_id", "proposal_id", "rule",
    "reason", "from_status", "to_status", "details",
)  # fmt: skip
EDGE_COLUMNS = (
    "id", "type", "src", "dst", "scope", "acl", "metadata", "valid_from", "valid_to",
    "origin", "status", "created_at", "created_by", "proposal_id", "removed_at", "removed_by",
)  # fmt: skip
# What may change on a stored edge: only its removal. Everything else is fixed at link time.
EDGE_STATE = ("status", "removed_at", "removed_by")
META_COLUMNS = (
    "c.id, c.record_id, c.version_id, c.text_hash, c.kind, c.scope_id, c.acl_id, c.status, "
    "c.is_head, c.superseded, c.valid_from, c.valid_to, c.created_at, c.seq, c.source_kind, "
    "c.source_time"
)


# One encoder for every row: ``json.dumps`` with options builds a new one per call, which
# cost a fifth of the encoding on the batch write path.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str)


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON: one spelling for the same value on both stores."""
    return _ENCODER.encode(value)


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as plain JSON types (what a store reads back)."""
    return json.loads(dumps(value)) if value else {}  # most are empty: skip the round trip


@last_one
def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


# ---- domain -> rows -----------------------------------------------------------------------


def record_row(r: Record, content_hash: str | None = None) -> dict[str, Any]:
    """``content_hash``: the hash of ``r.content`` when the caller has it already."""
    return {
        "id": r.id, "kind": r.kind, "scope": r.scope, "status": r.status.value,
        "current_version_id": r.current_version_id, "current_version": r.current_version,
        "content_hash": content_hash or r.content.content_hash(),
        "sensitivity": r.content.acl.sensitivity.rank,
        "superseded_by": r.superseded_by, "created_at": _iso(r.created_at),
        "updated_at": _iso(r.updated_at), "status_changed_at": _iso(r.status_changed_at),
        "created_by": r.created_by,
    }  # fmt: skip


def version_row(v: Version) -> dict[str, Any]:
    """``content`` stays a dict; each store stores it as its JSON."""
    return {
        "id": v.id, "record_id": v.record_id, "number": v.number,
        "content": v.content.model_dump(mode="json"), "content_hash": v.content_hash,
        "created_at": _iso(v.created_at), "created_by": v.created_by,
        "proposal_id": v.proposal_id,
    }  # fmt: skip


def proposal_row(p: Proposal) -> dict[str, Any]:
    return {
        "id": p.id, "op": p.change.op, "scope": p.scope, "record_id": p.record_id,
        "base_version_id": p.base_version_id, "base_baseline_id": p.base_baseline_id,
        "principal_id": p.principal_id, "principal_roles": list(p.principal_roles),
        "status": p.status.value, "change": p.change.model_dump(mode="json"),
        "created_at": _iso(p.created_at), "reason": p.reason, "rule": p.rule,
        "decided_by": p.decided_by, "decided_at": _iso(p.decided_at),
        "rebased_from": p.rebased_from, "rebased_to": p.rebased_to,
        "result_record_id": p.result_record_id, "result_version_id": p.result_version_id,
    }  # fmt: skip


def audit_row(a: AuditEntry) -> dict[str, Any]:
    return {
        "id": a.id, "at": _iso(a.at), "actor": a.actor, "actor_roles": list(a.actor_roles),
        "action": a.action, "subject_id": a.subject_id, "proposal_id": a.proposal_id,
        "rule": a.rule, "reason": a.reason, "from_status": a.from_status,
        "to_status": a.to_status, "details": _plain(a.details),
    }  # fmt: skip


def path_link_row(link: PathLink) -> dict[str, Any]:
    """Its fields as the columns: ``drifted`` stays a bool, which PostgreSQL stores as a
    boolean and SQLite as the 0 or 1 it is."""
    return link.model_dump()


def edge_row(e: Edge) -> dict[str, Any]:
    """``acl`` and ``metadata`` stay dicts; each store stores them as its JSON (and interns
    the scope and ACL next to the row, so walks filter edges as the index filters chunks)."""
    return {
        "id": e.id, "type": e.type, "src": e.src, "dst": e.dst, "scope": e.scope,
        "acl": e.acl.model_dump(mode="json"), "metadata": _plain(e.metadata),
        "valid_from": _iso(e.valid_from), "valid_to": _iso(e.valid_to),
        "origin": e.origin.value, "status": e.status.value, "created_at": _iso(e.created_at),
        "created_by": e.created_by, "proposal_id": e.proposal_id,
        "removed_at": _iso(e.removed_at), "removed_by": e.removed_by,
    }  # fmt: skip


def event_row(e: Event) -> dict[str, Any]:
    """``acl`` and ``metadata`` stay dicts (each store's JSON); the digest of what the
    producer sent travels with the row, so a resent id is compared inside the transaction."""
    return {
        "event_id": e.event_id, "ts": _iso(e.ts), "session_id": e.session_id,
        "scope": e.scope, "agent": e.agent, "role": e.role.value, "kind": e.kind,
        "text": e.text, "metadata": _plain(e.metadata),
        "acl": e.acl.model_dump(mode="json"), "digest": e.digest(),
        "appended_at": _iso(e.appended_at), "appended_by": e.appended_by,
    }  # fmt: skip


# What a timeline node's ``body`` column holds: its summary, as the node spells it.
TOC_BODY_FIELDS = (
    "title", "bullets", "keywords", "children", "grips", "sessions", "summarizer",
)  # fmt: skip


def toc_node_row(n: TocNode) -> dict[str, Any]:
    """``acl`` and ``body`` stay dicts (each store's JSON); scope and ACL ids are interned by
    the store."""
    body = n.model_dump(mode="json", include=set(TOC_BODY_FIELDS))
    return {
        "node_id": n.node_id, "version": n.version, "level": n.level.value,
        "node_key": n.key, "partition_key": toc_partition(n), "scope": n.scope,
        "acl": n.acl.model_dump(mode="json"), "agent": n.agent, "parent_id": n.parent_id,
        "starts_at": _iso(n.starts_at), "ends_at": _iso(n.ends_at),
        "first_ts": _iso(n.first_ts), "last_ts": _iso(n.last_ts),
        "event_count": n.event_count, "body": body, "digest": n.digest(),
        "retired": n.retired, "built_at": _iso(n.built_at),
    }  # fmt: skip


def toc_partition(n: TocNode) -> str:
    """The hierarchy a node belongs to: its id's prefix (``timeline.ids``)."""
    return n.node_id.rsplit(".", 2)[0]


def grip_row(g: Grip) -> dict[str, Any]:
    return {
        "grip_id": g.grip_id, "excerpt": g.excerpt, "event_id_start": g.event_id_start,
        "event_id_end": g.event_id_end, "event_id": g.event_id, "ts": _iso(g.ts),
        "source": g.source,
    }  # fmt: skip


def baseline_row(b: Baseline) -> dict[str, Any]:
    return {
        "id": b.id, "scope": b.scope, "name": b.name, "created_at": _iso(b.created_at),
        "created_by": b.created_by, "proposal_id": b.proposal_id,
    }  # fmt: skip


# ---- rows -> domain -----------------------------------------------------------------------


def to_record(row: Row, d: Dialect) -> Record:
    return Record(
        id=row["id"],
        kind=row["kind"],
        scope=row["scope"],
        status=Status(row["status"]),
        current_version_id=row["current_version_id"],
        current_version=row["current_version"],
        superseded_by=row["superseded_by"],
        created_at=d.when(row["created_at"]),
        updated_at=d.when(row["updated_at"]),
        status_changed_at=d.when(row["status_changed_at"]),
        created_by=row["created_by"],
        content=Content.model_validate_json(row["content"], context=STORED),
    )


def to_version(row: Row, d: Dialect) -> Version:
    return Version(
        id=row["id"],
        record_id=row["record_id"],
        number=row["number"],
        content=Content.model_validate_json(row["content"], context=STORED),
        content_hash=row["content_hash"],
        created_at=d.when(row["created_at"]),
        created_by=row["created_by"],
        proposal_id=row["proposal_id"],
    )


def to_proposal(row: Row, d: Dialect) -> Proposal:
    fields = {name: row[name] for name in PROPOSAL_COLUMNS if name != "op"}
    fields["change"] = d.json(row["change"])
    fields["principal_roles"] = d.json(row["principal_roles"])
    fields["created_at"] = d.when(row["created_at"])
    fields["decided_at"] = d.maybe_when(row["decided_at"])
    return Proposal.model_validate(fields, context=STORED)


def to_audit(row: Row, d: Dialect) -> AuditEntry:
    return AuditEntry(
        seq=row["seq"],
        id=row["id"],
        at=d.when(row["at"]),
        actor=row["actor"],
        actor_roles=tuple(d.json(row["actor_roles"])),
        action=row["action"],
        subject_id=row["subject_id"],
        proposal_id=row["proposal_id"],
        rule=row["rule"],
        reason=row["reason"],
        from_status=row["from_status"],
        to_status=row["to_status"],
        details=d.json(row["details"]),
    )


def to_baseline(row: Row, pins: Mapping[str, str], d: Dialect) -> Baseline:
    return Baseline(
        id=row["id"],
        scope=row["scope"],
        name=row["name"],
        pins=dict(pins),
        created_at=d.when(row["created_at"]),
        created_by=row["created_by"],
        proposal_id=row["proposal_id"],
    )


def to_path_link(row: Row) -> PathLink:
    return PathLink(
        record_id=row["record_id"],
        path=row["path"],
        content_hash=row["content_hash"],
        drifted=bool(row["drifted"]),
    )


def to_published(row: Row, d: Dialect) -> PublishedRow:
    return PublishedRow(
        scope=row["scope"], baseline_id=row["baseline_id"], updated_at=d.when(row["updated_at"])
    )


def to_edge(row: Row, d: Dialect) -> Edge:
    # STORED: a stored edge is read whatever the limits are now (``cairn.limits``).
    return Edge.model_validate(
        {
            "id": row["id"],
            "type": row["type"],
            "src": row["src"],
            "dst": row["dst"],
            "scope": row["scope"],
            "acl": d.json(row["acl"]),
            "metadata": d.json(row["metadata"]),
            "valid_from": d.maybe_when(row["valid_from"]),
            "valid_to": d.maybe_when(row["valid_to"]),
            "origin": row["origin"],
            "status": row["status"],
            "created_at": d.when(row["created_at"]),
            "created_by": row["created_by"],
            "proposal_id": row["proposal_id"],
            "removed_at": d.maybe_when(row["removed_at"]),
            "removed_by": row["removed_by"],
        },
        context=STORED,
    )


def to_event(row: Row, d: Dialect) -> Event:
    return Event.model_construct(
        event_id=row["event_id"],
        ts=d.when(row["ts"]),
        session_id=row["session_id"],
        scope=row["scope"],
        agent=row["agent"],
        role=EventRole(row["role"]),
        kind=row["kind"],
        text=row["text"],
        metadata=d.json(row["metadata"]),
        acl=Acl.model_validate(d.json(row["acl"]), context=STORED),
        appended_at=d.when(row["appended_at"]),
        appended_by=row["appended_by"],
        seq=int(row["seq"]),
    )


def to_toc_node(row: Row, d: Dialect) -> TocNode:
    body = d.json(row["body"])
    return TocNode.model_validate(
        {
            **body,
            "node_id": row["node_id"],
            "version": int(row["version"]),
            "level": row["level"],
            "key": row["node_key"],
            "scope": row["scope"],
            "acl": d.json(row["acl"]),
            "agent": row["agent"],
            "parent_id": row["parent_id"],
            "starts_at": d.when(row["starts_at"]),
            "ends_at": d.when(row["ends_at"]),
            "first_ts": d.maybe_when(row["first_ts"]),
            "last_ts": d.maybe_when(row["last_ts"]),
            "event_count": int(row["event_count"]),
            "retired": bool(row["retired"]),
            "built_at": d.when(row["built_at"]),
        },
        context=STORED,
    )


def to_grip(row: Row, d: Dialect) -> Grip:
    return Grip(
        grip_id=row["grip_id"],
        excerpt=row["excerpt"],
        event_id_start=row["event_id_start"],
        event_id_end=row["event_id_end"],
        event_id=row["event_id"],
        ts=d.when(row["ts"]),
        source=row["source"],
    )


def to_meta(row: Row, d: Dialect) -> ChunkMeta:
    return ChunkMeta(
        id=int(row["id"]),
        record_id=row["record_id"],
        version_id=row["version_id"],
        text_hash=row["text_hash"],
        kind=row["kind"],
        scope_id=int(row["scope_id"]),
        acl_id=int(row["acl_id"]),
        status=row["status"],
        is_head=bool(row["is_head"]),
        superseded=bool(row["superseded"]),
        valid_from=d.maybe_when(row["valid_from"]),
        valid_to=d.maybe_when(row["valid_to"]),
        created_at=d.when(row["created_at"]),
        seq=int(row["seq"]),
        source_kind=row["source_kind"],
        source_time=d.maybe_when(row["source_time"]),
    )
