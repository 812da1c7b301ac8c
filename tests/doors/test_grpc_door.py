"""The gRPC door through a real grpcio client on a loopback port: every RPC answers what the
kernel stored, keys are checked on every call, a reader sees nothing of a scope it may not
read, bad input is INVALID_ARGUMENT naming the field, health says SERVING and reflection
lists the services; and ``cairn serve --grpc-port`` starts it beside the HTTP API."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from cairn.auth import PrincipalEntry, add_key, load_principals, revoke_key, save_principals
from cairn.doors._errors import GRPC_STATUS, HTTP_STATUS
from cairn.doors.grpc_gen import timeline_pb2 as pb
from cairn.doors.grpc_gen import timeline_pb2_grpc as pb_grpc
from cairn.doors.grpc_server import GrpcDoor, start_grpc_door
from cairn.doors.grpc_timeline import SERVICE_NAME
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import Memory
from cairn.model import Event, Principal
from cairn.workspace import Workspace
from tests.doors.conftest import free_port, stop_server, wait_ready
from tests.search.building import building_in_another_thread

SECRET = "zebraquartz"
RPCS = {
    "IngestEvent",
    "GetTocRoot",
    "GetNode",
    "BrowseToc",
    "GetEvents",
    "ExpandGrip",
    "TeleportQuery",
    "IndexStatus",
}


def _stamp(minute: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime(2026, 3, 2, 9, minute, tzinfo=UTC))
    return stamp


def _draft(event_id: str, minute: int, text: str, scope: str = "acme/tl") -> pb.EventDraft:
    user = minute % 2 == 0
    draft = pb.EventDraft(
        event_id=event_id,
        ts=_stamp(minute),
        session_id="s-1",
        scope=scope,
        agent="claude-code",
        role=pb.EVENT_ROLE_USER if user else pb.EVENT_ROLE_ASSISTANT,
        kind="user_message" if user else "assistant_message",
        text=text,
    )
    draft.metadata.update({"turn": minute, "ratio": 0.5, "tags": ["a", "b"], "none": None})
    return draft


OURS = [
    _draft("t0", 0, "Why does the nightly deploy fail on Fridays?"),
    _draft("t1", 1, "The deploy cron overlaps the weekly backup window."),
    _draft("t2", 2, "Move the backup to Saturday night then."),
    _draft("t3", 3, "Done, the backup job now runs on Saturdays."),
]
THEIRS = [
    _draft("x0", 0, f"The {SECRET} merger closes in May.", scope="other/secret"),
    _draft("x1", 1, f"Keep {SECRET} out of the changelog.", scope="other/secret"),
]


@dataclass(frozen=True)
class World:
    workspace: Workspace
    memory: Memory
    door: GrpcDoor
    channel: grpc.Channel
    stub: pb_grpc.TimelineServiceStub
    keys: dict[str, str]  # curator, agent, reader (an agent of acme/* only)
    secret_nodes: tuple[str, ...]
    secret_grips: tuple[str, ...]

    def who(self, name: str) -> Principal:
        return self.workspace.authenticate(self.keys[name])


def _auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def _refused(call: Any, request: Any, metadata: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(request, metadata=metadata, timeout=30)
    return caught.value


def _trailing(error: grpc.RpcError) -> dict[str, str]:
    return {k: v for k, v in error.trailing_metadata() or ()}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The module's world: no test may change what it holds or has embedded."""
    yield from _world(tmp_path_factory)


@pytest.fixture
def own_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A world of the test's own, for a test that embeds what the shared one holds."""
    yield from _world(tmp_path_factory)


