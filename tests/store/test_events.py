"""The event log (both stores): appended once by id, read in source-time order, trimmed by
permission, followed by indexers through the outbox, never rewritten."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.errors import Conflict, InvalidInput, PermissionDenied
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import (
    Acl,
    AuditQuery,
    EventDraft,
    EventRole,
    Principal,
    PrincipalKind,
    Sensitivity,
)
from cairn.store.base import EventFilter, Store
from cairn.store.pg_migrations import PG_MIGRATIONS
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.store.legacy import rewind_events_by_id_postgres, rewind_events_by_id_sqlite

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
READER = Principal(id="rita", kind=PrincipalKind.HUMAN, roles=("reader",), scopes=("acme/*",))
OUTSIDER = Principal(id="oz", kind=PrincipalKind.HUMAN, roles=("reader",), scopes=("other/*",))


def _event(event_id: str, minute: int, **changes: object) -> EventDraft:
    fields: dict[str, object] = {
        "event_id": event_id,
        "ts": T0 + timedelta(minutes=minute),
        "session_id": "s1",
        "scope": "acme/app",
        "agent": "claude-code",
        "role": EventRole.USER,
        "kind": "user_message",
        "text": f"message {event_id}",
    }
    fields.update(changes)
    return EventDraft.model_validate(fields)


def _ids(memory: Memory, principal: Principal = READER, **kw: object) -> list[str]:
    return [e.event_id for e in memory.events(principal=principal, **kw)]  # type: ignore[arg-type]


def test_append_is_idempotent_and_ordered_by_source_time(memory: Memory) -> None:
    first = memory.append_events([_event("e3", 3), _event("e1", 1)], principal=AGENT)
    assert set(first.stored) == {"e1", "e3"} and first.duplicates == ()
    again = memory.append_events([_event("e1", 1), _event("e2", 2)], principal=AGENT)
    assert again.stored == ("e2",) and again.duplicates == ("e1",)
    # arrival order was e3, e1, e2: reads follow the source time
    assert _ids(memory) == ["e1", "e2", "e3"]
    stored = memory.events(principal=READER)[0]
    assert stored.appended_by == "bot" and stored.text == "message e1"
    # one audit entry per batch that stored something
    appends = [a for a in memory.audit(AuditQuery(limit=100), principal=CURATOR)
               if a.action == "append"]  # fmt: skip
    assert [a.details["events"] for a in appends] == [2, 1]


def test_the_same_id_with_other_content_is_refused_and_nothing_is_written(
    memory: Memory,
) -> None:
    memory.append_events([_event("e1", 1)], principal=AGENT)
    with pytest.raises(Conflict, match="e1"):
        memory.append_events([_event("e2", 2), _event("e1", 1, text="rewritten")], principal=AGENT)
    with pytest.raises(Conflict):
        memory.append_events([_event("e9", 9), _event("e9", 9, text="other")], principal=AGENT)
    assert _ids(memory) == ["e1"]
    assert memory.events(principal=READER)[0].text == "message e1"


def test_events_are_read_only_where_the_reader_may(memory: Memory) -> None:
    memory.append_events(
        [_event("a", 1), _event("b", 2, session_id="s2"), _event("c", 3, scope="acme/web")],
        principal=AGENT,
    )
    assert _ids(memory, OUTSIDER) == []
    assert _ids(memory, READER, scope="acme/web") == ["c"]
    assert _ids(memory, READER, session_id="s2") == ["b"]
    assert _ids(memory, READER, since=T0 + timedelta(minutes=2)) == ["b", "c"]
    assert _ids(memory, READER, until=T0 + timedelta(minutes=2)) == ["a"]
    page = memory.events(principal=READER, limit=2)
    rest = memory.events(principal=READER, after=(page[-1].ts, page[-1].event_id))
    assert [e.event_id for e in page + rest] == ["a", "b", "c"]


def test_who_may_append(memory: Memory) -> None:
    with pytest.raises(PermissionDenied):
        memory.append_events([_event("x", 1)], principal=READER)  # no append role
    with pytest.raises(PermissionDenied):
        memory.append_events([_event("x", 1, scope="other/app")], principal=AGENT)
    with pytest.raises(InvalidInput):
        memory.append_events([], principal=AGENT)
    assert _ids(memory, CURATOR) == []


def test_the_outbox_follows_appends_in_commit_order(memory: Memory, store: Store) -> None:
    memory.append_events([_event("e2", 2), _event("e1", 1)], principal=AGENT)
    memory.append_events([_event("e0", 0), _event("e1", 1)], principal=AGENT)
    pending = store.outbox("timeline")
    assert [e.event_id for _, e in pending] == ["e1", "e2", "e0"]  # each batch by time
    positions = [p for p, _ in pending]
    assert positions == sorted(positions) and len(set(positions)) == 3
    store.ack_outbox("timeline", positions[1])
    assert [e.event_id for _, e in store.outbox("timeline")] == ["e0"]
    store.ack_outbox("timeline", positions[0])  # a late acknowledgement never moves back
    assert [e.event_id for _, e in store.outbox("timeline")] == ["e0"]
    assert len(store.outbox("another")) == 3


_batches = itertools.count()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 12), st.integers(0, 1000)), min_size=1, max_size=8),
        min_size=1,
        max_size=6,
    )
)
def test_random_batches_with_repeats_store_each_event_exactly_once(
    memory: Memory, batches: list[list[tuple[int, int]]], store: Store
) -> None:
    """Batches drawn with repeats, in any order: every id stored once, with its first
    content; reads in source-time order; each stored event in the outbox exactly once."""
    run = next(_batches)
    scope = f"acme/run{run}"
    minute_of: dict[int, int] = {}
    for batch in batches:
        drafts = []
        for number, minute in batch:
            minute_of.setdefault(number, minute)  # a repeat resends the same content
            drafts.append(_event(f"r{run}-{number}", minute_of[number], scope=scope))
        report = memory.append_events(drafts, principal=AGENT)
        assert set(report.stored).isdisjoint(report.duplicates)
    read = memory.events(principal=READER, scope=scope, limit=1000)
    assert sorted(e.event_id for e in read) == sorted(f"r{run}-{n}" for n in minute_of)
    assert [(e.ts, e.event_id) for e in read] == sorted((e.ts, e.event_id) for e in read)
    for event in read:
        assert event.ts == T0 + timedelta(minutes=minute_of[int(event.event_id.split("-")[1])])
    in_outbox = [e.event_id for _, e in store.outbox(f"check{run}", 10_000)
                 if e.scope == scope]  # fmt: skip
    assert sorted(in_outbox) == sorted(e.event_id for e in read)


def test_event_texts_cut_each_text_in_characters_in_the_database(
    memory: Memory, store: Store
) -> None:
    memory.append_events(
        [_event("e1", 1, text="é" * 10 + "x" * 10, metadata={"big": "m" * 1000}),
         _event("e2", 2, text="short"), _event("o1", 3, scope="other/x", text="theirs")],
        principal=CURATOR,
    )  # fmt: skip
    acl_ids = frozenset(row.id for row in store.acls())
    scope_ids = frozenset(i for i, s in store.scopes().items() if s == "acme/app")
    where = EventFilter(acl_ids=acl_ids, scope_ids=scope_ids)
    found = store.event_texts(where, limit=10, max_chars=12)
    assert [(e.event_id, e.text, e.session_id) for e in found] == [
        ("e1", "é" * 10 + "xx", "s1"), ("e2", "short", "s1"),
    ]  # fmt: skip
    after = store.event_texts(where, after=(found[0].ts, "e1"), limit=10, max_chars=12)
    assert [e.event_id for e in after] == ["e2"] and after[0].ts == T0 + timedelta(minutes=2)


# ---- an event is its scope's ---------------------------------------------------------------

WIDE = Principal(id="wide", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))


def test_an_event_is_identified_by_its_scope_and_id(memory: Memory) -> None:
    """The same id in a scope the appender may not read is another event: an id taken there
    neither refuses the appender's event nor tells it is taken (it answered "appended
    before with other content", and a producer could squat the ids another would use)."""
    memory.append_events([_event("e1", 1, scope="other/app", text="theirs")], principal=WIDE)
    taken = memory.append_events([_event("e1", 2, text="ours")], principal=AGENT)
    fresh = memory.append_events([_event("e9", 2, text="ours")], principal=AGENT)
    assert (taken.stored, taken.duplicates) == (("e1",), ())
    assert (fresh.stored, fresh.duplicates) == (("e9",), ())
    assert [e.text for e in memory.events(principal=READER)] == ["ours", "ours"]
    assert [e.text for e in memory.events(principal=OUTSIDER)] == ["theirs"]
    # within a scope, an id is still one event: sent again it is a duplicate, with other
    # content it is refused, in the batch or in the store
    again = memory.append_events([_event("e1", 2, text="ours")], principal=AGENT)
    assert (again.stored, again.duplicates) == ((), ("e1",))
    with pytest.raises(Conflict, match="e1"):
        memory.append_events([_event("e1", 3, text="rewritten")], principal=AGENT)
    with pytest.raises(Conflict, match="twice"):
        memory.append_events(
            [_event("e5", 1, text="a"), _event("e5", 1, text="b")], principal=AGENT
        )
    # the same id in two scopes in one batch: two events
    both = memory.append_events(
        [_event("e7", 4, scope="acme/app"), _event("e7", 4, scope="acme/web")], principal=WIDE
    )
    assert both.stored == ("e7", "e7")


