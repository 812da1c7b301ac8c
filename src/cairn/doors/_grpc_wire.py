"""cairn's timeline values as protobuf messages and back (``proto/cairn/timeline/v1``).

Only the shape changes here: every value is checked by the same pydantic models and kernel
verbs as on the other doors. Two conventions of proto3 are settled once, in this module: an
empty string and a 0 mean "not given", and times are ``Timestamp`` messages (UTC).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypedDict, TypeVar

from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp as Stamp
from pydantic import Field, ValidationError

from cairn.doors.grpc_gen import timeline_pb2 as pb
from cairn.errors import InvalidInput
from cairn.limits import MAX_COUNTER, MAX_EVENT_BATCH
from cairn.model import (
    Acl,
    CairnModel,
    Event,
    EventCursor,
    EventDraft,
    EventRole,
    Grip,
    Id,
    Name,
    Sensitivity,
    Timestamp,
    TocLevel,
    TocNode,
    event_cursor,
)
from cairn.timeline.views import ExpandedGrip, NodeHeader, NodePage, TeleportHit, TimelineStatus

__all__ = [
    "cursor",
    "drafts",
    "event_message",
    "expanded_message",
    "hit_message",
    "moment",
    "node_message",
    "page_message",
    "status_message",
    "text",
]

E = TypeVar("E", bound=StrEnum)
N = TypeVar("N", bound=int)


def _enum_table(enum: type[E], prefix: str, values: Mapping[str, N]) -> dict[E, N]:
    # EVENT_ROLE_USER ↔ EventRole.USER. A member the proto lacks fails here, at import,
    # rather than on the first event that uses it.
    return {member: values[f"{prefix}_{member.name}"] for member in enum}


_ROLES = _enum_table(EventRole, "EVENT_ROLE", dict(pb.EventRole.items()))
_ROLE_OF = {number: role for role, number in _ROLES.items()}
_LEVELS = _enum_table(TocLevel, "TOC_LEVEL", dict(pb.TocLevel.items()))
_SENSITIVITIES = _enum_table(Sensitivity, "SENSITIVITY", dict(pb.Sensitivity.items()))


# ---- from the wire ---------------------------------------------------------------------


class _Batch(CairnModel):
    # Validating the batch as one value names a bad field as on HTTP: ``events.3.ts``.
    events: list[EventDraft] = Field(min_length=1, max_length=MAX_EVENT_BATCH)


class _Cursor(CairnModel):
    ts: Timestamp
    event_id: Id
    scope: Name | None = None


class _Paging(CairnModel):
    # as _Batch: a bad cursor field is named ``after.event_id``
    after: _Cursor


def text(value: str) -> str | None:
    """A string field: empty is "not given"."""
    return value or None


def moment(stamp: Stamp, what: str) -> datetime:
    """A ``Timestamp`` as an aware UTC time; one out of range is refused naming ``what``."""
    try:
        return stamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"{what}: {exc}", field=what) from None


def drafts(request: pb.IngestEventRequest) -> list[EventDraft]:
    """The events of an ingest request, checked as the HTTP door checks its JSON body."""
    sent = [_draft_fields(message, f"events.{i}") for i, message in enumerate(request.events)]
    try:
        return _Batch.model_validate({"events": sent}).events
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None


def _draft_fields(message: pb.EventDraft, where: str) -> dict[str, Any]:
    # Fields left unset are left out, so that pydantic names the missing ones ("Field
    # required") rather than refusing an empty string in their place.
    fields: dict[str, Any] = {
        "event_id": message.event_id,
        "session_id": message.session_id,
        "scope": message.scope,
        "kind": message.kind,
        "text": message.text,
    }
    if message.HasField("ts"):
        fields["ts"] = moment(message.ts, f"{where}.ts")
    if message.role != pb.EVENT_ROLE_UNSPECIFIED:
        if message.role not in _ROLE_OF:
            raise InvalidInput(
                f"{where}.role: {message.role} is not an EventRole", field=f"{where}.role"
            )
        fields["role"] = _ROLE_OF[message.role]
    if message.agent:
        fields["agent"] = message.agent
    if message.HasField("metadata"):
        fields["metadata"] = _struct_dict(message.metadata)
    return fields


def _struct_dict(struct: Struct) -> dict[str, Any]:
    return {key: _plain(value) for key, value in struct.fields.items()}


def _plain(value: Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _struct_dict(value.struct_value)
    if kind == "list_value":
        return [_plain(item) for item in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        # Struct has doubles only: a whole number was an integer to whoever sent it
        # (a turn, a count), and reads back as one, the same as it reads over HTTP.
        if number.is_integer() and abs(number) <= MAX_COUNTER:
            return int(number)
        return number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def cursor(message: pb.EventCursor) -> EventCursor:
    """A page cursor: the ``ts`` and ``event_id`` of the last event seen (and its scope)."""
    fields: dict[str, Any] = {"event_id": message.event_id}
    if message.HasField("ts"):
        fields["ts"] = moment(message.ts, "after.ts")
    if message.scope:
        fields["scope"] = message.scope
    try:
        found = _Paging.model_validate({"after": fields}).after
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None
    after = event_cursor(found.ts, found.event_id, found.scope)
    assert after is not None  # _Cursor requires both the ts and the id
    return after


# ---- to the wire -----------------------------------------------------------------------


def _stamp(value: datetime) -> Stamp:
    stamp = Stamp()
    stamp.FromDatetime(value)
    return stamp


def _struct(mapping: Mapping[str, Any]) -> Struct:
    struct = Struct()
    struct.update(mapping)
    return struct


def _acl(acl: Acl) -> pb.Acl:
    return pb.Acl(roles=acl.roles, labels=acl.labels, sensitivity=_SENSITIVITIES[acl.sensitivity])


def event_message(event: Event) -> pb.Event:
    return pb.Event(
        event_id=event.event_id,
        ts=_stamp(event.ts),
        session_id=event.session_id,
        scope=event.scope,
        agent=event.agent or "",
        role=_ROLES[event.role],
        kind=event.kind,
        text=event.text,
        metadata=_struct(event.metadata),
        acl=_acl(event.acl),
        appended_at=_stamp(event.appended_at),
        appended_by=event.appended_by,
        seq=event.seq,
    )


def _events(events: Iterable[Event]) -> list[pb.Event]:
    return [event_message(e) for e in events]


def _grip(grip: Grip) -> pb.Grip:
    return pb.Grip(
        grip_id=grip.grip_id,
        excerpt=grip.excerpt,
        event_id_start=grip.event_id_start,
        event_id_end=grip.event_id_end,
        event_id=grip.event_id,
        ts=_stamp(grip.ts),
        source=grip.source,
    )


class _NodeFields(TypedDict):
    node_id: str
    version: int
    level: pb.TocLevel.ValueType
    title: str
    starts_at: Stamp
    ends_at: Stamp


def _node_fields(node: TocNode | NodeHeader | TeleportHit) -> _NodeFields:
    """Which node version, at which level and over which span: what every message about a
    node (the node itself, a child in a page, a search hit) says first."""
    return {
        "node_id": node.node_id,
        "version": node.version,
        "level": _LEVELS[node.level],
        "title": node.title,
        "starts_at": _stamp(node.starts_at),
        "ends_at": _stamp(node.ends_at),
    }


def node_message(node: TocNode) -> pb.TocNode:
    return pb.TocNode(
        **_node_fields(node),
        key=node.key,
        scope=node.scope,
        acl=_acl(node.acl),
        agent=node.agent or "",
        parent_id=node.parent_id or "",
        first_ts=_stamp(node.first_ts) if node.first_ts is not None else None,
        last_ts=_stamp(node.last_ts) if node.last_ts is not None else None,
        event_count=node.event_count,
        bullets=[pb.Bullet(text=b.text, grip_ids=b.grip_ids) for b in node.bullets],
        keywords=node.keywords,
        children=node.children,
        grips=[_grip(g) for g in node.grips],
        sessions=node.sessions,
        summarizer=node.summarizer,
        retired=node.retired,
        built_at=_stamp(node.built_at),
    )


def _header(header: NodeHeader) -> pb.NodeHeader:
    return pb.NodeHeader(**_node_fields(header), key=header.key, event_count=header.event_count)


def page_message(page: NodePage) -> pb.BrowseTocResponse:
    return pb.BrowseTocResponse(
        node_id=page.node_id,
        children=[_header(h) for h in page.children],
        next_after=page.next_after or "",
    )


def expanded_message(expanded: ExpandedGrip) -> pb.ExpandGripResponse:
    return pb.ExpandGripResponse(
        grip=_grip(expanded.grip),
        before=_events(expanded.before),
        events=_events(expanded.events),
        after=_events(expanded.after),
    )


def hit_message(hit: TeleportHit) -> pb.TeleportHit:
    return pb.TeleportHit(
        **_node_fields(hit),
        text=hit.text,
        grip_ids=hit.grip_ids,
        score=hit.score,
        signals=hit.signals,
    )


def status_message(status: TimelineStatus) -> pb.IndexStatusResponse:
    return pb.IndexStatusResponse(
        lag=status.lag,
        nodes=status.nodes,
        vector_lag=status.vector_lag,
        vector_index_busy=status.vector_index_busy,
    )