def _world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    store = tmp_path_factory.mktemp("grpc") / ".cairn"
    workspace = Workspace(store)
    keys = dict(workspace.init().keys)
    principals = load_principals(workspace.principals_path)
    reader = PrincipalEntry(
        id="acme-reader", kind="agent", roles=("agent",), scopes=("acme/*",),
        labels=("public", "internal"),
    )  # fmt: skip
    principals = principals.model_copy(update={"principals": (*principals.principals, reader)})
    principals, keys["reader"], _ = add_key(principals, "acme-reader")
    save_principals(workspace.principals_path, principals)
    memory = workspace.open_memory(embedder="static")
    door = start_grpc_door(workspace, memory, host="127.0.0.1", port=0)
    channel = grpc.insecure_channel(f"127.0.0.1:{door.port}")
    stub = pb_grpc.TimelineServiceStub(channel)
    try:
        for key, events in ((keys["agent"], OURS), (keys["curator"], THEIRS)):
            stub.IngestEvent(pb.IngestEventRequest(events=events), metadata=_auth(key))
        curator = workspace.authenticate(keys["curator"])
        memory.rollup(principal=curator)
        # what the kernel holds of the secret scope, to look for in every answer
        secret_nodes: list[str] = []
        secret_grips: set[str] = set()
        stack = [n.node_id for n in memory.timeline_root(principal=curator, scope="other/*")]
        while stack:
            node = memory.timeline_node(stack.pop(), principal=curator)
            secret_nodes.append(node.node_id)
            secret_grips |= {g.grip_id for g in node.grips}
            stack += node.children
        assert len(secret_nodes) == 5 and secret_grips
        yield World(
            workspace, memory, door, channel, stub, keys,
            tuple(secret_nodes), tuple(sorted(secret_grips)),
        )  # fmt: skip
    finally:
        channel.close()
        door.stop(grace=1)
        memory.close()


def _segment(world: World, who: Principal) -> str:
    """Our one segment's id, walked down from the kernel's root."""
    (year,) = world.memory.timeline_root(principal=who, scope="acme/*")
    node = year
    while node.children:
        node = world.memory.timeline_node(node.children[0], principal=who)
    return node.node_id


def _stored_ids(world: World) -> set[str]:
    return {e.event_id for e in world.memory.events(principal=world.who("curator"), limit=10_000)}


def _check_event(message: pb.Event, event: Event) -> None:
    """A wire event against the kernel's, field by field."""
    assert message.event_id == event.event_id
    assert message.ts.ToDatetime(tzinfo=UTC) == event.ts
    assert (message.session_id, message.scope, message.agent) == (
        event.session_id, event.scope, event.agent,
    )  # fmt: skip
    assert pb.EventRole.Name(message.role) == f"EVENT_ROLE_{event.role.name}"
    assert (message.kind, message.text) == (event.kind, event.text)
    assert message.appended_by == event.appended_by
    assert message.appended_at.ToDatetime(tzinfo=UTC) == event.appended_at
    assert message.HasField("seq") and message.seq == event.seq
    assert list(message.acl.labels) == list(event.acl.labels)
    assert pb.Sensitivity.Name(message.acl.sensitivity) == (
        f"SENSITIVITY_{event.acl.sensitivity.name}"
    )
    # (a Struct's numbers are doubles, and 1.0 == 1 in Python)
    assert json_format.MessageToDict(message.metadata) == event.metadata


# ---- every RPC against the kernel ---------------------------------------------------------


def test_the_service_has_the_eight_rpcs() -> None:
    methods = pb.DESCRIPTOR.services_by_name["TimelineService"].methods_by_name
    assert set(methods) == RPCS
    assert SERVICE_NAME == "cairn.timeline.v1.TimelineService"


