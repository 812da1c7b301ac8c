"""Two writers at once: a change that another commits between this one's checks and its own
commit is refused (409) instead of committed on what it read. Each race is played without
threads: the store's commit lets the rival write go first, then commits the first one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from cairn.errors import Conflict
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, RecordQuery, Status
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


def _with_rival_first(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, rival: Callable[[], object]
) -> None:
    """The next commit lets ``rival`` (a whole verb, with its own commit) go first."""
    store = memory._store
    commit = store.commit
    pending = [rival]

    def commit_after_the_rival(change_sets: Sequence[ChangeSet]) -> Any:
        if pending:
            pending.pop()()
        return commit(change_sets)

    monkeypatch.setattr(store, "commit", commit_after_the_rival)


def test_opposite_supersessions_at_once_make_no_cycle(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _create(memory, curator, "Plan A"), _create(memory, curator, "Plan B")
    _with_rival_first(memory, monkeypatch, lambda: memory.supersede(b, by=a, principal=curator))
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
    _with_rival_first(
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
    _with_rival_first(memory, monkeypatch, lambda: memory.archive(record, principal=curator))
    with pytest.raises(Conflict, match="is now archived"):
        memory.publish("acme/app", principal=curator, record_ids=[record])
    assert memory.published_baseline_id("acme/app", principal=curator) is None
    assert memory.get(record, principal=curator).record.status is Status.ARCHIVED


def test_the_same_content_stored_meanwhile_is_refused_not_stored_twice(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_rival_first(memory, monkeypatch, lambda: _create(memory, curator, "Deploys wait"))
    with pytest.raises(Conflict, match="same content was stored in acme/app meanwhile"):
        memory.remember(_fact("Deploys wait"), principal=curator)
    assert _titles(memory, curator) == ["Deploys wait"]


def test_a_batch_with_content_stored_meanwhile_stores_nothing(
    memory: Memory, curator: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_rival_first(memory, monkeypatch, lambda: _create(memory, curator, "One"))
    with pytest.raises(Conflict, match="meanwhile"):
        memory.store_many([_fact("One"), _fact("Two")], principal=curator)
    assert _titles(memory, curator) == ["One"]


def test_a_copy_the_writer_may_not_read_is_never_named(
    memory: Memory, curator: Principal, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy stored meanwhile where the agent may not read it refuses the agent's write
    all the same (it cannot be told from a readable one when it commits), without naming
    it; sent again, the write is stored, as the check finds nothing the agent may read."""
    hidden = Acl(roles=("curator",))
    made: list[str] = []

    def rival() -> None:
        outcome = memory.remember(_fact("Shared words", acl=hidden), principal=curator)
        assert outcome.record is not None
        made.append(outcome.record.id)

    _with_rival_first(memory, monkeypatch, rival)
    with pytest.raises(Conflict) as refused:
        memory.remember(_fact("Shared words", acl=hidden), principal=agent, draft=True)
    assert made and made[0] not in str(refused.value)
    again = memory.remember(_fact("Shared words", acl=hidden), principal=agent, draft=True)
    assert again.record is not None and again.record.id != made[0]
