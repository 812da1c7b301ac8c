"""Domain values to table rows and back, for both SQL stores.

Writes go out as plain dicts of column values (the SQLite store inserts them, the PostgreSQL
store hands them to ``cairn_commit`` as JSON); reads come back through a ``Dialect``, which
knows how each database returns times and JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

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
from cairn.store.base import ChunkMeta, ChunkRow, PublishedRow, StoredTask
from cairn.store.sql.dialect import Dialect, last_one

__all__ = [
    "AUDIT_COLUMNS",
    "EDGE_COLUMNS",
    "EDGE_STATE",
    "META_COLUMNS",
    "PROPOSAL_COLUMNS",
    "JsonText",
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
    "to_chunk_row",
    "to_edge",
    "to_event",
    "to_meta",
    "to_path_link",
    "to_proposal",
    "to_published",
    "to_record",
    "to_task",
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


class JsonText(str):
    """A JSON value already written out: a store that keeps JSON as text stores it as is."""

    __slots__ = ()


def _json_of(value: BaseModel, encoded: bool) -> Any:
    """``value`` as a JSON column: its text (``encoded``: pydantic writes it in a third of
    the time of dumping it to Python and encoding that, which the batch write path felt)
    or its plain data, for a store that encodes JSON itself. Either spelling is the same
    for the same value: the model's fields in their order, metadata with its keys sorted."""
    return JsonText(value.model_dump_json()) if encoded else value.model_dump(mode="json")


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


def version_row(v: Version, *, encoded: bool = False) -> dict[str, Any]:
    """``content`` as a dict, or as its ``JsonText`` when ``encoded``."""
    return {
        "id": v.id, "record_id": v.record_id, "number": v.number,
        "content": _json_of(v.content, encoded), "content_hash": v.content_hash,
        "created_at": _iso(v.created_at), "created_by": v.created_by,
        "proposal_id": v.proposal_id,
    }  # fmt: skip