def test_ingest_stores_what_was_sent_once(world: World) -> None:
    agent = world.who("agent")
    stored = world.memory.events(principal=agent, scope="acme/tl")
    assert [e.event_id for e in stored] == ["t0", "t1", "t2", "t3"]
    sent = OURS[1]
    kept = stored[1]
    assert kept.ts == datetime(2026, 3, 2, 9, 1, tzinfo=UTC)
    assert (kept.role.value, kept.kind, kept.text) == ("assistant", "assistant_message", sent.text)
    # a whole number in a Struct (a double) comes back an integer, as it was sent
    assert kept.metadata == {"turn": 1, "ratio": 0.5, "tags": ["a", "b"], "none": None}
    assert kept.appended_by == "agent"

    again = world.stub.IngestEvent(
        pb.IngestEventRequest(events=OURS[:2]), metadata=_auth(world.keys["agent"])
    )
    assert (list(again.stored), list(again.duplicates)) == ([], ["t0", "t1"])
    fresh = _draft("t9", 30, "A late note.", scope="acme/late")
    both = world.stub.IngestEvent(
        pb.IngestEventRequest(events=[OURS[0], fresh]), metadata=_auth(world.keys["agent"])
    )
    assert (list(both.stored), list(both.duplicates)) == (["t9"], ["t0"])
    assert [e.event_id for e in world.memory.events(principal=agent, scope="acme/late")] == ["t9"]

    changed = pb.EventDraft()
    changed.CopyFrom(OURS[0])
    changed.text = "rewritten"
    error = _refused(
        world.stub.IngestEvent,
        pb.IngestEventRequest(events=[changed]),
        _auth(world.keys["agent"]),
    )
    assert error.code() is grpc.StatusCode.ABORTED
    assert "other content" in (error.details() or "")
    assert _trailing(error) == {"cairn-code": "conflict", "cairn-field": "event_id"}
    assert world.memory.events(principal=agent, scope="acme/tl")[0].text == OURS[0].text


def test_get_events_pages_through_what_the_kernel_holds(world: World) -> None:
    reader = world.who("reader")
    expected = world.memory.events(principal=reader, scope="acme/tl")
    assert len(expected) == 4
    seen: list[pb.Event] = []
    request = pb.GetEventsRequest(scope="acme/tl", limit=3)
    while True:
        page = world.stub.GetEvents(request, metadata=_auth(world.keys["reader"])).events
        seen += page
        if len(page) < 3:
            break
        last = page[-1]
        request = pb.GetEventsRequest(
            scope="acme/tl",
            limit=3,
            after=pb.EventCursor(ts=last.ts, event_id=last.event_id, scope=last.scope),
        )
    assert len(seen) == len(expected)
    for message, event in zip(seen, expected, strict=True):
        _check_event(message, event)

    since = world.stub.GetEvents(
        pb.GetEventsRequest(scope="acme/tl", since=_stamp(2), session_id="s-1"),
        metadata=_auth(world.keys["reader"]),
    )
    assert [e.event_id for e in since.events] == ["t2", "t3"]


def test_the_toc_answers_what_the_kernel_holds(world: World) -> None:
    reader = world.who("reader")
    metadata = _auth(world.keys["reader"])
    roots = world.stub.GetTocRoot(pb.GetTocRootRequest(), metadata=metadata).nodes
    kernel_roots = world.memory.timeline_root(principal=reader)
    assert [n.node_id for n in roots] == [n.node_id for n in kernel_roots]
    assert roots and all(n.scope.startswith("acme/") for n in roots)

    node_id = roots[0].node_id
    while node_id:
        message = world.stub.GetNode(pb.GetNodeRequest(node_id=node_id), metadata=metadata)
        node = world.memory.timeline_node(node_id, principal=reader)
        assert (message.node_id, message.version, message.key, message.scope) == (
            node.node_id, node.version, node.key, node.scope,
        )  # fmt: skip
        assert pb.TocLevel.Name(message.level) == f"TOC_LEVEL_{node.level.name}"
        assert (message.title, message.event_count) == (node.title, node.event_count)
        assert message.starts_at.ToDatetime(tzinfo=UTC) == node.starts_at
        assert message.ends_at.ToDatetime(tzinfo=UTC) == node.ends_at
        assert message.parent_id == (node.parent_id or "")
        assert list(message.children) == list(node.children)
        assert list(message.keywords) == list(node.keywords)
        assert [(b.text, list(b.grip_ids)) for b in message.bullets] == [
            (b.text, list(b.grip_ids)) for b in node.bullets
        ]
        assert [(g.grip_id, g.event_id, g.excerpt) for g in message.grips] == [
            (g.grip_id, g.event_id, g.excerpt) for g in node.grips
        ]
        # a version by number answers the same node
        pinned = world.stub.GetNode(
            pb.GetNodeRequest(node_id=node_id, version=node.version), metadata=metadata
        )
        assert pinned == message
        # browsing one child at a time walks every child, in order
        walked: list[str] = []
        after = ""
        while True:
            page = world.stub.BrowseToc(
                pb.BrowseTocRequest(node_id=node_id, after=after, limit=1), metadata=metadata
            )
            assert page.node_id == node_id
            walked += [h.node_id for h in page.children]
            if not page.next_after:
                break
            after = page.next_after
        assert walked == list(node.children)
        node_id = node.children[0] if node.children else ""

    missing = _refused(
        world.stub.GetNode, pb.GetNodeRequest(node_id=roots[0].node_id, version=99), metadata
    )
    assert missing.code() is grpc.StatusCode.NOT_FOUND


