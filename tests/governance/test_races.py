"""Two writers at once: a change that another commits between this one's checks and its own
commit is refused (409) instead of committed on what it read, or, where the rival stored a
copy of its content, decided again as if it had come second. Each race is played without
threads: the store's commit lets the rival write go first, then commits the first one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from cairn.errors import Conflict, CopiedMeanwhile, DuplicateContent
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, PrincipalKind, RecordQuery, Status, Verdict
from cairn.store.base import ChangeSet


def _fact(title: str, **fields: Any) -> Content:
    return Content(kind="fact", scope="acme/app", title=title, body=f"{title}. Details.", **fields)


def _create(memory: Memory, curator: Principal, title: str) -> str:
    outcome = memory.remember(_fact(title), principal=curator)
    assert outcome.record is not None
    return outcome.record.id


def _titles(memory: Memory, curator: Principal) -> list[str]:
    """The titles of every record stored, in id order."""
    return [r.content.title for r in memory.list_records(RecordQuery(), principal=curator)]


def _with_rivals_first(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, *rivals: Callable[[], object]
) -> None:
    """Each of the next commits (a rival's own aside) lets one of ``rivals`` (a whole verb,
    with its own commit) go first, in order."""
    store = memory._store
    commit = store.commit
    pending = list(reversed(rivals))
    running: list[bool] = []

    def commit_after_a_rival(change_sets: Sequence[ChangeSet]) -> Any:
        if pending and not running:
            running.append(True)
            try:
                pending.pop()()
            finally:
                running.clear()
        return commit(change_sets)

    monkeypatch.setattr(store, "commit", commit_after_a_rival)


def test_opposite_supersessions_at_once_make_no_cycle(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _create(memory, curator, "Plan A"), _create(memory, curator, "Plan B")
    _with_rivals_first(memory, monkeypatch, lambda: memory.supersede(b, by=a, principal=curator))
    with pytest.raises(Conflict, match="superseded meanwhile"):
        memory.supersede(a, by=b, principal=curator)
    assert memory.get(b, principal=curator).record.superseded_by == a
    assert memory.get(a, principal=curator).record.superseded_by is None
    # and the one still current is found
    assert [hit.record_id for hit in memory.search("Plan", principal=curator).hits] == [a]


def test_a_record_is_superseded_once_even_by_two_at_once(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _create(memory, curator, "The old way")
    _with_rivals_first(
        memory,
        monkeypatch,
        lambda: memory.supersede(old, content=_fact("New way one"), principal=curator),
    )
    with pytest.raises(Conflict, match="superseded meanwhile"):
        memory.supersede(old, content=_fact("New way two"), principal=curator)
    assert set(_titles(memory, curator)) == {"The old way", "New way one"}


def test_a_record_archived_meanwhile_is_not_published(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _create(memory, curator, "Release checklist")
    _with_rivals_first(memory, monkeypatch, lambda: memory.archive(record, principal=curator))
    with pytest.raises(Conflict, match="is now archived"):
        memory.publish("acme/app", principal=curator, record_ids=[record])
    assert memory.published_baseline_id("acme/app", principal=curator) is None
    assert memory.get(record, principal=curator).record.status is Status.ARCHIVED


def test_the_same_content_stored_meanwhile_is_refused_as_a_duplicate_not_stored_twice(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    rival: list[str] = []
    _with_rivals_first(memory, monkeypatch, lambda: rival.append(_create(memory, curator, "Wait")))
    with pytest.raises(DuplicateContent) as refused:
        memory.remember(_fact("Wait"), principal=curator)
    # decided again on the store as it now is: what arriving second would have met
    assert refused.value.details["existing_record_id"] == rival[0]
    assert _titles(memory, curator) == ["Wait"]


def test_a_batch_with_content_stored_meanwhile_is_decided_again_item_by_item(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_rivals_first(memory, monkeypatch, lambda: _create(memory, curator, "One"))
    outcomes = memory.store_many([_fact("One"), _fact("Two")], principal=curator)
    assert [(o.decision, o.proposal.rule == "duplicate_content") for o in outcomes] == [
        (Verdict.REJECT, True),
        (Verdict.APPROVE, False),
    ]
    assert _titles(memory, curator) == ["One", "Two"]


def test_an_approval_meeting_a_copy_stored_meanwhile_is_refused_as_a_duplicate(
    memory: Memory, curator: Principal, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued = memory.remember(_fact("Cache the index"), principal=agent)
    assert queued.decision is Verdict.QUEUE
    _with_rivals_first(memory, monkeypatch, lambda: _create(memory, curator, "Cache the index"))
    with pytest.raises(DuplicateContent):
        memory.decide(queued.proposal.id, approve=True, principal=curator)
    with pytest.raises(DuplicateContent):
        memory.approve_many([queued.proposal.id], principal=curator, reason="all good")
    assert _titles(memory, curator) == ["Cache the index"]


def test_a_copy_the_writer_may_not_read_changes_nothing_for_it(
    memory: Memory, curator: Principal, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy stored meanwhile where the agent may not read it: the write is stored as it
    would be had it come second, with no refusal that would tell the agent the copy exists."""
    hidden = Acl(roles=("curator",))
    made: list[str] = []

    def rival() -> None:
        outcome = memory.remember(_fact("Shared words", acl=hidden), principal=curator)
        assert outcome.record is not None
        made.append(outcome.record.id)

    _with_rivals_first(memory, monkeypatch, rival)
    stored = memory.remember(_fact("Shared words", acl=hidden), principal=agent, draft=True)
    assert made and stored.record is not None and stored.record.id != made[0]
    assert made[0] not in stored.model_dump_json()
    # the same in a batch
    _with_rivals_first(
        memory,
        monkeypatch,
        lambda: memory.remember(_fact("Other words", acl=hidden), principal=curator),
    )
    hidden_batch = memory.store_many(
        [_fact("Other words", acl=hidden), _fact("More words", acl=hidden)],
        principal=agent,
        draft=True,
    )
    assert [o.decision for o in hidden_batch] == [Verdict.APPROVE, Verdict.APPROVE]


def test_copies_that_keep_arriving_refuse_the_write_without_naming_them(
    memory: Memory, curator: Principal, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = Principal(id="ops", kind=PrincipalKind.HUMAN, roles=("ops",), scopes=("acme/*",))
    made: list[str] = []

    def rival(writer: Principal) -> Callable[[], None]:
        # each copy readable by its writer's role only: neither is a duplicate for the other
        def store_a_copy() -> None:
            acl = Acl(roles=writer.roles)
            outcome = memory.remember(_fact("Again", acl=acl), principal=writer, draft=True)
            assert outcome.record is not None
            made.append(outcome.record.id)

        return store_a_copy

    _with_rivals_first(memory, monkeypatch, rival(curator), rival(ops))
    with pytest.raises(CopiedMeanwhile, match="same content was stored in acme/app meanwhile") as e:
        memory.remember(_fact("Again", acl=Acl(roles=("curator",))), principal=agent, draft=True)
    said = f"{e.value} {e.value.to_dict()}"
    assert len(made) == 2 and not any(record_id in said for record_id in made)
    assert _titles(memory, curator) == ["Again", "Again"]