def test_pages_across_scopes_keep_events_of_the_same_time_and_id(memory: Memory) -> None:
    """Two scopes may each hold an event with the same id at the same time: a page boundary
    between them loses neither (the position names the scope too)."""
    memory.append_events(
        [_event(f"e{n}", n, scope=scope) for n in range(3) for scope in ("acme/app", "acme/web")],
        principal=WIDE,
    )
    seen: list[tuple[str, str]] = []
    after = None
    while page := memory.events(principal=READER, after=after, limit=1):
        seen += [(e.event_id, e.scope) for e in page]
        after = (page[-1].ts, page[-1].event_id, page[-1].scope)
    assert seen == [(f"e{n}", s) for n in range(3) for s in ("acme/app", "acme/web")]


# The migration that identifies events by scope and id: it and every later one are
# rewound below (later ones re-run; they are idempotent).
SQLITE_EVENTS_BY_SCOPE = 11
PG_EVENTS_BY_SCOPE = [m.name for m in PG_MIGRATIONS].index("events_by_scope") + 1


def test_an_older_store_identifies_its_events_by_scope_once_upgraded(
    store: Store, tmp_path: Path
) -> None:
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
    memory.append_events([_event("e1", 1), _event("e2", 2)], principal=AGENT)
    lag = store.outbox_lag("timeline")
    if isinstance(store, SqliteStore):
        with store._write_txn() as conn:
            rewind_events_by_id_sqlite(conn)
            conn.execute(f"DELETE FROM schema_migrations WHERE version >= {SQLITE_EVENTS_BY_SCOPE}")
        store.close()
        reopened: Store = SqliteStore(store.path)
    else:
        assert isinstance(store, PostgresStore)
        url = store.url
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            rewind_events_by_id_postgres(conn)
            conn.execute(
                f"DELETE FROM cairn.schema_migrations WHERE version >= {PG_EVENTS_BY_SCOPE}"
            )
        reopened = PostgresStore(url)
    try:
        upgraded = Memory(reopened, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
        assert reopened.outbox_lag("timeline") == lag
        assert _ids(upgraded) == ["e1", "e2"]
        report = upgraded.append_events([_event("e1", 1, scope="other/app")], principal=WIDE)
        assert report.stored == ("e1",)
        with pytest.raises(Conflict):
            upgraded.append_events([_event("e2", 3)], principal=AGENT)
        assert reopened.outbox_lag("timeline") == lag + 1
    finally:
        reopened.close()


def test_appending_never_tells_what_an_unreadable_event_holds(store: Store, tmp_path: Path) -> None:
    # events are read under a confidential ACL: an agent without that label may append but
    # not read, and its appends must not confirm a guess at someone else's event
    policy = parse_policy(DEFAULT_POLICY_YAML)
    policy = policy.model_copy(
        update={"events": policy.events.model_copy(
            update={"acl": Acl(labels=("confidential",), sensitivity=Sensitivity.HIGH)}
        )}
    )  # fmt: skip
    memory = Memory(store, policy, root=tmp_path)
    insider = Principal(
        id="ina", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",),
        labels=("confidential",), sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    secret = _event("deal", 1, text="the acquisition target is Globex")
    memory.append_events([secret], principal=insider)
    assert _ids(memory, AGENT) == []  # the agent may not read it
    answers = []
    for guess in ("the acquisition target is Initech", "the acquisition target is Globex"):
        with pytest.raises(Conflict) as caught:
            memory.append_events([_event("deal", 1, text=guess)], principal=AGENT)
        answers.append(str(caught.value))
    assert answers[0] == answers[1]  # a right guess and a wrong one get the same answer
    assert "Globex" not in answers[1]
    # its own events stay idempotent, read or not
    memory.append_events([_event("mine", 2)], principal=AGENT)
    again = memory.append_events([_event("mine", 2)], principal=AGENT)
    assert again.duplicates == ("mine",)
    with pytest.raises(Conflict, match="other content"):
        memory.append_events([_event("mine", 2, text="rewritten")], principal=AGENT)
    # the insider, who reads it, still gets the usual answers
    assert memory.append_events([secret], principal=insider).duplicates == ("deal",)