def test_expand_grip_answers_the_kernels_events(world: World) -> None:
    reader = world.who("reader")
    segment = world.memory.timeline_node(_segment(world, reader), principal=reader)
    grip = segment.grips[-1]
    expected = world.memory.expand_grip(grip.grip_id, principal=reader, before=1, after=0)
    answer = world.stub.ExpandGrip(
        pb.ExpandGripRequest(grip_id=grip.grip_id, before=1, after=0),
        metadata=_auth(world.keys["reader"]),
    )
    assert answer.grip.grip_id == grip.grip_id
    assert answer.grip.ts.ToDatetime(tzinfo=UTC) == grip.ts
    assert [e.event_id for e in answer.before] == [e.event_id for e in expected.before]
    assert [e.event_id for e in answer.events] == [e.event_id for e in expected.events]
    assert list(answer.after) == []
    for message, event in zip(answer.events, expected.events, strict=True):
        _check_event(message, event)
    # before and after left unset: three events of context on either side, as on HTTP
    default = world.stub.ExpandGrip(
        pb.ExpandGripRequest(grip_id=segment.grips[0].grip_id),
        metadata=_auth(world.keys["reader"]),
    )
    kernel = world.memory.expand_grip(segment.grips[0].grip_id, principal=reader)
    assert [e.event_id for e in default.after] == [e.event_id for e in kernel.after]


def test_teleport_query_answers_the_kernels_hits(world: World) -> None:
    reader = world.who("reader")
    expected = world.memory.timeline_search("backup Saturday", principal=reader, k=5).hits
    answer = world.stub.TeleportQuery(
        pb.TeleportQueryRequest(query="backup Saturday", k=5),
        metadata=_auth(world.keys["reader"]),
    )
    assert expected
    assert [(h.node_id, h.version, h.text) for h in answer.hits] == [
        (h.node_id, h.version, h.text) for h in expected
    ]
    assert [h.score for h in answer.hits] == pytest.approx([h.score for h in expected])
    assert [dict(h.signals) for h in answer.hits] == [h.signals for h in expected]
    assert [list(h.grip_ids) for h in answer.hits] == [list(h.grip_ids) for h in expected]


def test_index_status_is_for_curators_of_every_scope(world: World) -> None:
    status = world.stub.IndexStatus(pb.IndexStatusRequest(), metadata=_auth(world.keys["curator"]))
    kernel = world.memory.timeline_status(principal=world.who("curator"))
    assert (status.lag, dict(status.nodes)) == (kernel.lag, kernel.nodes)
    assert status.nodes["segment"] >= 2
    for name in ("agent", "reader"):
        error = _refused(world.stub.IndexStatus, pb.IndexStatusRequest(), _auth(world.keys[name]))
        assert error.code() is grpc.StatusCode.PERMISSION_DENIED