def proposal_row(p: Proposal, *, encoded: bool = False) -> dict[str, Any]:
    """``change`` as a dict, or as its ``JsonText`` when ``encoded``."""
    return {
        "id": p.id, "op": p.change.op, "scope": p.scope, "record_id": p.record_id,
        "base_version_id": p.base_version_id, "base_baseline_id": p.base_baseline_id,
        "principal_id": p.principal_id, "principal_roles": list(p.principal_roles),
        "status": p.status.value, "change": _json_of(p.change, encoded),
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


def edge_row(e: Edge, *, encoded: bool = False) -> dict[str, Any]:
    """``acl`` as a dict, or as its ``JsonText`` when ``encoded``; ``metadata`` a dict. Each
    store stores them as its JSON (and interns the scope and ACL next to the row, so walks
    filter edges as the index filters chunks)."""
    return {
        "id": e.id, "type": e.type, "src": e.src, "dst": e.dst, "scope": e.scope,
        "acl": _json_of(e.acl, encoded), "metadata": _plain(e.metadata),
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


class _Columns:
    """How the columns of one table read back into a domain value's fields: as stored,
    or through the dialect (times, optional times, JSON), or as booleans (SQLite's 0/1).
    Each names its columns in one space-separated string."""

    def __init__(
        self,
        plain: str,
        *,
        when: str = "",
        maybe_when: str = "",
        from_json: str = "",
        flags: str = "",
    ) -> None:
        self.plain = tuple(plain.split())
        self.when = tuple(when.split())
        self.maybe_when = tuple(maybe_when.split())
        self.from_json = tuple(from_json.split())
        self.flags = tuple(flags.split())

    def read(self, row: Row, d: Dialect) -> dict[str, Any]:
        fields = {name: row[name] for name in self.plain}
        for name in self.when:
            fields[name] = d.when(row[name])
        for name in self.maybe_when:
            fields[name] = d.maybe_when(row[name])
        for name in self.from_json:
            fields[name] = d.json(row[name])
        for name in self.flags:
            fields[name] = bool(row[name])
        return fields


_RECORD = _Columns(
    "id kind scope current_version_id current_version superseded_by created_by",
    when="created_at updated_at status_changed_at",
)
_VERSION = _Columns("id record_id number content_hash created_by proposal_id", when="created_at")
_PROPOSAL = _Columns(
    "id scope record_id base_version_id base_baseline_id principal_id status reason rule "
    "decided_by rebased_from rebased_to result_record_id result_version_id",
    when="created_at",
    maybe_when="decided_at",
    from_json="change principal_roles",
)
_AUDIT = _Columns(
    "seq id actor action subject_id proposal_id rule reason from_status to_status",
    when="at",
    from_json="details",
)
_BASELINE = _Columns("id scope name created_by proposal_id", when="created_at")
_PATH_LINK = _Columns("record_id path content_hash", flags="drifted")
_PUBLISHED = _Columns("scope baseline_id", when="updated_at")
_EDGE = _Columns(
    "id type src dst scope origin status created_by proposal_id removed_by",
    when="created_at",
    maybe_when="valid_from valid_to removed_at",
    from_json="acl metadata",
)
_EVENT = _Columns(
    "event_id session_id scope agent kind text appended_by",
    when="ts appended_at",
    from_json="metadata",
)
_TOC_NODE = _Columns(
    "node_id level scope agent parent_id",
    when="starts_at ends_at built_at",
    maybe_when="first_ts last_ts",
    from_json="acl",
    flags="retired",
)
_GRIP = _Columns("grip_id excerpt event_id_start event_id_end event_id source", when="ts")
_CHUNK_TEXT = _Columns("version_no chunk_key heading text title")
_TASK = _Columns("id context_id owner")


def to_record(row: Row, d: Dialect) -> Record:
    return Record(
        **_RECORD.read(row, d),
        status=Status(row["status"]),
        content=Content.model_validate_json(row["content"], context=STORED),
    )


def to_version(row: Row, d: Dialect) -> Version:
    return Version(
        **_VERSION.read(row, d),
        content=Content.model_validate_json(row["content"], context=STORED),
    )


def to_proposal(row: Row, d: Dialect) -> Proposal:
    return Proposal.model_validate(_PROPOSAL.read(row, d), context=STORED)


def to_audit(row: Row, d: Dialect) -> AuditEntry:
    return AuditEntry(**_AUDIT.read(row, d), actor_roles=tuple(d.json(row["actor_roles"])))


def to_baseline(row: Row, pins: Mapping[str, str], d: Dialect) -> Baseline:
    return Baseline(**_BASELINE.read(row, d), pins=dict(pins))


def to_path_link(row: Row, d: Dialect) -> PathLink:
    return PathLink(**_PATH_LINK.read(row, d))


def to_published(row: Row, d: Dialect) -> PublishedRow:
    return PublishedRow(**_PUBLISHED.read(row, d))


def to_edge(row: Row, d: Dialect) -> Edge:
    # STORED: a stored edge is read whatever the limits are now (``cairn.limits``).
    return Edge.model_validate(_EDGE.read(row, d), context=STORED)


def to_event(row: Row, d: Dialect) -> Event:
    return Event.model_construct(
        **_EVENT.read(row, d),
        role=EventRole(row["role"]),
        acl=Acl.model_validate(d.json(row["acl"]), context=STORED),
        seq=int(row["seq"]),
    )


def to_toc_node(row: Row, d: Dialect) -> TocNode:
    return TocNode.model_validate(
        {
            **d.json(row["body"]),
            **_TOC_NODE.read(row, d),
            "version": int(row["version"]),
            "key": row["node_key"],
            "event_count": int(row["event_count"]),
        },
        context=STORED,
    )


def to_grip(row: Row, d: Dialect) -> Grip:
    return Grip(**_GRIP.read(row, d))


def to_chunk_row(row: Row, d: Dialect) -> ChunkRow:
    """A chunk with its text and its version's title (``IndexStore.chunk_rows``)."""
    return ChunkRow(
        **_CHUNK_TEXT.read(row, d),
        meta=to_meta(row, d),
        start=row["span_start"],
        end=row["span_end"],
    )


def to_task(row: Row, d: Dialect) -> StoredTask:
    return StoredTask(**_TASK.read(row, d), state=int(row["state"]), body=bytes(row["body"]))


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
