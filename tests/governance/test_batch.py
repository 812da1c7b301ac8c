"""The batch write path (both stores): many records in one governed transaction, each
checked on its own, audited by one entry naming every record."""

from __future__ import annotations

import pytest

from cairn.errors import InvalidInput, PermissionDenied
from cairn.memory import Memory
from cairn.model import AuditQuery, Content, Decision, Principal, PrincipalKind
from tests.factories import CURATOR

AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))


def _fact(i: int, **fields: object) -> Content:
    base: dict[str, object] = {
        "kind": "episode",  # the default policy approves an agent's episodes
        "scope": "acme/app",
        "title": f"Batch fact {i}",
        "body": f"Batch fact number {i}.",
    }
    return Content.model_validate(base | fields)


def _audit(memory: Memory) -> list:  # type: ignore[type-arg]
    return memory.audit(AuditQuery(limit=10_000), principal=CURATOR)


def test_a_batch_is_one_transaction_audited_once(memory: Memory) -> None:
    existing = memory.remember(_fact(0), principal=CURATOR).record
    assert existing is not None
    before = len(_audit(memory))
    contents = [_fact(i) for i in range(1, 40)]
    contents += [_fact(0), _fact(5), _fact(99, kind="belief")]  # 2 duplicates, 1 to review
    outcomes = memory.store_many(contents, principal=AGENT)
    decisions = [o.decision for o in outcomes]
    assert decisions.count(Decision.APPROVE) == 39
    assert decisions[39:] == [Decision.REJECT, Decision.REJECT, Decision.QUEUE]
    made = [o.record.id for o in outcomes if o.record is not None]
    entries = _audit(memory)[before:]
    assert len(entries) == 1, "one audit entry for the whole batch"
    (entry,) = entries
    assert entry.action == "batch" and entry.actor == "bot"
    assert entry.details["records"] == made
    assert entry.details["decisions"] == {"approve": 39, "reject": 2, "queue": 1}
    # a record's audit trail finds the batch that made it
    found = memory.audit(AuditQuery(subject_id=made[7], limit=10), principal=CURATOR)
    assert [e.id for e in found] == [entry.id]
    # keyword search sees the batch at once (vectors follow in the background)
    hits = memory.search("Batch fact number 17", principal=AGENT, mode="keyword")
    assert made[16] in {hit.record_id for hit in hits.hits}


def test_a_refused_caller_writes_nothing(memory: Memory) -> None:
    before = len(_audit(memory))
    with pytest.raises(PermissionDenied):
        memory.store_many([_fact(1), _fact(2, scope="secret/vault")], principal=AGENT)
    with pytest.raises(InvalidInput):
        memory.store_many([_fact(3), _fact(4, kind="no-such-kind")], principal=AGENT)
    with pytest.raises(InvalidInput):
        memory.store_many([_fact(5)] * 10_001, principal=AGENT)
    assert len(_audit(memory)) == before
    assert memory.search("Batch fact", principal=CURATOR, mode="keyword").hits == ()