def test_a_busy_vector_index_is_said_over_grpc(own_world: World) -> None:
    """While another thread mirrors the store into a new index (as a server's worker does
    after a restart), a query answers by keyword alone and says so, and so does the status."""
    world = own_world
    world.memory._indexer = None  # a new process's index: nothing mirrored yet
    indexer = world.memory.indexer
    assert indexer is not None
    with building_in_another_thread(indexer):
        answer = world.stub.TeleportQuery(
            pb.TeleportQueryRequest(query="backup Saturday", k=5),
            metadata=_auth(world.keys["reader"]),
        )
        assert answer.hits and all("vector" not in dict(h.signals) for h in answer.hits)
        assert any("index is busy" in warning for warning in answer.warnings)
        status = world.stub.IndexStatus(
            pb.IndexStatusRequest(), metadata=_auth(world.keys["curator"])
        )
        assert status.vector_index_busy
    world.memory.index_pending()  # every node embedded: the vector stage has hits to give
    after = world.stub.TeleportQuery(
        pb.TeleportQueryRequest(query="backup Saturday", k=5),
        metadata=_auth(world.keys["reader"]),
    )
    assert list(after.warnings) == [] and any("vector" in dict(h.signals) for h in after.hits)
    status = world.stub.IndexStatus(pb.IndexStatusRequest(), metadata=_auth(world.keys["curator"]))
    assert not status.vector_index_busy


# ---- keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        (("authorization", "Bearer not-a-key"),),
        (("authorization", "Bearer "),),
        (("authorization", "Basic dXNlcjpwYXNz"),),
        (("x-api-key", "whatever"),),
    ],
    ids=["none", "wrong", "empty", "basic", "other-header"],
)
def test_a_call_without_a_good_key_is_unauthenticated(world: World, metadata: Any) -> None:
    for call, request in (
        (world.stub.GetTocRoot, pb.GetTocRootRequest()),
        (world.stub.IngestEvent, pb.IngestEventRequest(events=[_draft("u0", 5, "sneak")])),
        (world.stub.GetEvents, pb.GetEventsRequest()),
    ):
        error = _refused(call, request, metadata)
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
        assert _trailing(error)["cairn-code"] == "unauthenticated"
    assert "u0" not in _stored_ids(world)


def test_two_keys_in_one_call_are_refused(world: World) -> None:
    both = (*_auth(world.keys["reader"]), *_auth(world.keys["curator"]))
    error = _refused(world.stub.GetTocRoot, pb.GetTocRootRequest(), both)
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED


def test_the_key_is_checked_on_every_call(world: World) -> None:
    path = world.workspace.principals_path
    principals, secret, api_key = add_key(load_principals(path), "agent", label="short-lived")
    save_principals(path, principals)
    world.stub.GetTocRoot(pb.GetTocRootRequest(), metadata=_auth(secret))
    save_principals(path, revoke_key(load_principals(path), api_key.id))
    error = _refused(world.stub.GetTocRoot, pb.GetTocRootRequest(), _auth(secret))
    assert error.code() is grpc.StatusCode.UNAUTHENTICATED


# ---- scopes ---------------------------------------------------------------------------


