"""``cairn.open`` and ``cairn.connect`` pass one suite: the same scenario, written once against
``cairn.MemoryClient``, runs on a local store and over real HTTP against ``cairn serve``, and
both tell the same story, ids and times aside: the same decisions, records, versions, hits,
proposals, audit entries and events, and the same refusals as the same exception classes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

import cairn
from cairn import (
    AuditQuery,
    CairnError,
    Content,
    ContentPatch,
    EventDraft,
    MemoryClient,
    RecordQuery,
    VersionPin,
)
from cairn.graph.why import WhyRequest
from cairn.model import EventRole
from cairn.retrieval.context import ReadContextRequest
from cairn.timeline.views import TimelineHits
from tests.client.conftest import LocalStore
from tests.doors.conftest import Live

Opener = Callable[[str], MemoryClient]
Transcript = list[tuple[str, Any]]

# a ULID-shaped id (rec_…, prp_…, ver_…, aud_…, trc_…) and an RFC 3339 time
ID = re.compile(r"\b[a-z]{3}_[0-9A-HJKMNP-TV-Z]{26}\b")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
# what differs between two runs without saying anything about the client: timings, how far
# a background worker got, and hashes over ids (a graph answer's fingerprints)
# default_scope: each store's `cairn init` names its own folder (code/<folder>)
VOLATILE = frozenset({"timings_ms", "vector_lag", "runtime", "fingerprints", "default_scope"})

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def normalised(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every id replaced by its order of first appearance (so that which
    thing refers to which is still compared) and every time by ``<time>``."""
    if isinstance(value, dict):
        return {
            normalised(k, ids): normalised(v, ids) for k, v in value.items() if k not in VOLATILE
        }
    if isinstance(value, list | tuple):
        return [normalised(v, ids) for v in value]
    if isinstance(value, str):
        if TIME.match(value):
            return "<time>"
        return ID.sub(lambda m: ids.setdefault(m.group(), f"<id{len(ids)}>"), value)
    return value


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two normalised answers differ, as paths (to read a failure by)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff(a.get(k), b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


class Recorder:
    def __init__(self) -> None:
        self.steps: Transcript = []

    def __call__(self, name: str, call: Callable[[], Any]) -> Any:
        try:
            result = call()
        except CairnError as error:
            self.steps.append(
                (name, {"raised": type(error).__name__, "code": error.code, "field": error.field,
                        "message": error.message})
            )  # fmt: skip
            return error
        self.steps.append((name, _json(result)))
        return result


def _skill(title: str, body: str) -> Content:
    return Content(kind="skill", scope="acme/app", title=title, body=body, tags=("ci",))


def _events() -> list[EventDraft]:
    return [
        EventDraft(
            event_id=f"evt-{n}",
            ts=T0 + timedelta(minutes=n),
            session_id="s-1",
            scope="acme/app",
            agent="coder",
            role=EventRole.USER,
            kind="user_message",
            text=text,
        )
        for n, text in enumerate(
            ["The deploy failed on the staging cluster", "Rolled back the staging deploy"]
        )
    ]


def _until(probe: Callable[[], list[Any]], timeout: float = 30.0) -> list[Any]:
    """Poll a read until it finds something (the timeline is rolled up in the background):
    a bounded loop, not a sleep."""
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        if time.monotonic() > deadline:
            return found
        time.sleep(0.05)  # pacing the poll, not synchronisation
    return found


def _embedded(hits: TimelineHits) -> list[Any]:
    """The hits, if the answer says nothing was missing (an entry rolled up a moment ago
    waits for its vector and is ranked by keywords alone, on one side and not the other);
    else nothing."""
    return [] if hits.warnings else list(hits.hits)


def scenario(open_as: Opener, keys: dict[str, str]) -> Transcript:
    """A day in a store, through the protocol only: an agent writes and reads, is refused
    what only curators may do, and a curator reviews, publishes and reads the audit log."""
    step = Recorder()
    with open_as(keys["agent"]) as agent, open_as(keys["curator"]) as curator:
        step("agent is", lambda: agent.principal)
        step("curator is", lambda: curator.principal)

        # an agent's skill is approved by the policy at once
        made = step("remember", lambda: agent.remember(_skill("Run the tests", "make test")))
        record_id = made.record.id
        first = made.record.current_version_id
        step("get", lambda: agent.get(record_id))
        step("search", lambda: agent.search("run the tests", mode="keyword", scope="acme/app"))
        step("update", lambda: agent.update(
            record_id, ContentPatch(body="make test -n 2"), base_version_id=first,
            reason="two cores",
        ))  # fmt: skip
        step("stale update", lambda: agent.update(
            record_id, ContentPatch(body="make unit"), base_version_id=first
        ))  # fmt: skip
        step("history", lambda: agent.history(record_id))
        step("get version 1", lambda: agent.get(record_id, version=1))
        step("get both ways", lambda: agent.get(record_id, version=1, selector=VersionPin.head()))
        step("get missing", lambda: agent.get("rec_00000000000000000000000000"))
        step("resolve", lambda: agent.resolve(record_id))
        step("zero weight", lambda: agent.search("tests", weights={"keyword": 0, "vector": 0}))
        # only the best hit's title: with the vector weight at 0 the order is the keyword
        # signal's, whether or not the background indexer has embedded the new records yet
        step("one signal off", lambda: [h.title for h in agent.search(
            "run the tests", scope="acme/app", k=1, weights={"keyword": 1, "vector": 0}
        ).hits])  # fmt: skip
        step("too many hits", lambda: agent.timeline_search("tests", k=101))
        step("unknown kind", lambda: agent.remember(
            Content(kind="rumour", scope="acme/app", title="Heard it somewhere")
        ))  # fmt: skip

        # a belief waits for a curator
        queued = step("remember belief", lambda: agent.remember(
            Content(kind="belief", scope="acme/app", title="CI is flaky on Mondays",
                    body="three red builds in a row"),
            reason="seen twice",
        ))  # fmt: skip
        proposal_id = queued.proposal.id
        step("agent approves", lambda: agent.approve(proposal_id))
        step("agent archives", lambda: agent.archive(record_id))
        step("agent reads audit", lambda: agent.audit())
        step("agent publishes", lambda: agent.publish("acme/app"))
        step("agent's queue", lambda: agent.proposals())
        step("curator's queue", lambda: curator.proposals())
        step("one proposal", lambda: curator.proposal(proposal_id))
        step("approve", lambda: curator.approve(proposal_id, reason="checked the builds"))
        step("approve again", lambda: curator.approve(proposal_id))
        step("reject missing", lambda: curator.reject("prp_00000000000000000000000000"))

        # reads over what is now there
        step("list", lambda: agent.list_records(RecordQuery(scope="acme/*", limit=10)))
        step("retrieve", lambda: agent.retrieve("tests builds", mode="keyword", max_tokens=500))
        step("read context", lambda: agent.read_context(ReadContextRequest(
            scope="acme/app", query="tests", mode="keyword", selector=VersionPin.head()
        )))  # fmt: skip
        step("validate", lambda: agent.validate([record_id, "rec_00000000000000000000000000"]))
        step("supersede", lambda: curator.supersede(
            record_id, content=_skill("Run the unit tests", "make unit")
        ))  # fmt: skip
        step("supersede both", lambda: agent.supersede(record_id, by=record_id, content=None))
        step("supersede neither", lambda: agent.supersede(record_id))
        step("resolve superseded", lambda: agent.resolve(record_id))
        step("publish", lambda: curator.publish("acme/app", name="march"))
        step("published", lambda: agent.get(record_id, selector=VersionPin.published()))
        step("archive", lambda: curator.archive(record_id, reason="replaced"))
        step("restore", lambda: curator.restore(record_id))
        step("audit", lambda: curator.audit(AuditQuery(limit=100)))
        step("audit by agent", lambda: curator.audit(AuditQuery(actor="agent")))
        step("agent's status", lambda: agent.status())
        step("curator's status", lambda: curator.status())

        # the timeline
        step("append", lambda: agent.append_events(_events()))
        step("append again", lambda: agent.append_events(_events()))
        step("events", lambda: agent.events(scope="acme/*", session_id="s-1"))
        step("events after", lambda: agent.events(
            scope="acme/app", after=(T0, "evt-0"), since=T0 - timedelta(days=1)
        ))  # fmt: skip
        # once rolled up and embedded (both happen in the background): a search before the
        # vectors are made ranks by keywords alone, on one side and not the other
        step("timeline search", lambda: _until(lambda: _embedded(
            agent.timeline_search("staging deploy", scope="acme/*")
        )))  # fmt: skip

        # the decision graph
        decision = step("remember decision", lambda: agent.remember(Content(
            # the built-in graph roles read the regions
            kind="decision", scope="acme/region_emea", title="Run CI on two cores",
            body="the runners have two cores", metadata={"impact": "low"},
        )))  # fmt: skip
        why = WhyRequest(anchor=decision.record.id, question="why two cores?")
        step("why", lambda: agent.why(why))
        step("why as a lower role", lambda: agent.why(why, role="staff", mode="query"))
        step("why as a higher role", lambda: agent.why(why, role="director"))
        step("why, every label", lambda: curator.why(why))
        step("why, namespaces", lambda: curator.why(why, namespaces=["public", "internal"]))
        step("why missing", lambda: agent.why(WhyRequest(anchor="no-such-decision")))
    return step.steps


def _keys(curator: str, agent: str) -> dict[str, str]:
    return {"curator": curator, "agent": agent}


def test_local_and_remote_tell_the_same_story(local_store: LocalStore, server: Live) -> None:
    local = scenario(
        lambda key: cairn.open(local_store.folder, key=key),
        _keys(local_store.curator, local_store.agent),
    )
    remote = scenario(
        lambda key: cairn.connect(server.url, key), _keys(server.curator, server.agent)
    )
    # the scenario did what it says (so that two broken runs cannot agree on nothing)
    said = dict(local)
    assert said["remember"]["decision"] == "approve"
    assert said["stale update"]["raised"] == "StaleProposal"
    assert said["get missing"]["raised"] == "NotFound"
    assert said["agent approves"]["raised"] == "PermissionDenied"
    assert said["approve"]["decision"] == "approve"
    assert said["approve again"]["raised"] in {"Conflict", "InvalidTransition", "StaleProposal"}
    assert said["get both ways"]["raised"] == "InvalidInput"
    assert said["why, every label"]["raised"] == "InvalidInput"
    assert said["zero weight"]["raised"] == said["too many hits"]["raised"] == "InvalidInput"
    assert said["zero weight"]["message"] == "every weight used by hybrid search is 0"
    assert said["one signal off"] == ["Run the tests"]  # a weight of 0 leaves the other signal
    assert said["timeline search"], "the timeline was never rolled up"
    assert said["events"] and len(said["events"]) == 2
    assert "answer" in said["why"]

    assert [name for name, _ in local] == [name for name, _ in remote]
    for (name, mine), (_, theirs) in zip(
        normalised(local, {}), normalised(remote, {}), strict=True
    ):
        assert mine == theirs, (name, _diff(mine, theirs))
