"""Every lifecycle move works for its actor; every other move is refused."""

from __future__ import annotations

import itertools

import pytest

from cairn.errors import InvalidTransition, PermissionDenied
from cairn.governance.lifecycle import TRANSITIONS, Actor
from cairn.memory import Memory
from cairn.model import SYSTEM_PRINCIPAL, AuditQuery, Principal, Status
from cairn.store.base import Store
from tests.conftest import content

SPEC_002_MOVES = {
    (Status.DRAFT, Status.ACTIVE),
    (Status.DRAFT, Status.REJECTED),
    (Status.ACTIVE, Status.STALE),
    (Status.STALE, Status.ACTIVE),
    (Status.ACTIVE, Status.ARCHIVED),
    (Status.STALE, Status.ARCHIVED),
    (Status.REJECTED, Status.ARCHIVED),
    (Status.DRAFT, Status.ARCHIVED),
    # cairn's one addition: archive is soft and a curator can undo it
    (Status.ARCHIVED, Status.ACTIVE),
}


def _record_in(memory: Memory, store: Store, status: Status, curator: Principal, n: int) -> str:
    """A record brought into ``status`` through legal moves only."""
    draft = status in (Status.DRAFT, Status.REJECTED)
    outcome = memory.remember(
        content(f"record {n} for {status.value}"), principal=curator, draft=draft
    )
    assert outcome.record is not None
    record_id = outcome.record.id
    if status is Status.REJECTED:
        memory.transition(record_id, Status.REJECTED, principal=curator)
    elif status is Status.STALE:
        memory.transition(record_id, Status.STALE, principal=SYSTEM_PRINCIPAL)
    elif status is Status.ARCHIVED:
        memory.archive(record_id, principal=curator)
    assert store.get_record(record_id).status is status  # type: ignore[union-attr]
    return record_id


def test_the_table_is_exactly_spec_002() -> None:
    assert set(TRANSITIONS) == SPEC_002_MOVES


@pytest.mark.parametrize(("source", "target"), sorted(SPEC_002_MOVES))
def test_allowed_move_works_for_its_actor(
    memory: Memory, curator: Principal, source: Status, target: Status, store: Store
) -> None:
    record_id = _record_in(memory, store, source, curator, 0)
    actor = curator if Actor.CURATOR in TRANSITIONS[(source, target)] else SYSTEM_PRINCIPAL
    outcome = memory.transition(record_id, target, principal=actor)
    assert outcome.record is not None and outcome.record.status is target
    assert store.get_record(record_id).status is target  # type: ignore[union-attr]
    last = store.list_audit(AuditQuery(limit=100_000))[-1]
    assert (last.from_status, last.to_status) == (source.value, target.value)


@pytest.mark.parametrize(
    ("source", "target"),
    [pair for pair in itertools.product(Status, Status) if pair not in SPEC_002_MOVES],
)
def test_every_other_move_is_refused_and_changes_nothing(
    memory: Memory, curator: Principal, source: Status, target: Status, store: Store
) -> None:
    record_id = _record_in(memory, store, source, curator, 1)
    before = store.count_audit()
    for actor in (curator, SYSTEM_PRINCIPAL):
        with pytest.raises(InvalidTransition) as info:
            memory.transition(record_id, target, principal=actor)
        assert info.value.field == "to"
    assert store.get_record(record_id).status is source  # type: ignore[union-attr]
    assert store.count_audit() == before


@pytest.mark.parametrize(
    ("source", "target"),
    [pair for pair, actors in TRANSITIONS.items() if actors == frozenset({Actor.SYSTEM})],
)
def test_system_only_moves_are_refused_to_curators(
    memory: Memory, curator: Principal, source: Status, target: Status, store: Store
) -> None:
    record_id = _record_in(memory, store, source, curator, 2)
    with pytest.raises(PermissionDenied):
        memory.transition(record_id, target, principal=curator)
    assert store.get_record(record_id).status is source  # type: ignore[union-attr]


@pytest.mark.parametrize(("source", "target"), sorted(SPEC_002_MOVES))
def test_agents_make_no_lifecycle_move(
    memory: Memory,
    curator: Principal,
    agent: Principal,
    source: Status,
    target: Status,
    store: Store,
) -> None:
    record_id = _record_in(memory, store, source, curator, 3)
    with pytest.raises(PermissionDenied):
        memory.transition(record_id, target, principal=agent)
    assert store.get_record(record_id).status is source  # type: ignore[union-attr]