def test_a_reader_sees_nothing_of_another_scope(world: World) -> None:
    metadata = _auth(world.keys["reader"])
    answers: list[str] = []  # what the reader was shown
    refusals: list[str] = []  # and told (which may echo the id it asked about)

    roots = world.stub.GetTocRoot(pb.GetTocRootRequest(), metadata=metadata)
    assert {n.scope for n in roots.nodes} == {"acme/tl"}
    answers.append(str(roots))
    asked = world.stub.GetTocRoot(pb.GetTocRootRequest(scope="other/*"), metadata=metadata)
    assert list(asked.nodes) == []

    events = world.stub.GetEvents(pb.GetEventsRequest(limit=1000), metadata=metadata)
    assert {e.scope for e in events.events} <= {"acme/tl", "acme/late"}
    assert {"t0", "t1", "t2", "t3"} <= {e.event_id for e in events.events}
    answers.append(str(events))
    theirs = world.stub.GetEvents(pb.GetEventsRequest(scope="other/secret"), metadata=metadata)
    assert list(theirs.events) == []

    unknown = _refused(world.stub.GetNode, pb.GetNodeRequest(node_id="tl_nope.year.2026"), metadata)
    for node_id in world.secret_nodes:
        hidden = _refused(world.stub.GetNode, pb.GetNodeRequest(node_id=node_id), metadata)
        # the same answer as for a node that does not exist, but for the id asked about
        assert hidden.code() is unknown.code() is grpc.StatusCode.NOT_FOUND
        assert (hidden.details() or "").replace(node_id, "?") == (unknown.details() or "").replace(
            "tl_nope.year.2026", "?"
        )
        browsed = _refused(world.stub.BrowseToc, pb.BrowseTocRequest(node_id=node_id), metadata)
        assert browsed.code() is grpc.StatusCode.NOT_FOUND
        refusals += [hidden.details() or "", browsed.details() or ""]
    for grip_id in world.secret_grips:
        grip = _refused(world.stub.ExpandGrip, pb.ExpandGripRequest(grip_id=grip_id), metadata)
        assert grip.code() is grpc.StatusCode.NOT_FOUND
        refusals.append(grip.details() or "")

    hits = world.stub.TeleportQuery(
        pb.TeleportQueryRequest(query=f"{SECRET} merger"), metadata=metadata
    )
    assert all(h.node_id not in world.secret_nodes for h in hits.hits)
    answers.append(str(hits))
    # the curator does find it: the search would have shown it had the kernel not trimmed
    found = world.stub.TeleportQuery(
        pb.TeleportQueryRequest(query=f"{SECRET} merger"), metadata=_auth(world.keys["curator"])
    )
    assert any(h.node_id in world.secret_nodes for h in found.hits)

    written = _refused(
        world.stub.IngestEvent,
        pb.IngestEventRequest(events=[_draft("r0", 9, "mine now", scope="other/secret")]),
        metadata,
    )
    assert written.code() is grpc.StatusCode.PERMISSION_DENIED

    shown, told = "\n".join(answers), "\n".join(refusals)
    assert SECRET not in shown + told and "other/secret" not in shown + told
    assert not any(node_id in shown for node_id in world.secret_nodes)


# ---- bad input --------------------------------------------------------------------------


def _draft_without(*fields: str) -> pb.EventDraft:
    draft = pb.EventDraft()
    draft.CopyFrom(_draft("b0", 10, "bad"))
    for name in fields:
        draft.ClearField(name)
    return draft


FAR_FUTURE = Timestamp(seconds=10**13)


@pytest.mark.parametrize(
    ("rpc", "request_", "field", "words"),
    [
        ("GetNode", pb.GetNodeRequest(), "node_id", "node_id is required"),
        ("GetNode", pb.GetNodeRequest(node_id="x", version=-1), "version", "version"),
        ("BrowseToc", pb.BrowseTocRequest(), "node_id", "node_id is required"),
        ("BrowseToc", pb.BrowseTocRequest(node_id="x", limit=5000), "limit", "limit"),
        ("ExpandGrip", pb.ExpandGripRequest(), "grip_id", "grip_id is required"),
        ("ExpandGrip", pb.ExpandGripRequest(grip_id="g", before=99), "before", "before"),
        ("GetEvents", pb.GetEventsRequest(limit=20_000), "limit", "limit"),
        ("GetEvents", pb.GetEventsRequest(since=FAR_FUTURE), "since", "since"),
        (
            "GetEvents",
            pb.GetEventsRequest(after=pb.EventCursor(event_id="t1")),
            "after.ts",
            "after.ts",
        ),
        ("TeleportQuery", pb.TeleportQueryRequest(query="deploy", k=500), "k", "k"),
        ("TeleportQuery", pb.TeleportQueryRequest(query="x" * 100_000), "query", "query"),
        ("IngestEvent", pb.IngestEventRequest(), "events", "events"),
        (
            "IngestEvent",
            pb.IngestEventRequest(events=[_draft_without("ts")]),
            "events.0.ts",
            "events.0.ts: Field required",
        ),
        (
            "IngestEvent",
            pb.IngestEventRequest(events=[_draft("b1", 11, "ok"), _draft_without("role")]),
            "events.1.role",
            "events.1.role",
        ),
        (
            "IngestEvent",
            pb.IngestEventRequest(events=[pb.EventDraft(event_id="b2", role=99)]),
            "events.0.role",
            "99",
        ),
        (
            "IngestEvent",
            pb.IngestEventRequest(events=[_draft("b3", 12, "x", scope="/no//path")]),
            "events.0.scope",
            "scope",
        ),
    ],
)
def test_bad_input_is_invalid_argument_naming_the_field(
    world: World, rpc: str, request_: Any, field: str, words: str
) -> None:
    error = _refused(getattr(world.stub, rpc), request_, _auth(world.keys["curator"]))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error.details()
    assert words in (error.details() or "")
    assert _trailing(error) == {"cairn-code": "invalid_input", "cairn-field": field}


def test_a_message_over_the_size_limit_is_refused(world: World) -> None:
    def ingest(text: str) -> grpc.RpcError:
        request = pb.IngestEventRequest(events=[_draft("big", 20, text)])
        return _refused(world.stub.IngestEvent, request, _auth(world.keys["agent"]))

    # just under the limit, the message reaches the kernel, which finds the text too long
    under = ingest("x" * (MAX_REQUEST_BYTES - 1024))
    assert under.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _trailing(under)["cairn-field"] == "events.0.text"
    # over it, grpcio refuses the message before it is read
    over = ingest("x" * (MAX_REQUEST_BYTES + 1))
    assert over.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "big" not in _stored_ids(world)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protocol buffer field, spelled byte by byte (no message class
    would write the bad messages below)."""

    def varint(value: int) -> bytes:
        out = b""
        while True:
            low, value = value & 0x7F, value >> 7
            if not value:
                return out + bytes([low])
            out += bytes([low | 0x80])

    return varint((number << 3) | 2) + varint(len(payload)) + payload


def _nested_struct(levels: int) -> bytes:
    struct = b""
    for _ in range(levels):  # Struct{fields: {"a": Value{struct_value: Struct{...}}}}
        struct = _field(1, _field(1, b"a") + _field(2, _field(5, struct)))
    return struct


@pytest.mark.parametrize(
    ("rpc", "body"),
    [
        ("GetTocRoot", b"\xff\xff\xff"),  # not a message at all
        ("GetTocRoot", _field(1, b"\xff\xfe")),  # a scope that is not UTF-8
        # an event whose metadata nests past the decoder's 100 levels
        ("IngestEvent", _field(1, _field(1, b"deep") + _field(9, _nested_struct(60)))),
    ],
)
def test_a_request_that_cannot_be_decoded_is_invalid_argument(
    world: World, rpc: str, body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """As an HTTP door answers a body it cannot read: the caller's error, not the server's,
    with or without a key, and no error in the server's log."""
    raw = world.channel.unary_unary(f"/{SERVICE_NAME}/{rpc}")
    for metadata in (_auth(world.keys["agent"]), ()):
        error = _refused(raw, body, metadata)
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, (rpc, error.details())
        assert "could not be decoded" in (error.details() or "")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "deep" not in _stored_ids(world)


def test_an_unexpected_failure_says_nothing_of_itself(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: object) -> None:
        raise RuntimeError(f"disk says {SECRET}")

    monkeypatch.setattr(world.memory, "timeline_root", broken)
    error = _refused(world.stub.GetTocRoot, pb.GetTocRootRequest(), _auth(world.keys["agent"]))
    assert error.code() is grpc.StatusCode.INTERNAL
    assert SECRET not in (error.details() or "")


def test_every_error_code_has_a_grpc_status() -> None:
    assert set(GRPC_STATUS) == set(HTTP_STATUS)
    for name in GRPC_STATUS.values():
        assert grpc.StatusCode[name] is not grpc.StatusCode.OK


# ---- health and reflection -------------------------------------------------------------


def test_health_says_serving_without_a_key(world: World) -> None:
    checks = health_pb2_grpc.HealthStub(world.channel)
    for service in ("", SERVICE_NAME):
        answer = checks.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as unknown:
        checks.Check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=10)
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


def test_reflection_lists_the_services_and_their_methods(world: World) -> None:
    database = ProtoReflectionDescriptorDatabase(world.channel)
    assert set(database.get_services()) == {
        SERVICE_NAME,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    service = DescriptorPool(database).FindServiceByName(SERVICE_NAME)
    assert {m.name for m in service.methods} == RPCS
    assert service.file.name == "cairn/timeline/v1/timeline.proto"


# ---- cairn serve --grpc-port -------------------------------------------------------------

CLI = "from cairn.doors.cli import main; main()"
# After a clean shutdown uvicorn raises the SIGTERM it caught again, so that the process
# ends as signalled: -15 is a clean stop too.
CLEAN_EXIT = (0, -signal.SIGTERM)


def _serving(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Poll the health service until it says SERVING; a bounded loop, not a sleep."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        checks = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError("cairn serve exited early (see server.log next to the store)")
            try:
                answer = checks.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)  # pacing the poll, not synchronisation
    raise TimeoutError(f"the gRPC door on {port} never said SERVING")


def _serve(store: Path, args: Sequence[str]) -> subprocess.Popen[bytes]:
    log = (store.parent / "server.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "--store", str(store), "serve", *args],
        stdout=subprocess.DEVNULL,
        stderr=log,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_cairn_serve_grpc_port_serves_beside_the_http_api(tmp_path: Path) -> None:
    store = tmp_path / ".cairn"
    keys = Workspace(store).init().keys
    http_port, grpc_port = free_port(), free_port()
    process = _serve(
        store, ["--port", str(http_port), "--grpc-port", str(grpc_port), "--embedder", "static"]
    )
    try:
        wait_ready(f"http://127.0.0.1:{http_port}", process)
        _serving(grpc_port, process)
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = pb_grpc.TimelineServiceStub(channel)
            sent = stub.IngestEvent(
                pb.IngestEventRequest(events=OURS[:2]), metadata=_auth(keys["agent"]), timeout=30
            )
            assert list(sent.stored) == ["t0", "t1"]
            # one memory behind both doors: HTTP reads what gRPC appended
            over_http = httpx.get(
                f"http://127.0.0.1:{http_port}/v1/timeline/events",
                headers={"Authorization": f"Bearer {keys['agent']}"},
                timeout=30,
            )
            assert [e["event_id"] for e in over_http.json()] == ["t0", "t1"]
            with pytest.raises(grpc.RpcError) as refused:
                stub.GetTocRoot(pb.GetTocRootRequest(), timeout=30)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    finally:
        code = stop_server(process)
    assert code in CLEAN_EXIT
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert "grpc listening" in log
    # the door stops before the memory it reads closes
    assert log.index("grpc stopped") < log.index('"msg": "stopped"')
    # stopped means stopped: the port answers no more
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        with pytest.raises(grpc.RpcError) as gone:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert gone.value.code() is grpc.StatusCode.UNAVAILABLE


def test_cairn_serve_without_grpc_port_opens_no_grpc_door(tmp_path: Path) -> None:
    store = tmp_path / ".cairn"
    Workspace(store).init()
    http_port = free_port()
    process = _serve(store, ["--port", str(http_port), "--embedder", "static"])
    try:
        wait_ready(f"http://127.0.0.1:{http_port}", process)
    finally:
        assert stop_server(process) in CLEAN_EXIT
    log = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert '"grpc": null' in log and "grpc listening" not in log
