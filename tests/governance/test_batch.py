"""The batch write path (both stores): many records in one governed transaction, each
checked on its own, audited by one entry naming every record."""

from __future__ import annotations

import pytest

from cairn.errors import Conflict, InvalidInput, PermissionDenied
from cairn.memory import Memory
from cairn.model import AuditQuery, Content, Principal, PrincipalKind, Verdict
from cairn.retrieval.chunking import chunks_for
from cairn.store.base import Store
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
    assert decisions.count(Verdict.APPROVE) == 39
    assert decisions[39:] == [Verdict.REJECT, Verdict.REJECT, Verdict.QUEUE]
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


# ---- what the batch path must never do: lose a record, half-write, skip a check ------------

CURATOR_OF_ACME = Principal(
    id="cora", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("acme/*",), labels=("*",)
)


def _snapshot(store: Store) -> tuple[object, ...]:
    """Every table a batch writes, counted."""
    return (
        store.counts(),
        store.chunk_count(),
        len(store.list_edges(None, limit=100_000)),
        len(store.list_path_links()),
    )


def _varied(n: int) -> list[Content]:
    """Records over three scopes and the kinds and metadata the default policy tells apart."""
    made = []
    for i in range(n):
        kind, metadata = [
            ("episode", {}),
            ("fact", {}),
            ("belief", {}),
            ("decision", {"impact": "low"}),
            ("decision", {"impact": "high"}),
            ("decision", {"impact": ["low"]}),  # not a value the rule lists: no rule fits
            ("skill", {"team": "ops"}),
        ][i % 7]
        made.append(_fact(i, kind=kind, metadata=metadata, scope=f"acme/team{i % 3}"))
    return made


def test_every_record_of_a_batch_is_stored_whole(memory: Memory, store: Store) -> None:
    contents = [
        _fact(i, scope=f"acme/team{i % 4}", body=f"Long body {i}. " + "words " * (i % 300))
        for i in range(400)
    ]
    outcomes = memory.store_many(contents, principal=CURATOR)
    assert [o.decision for o in outcomes] == [Verdict.APPROVE] * 400
    records = {o.record.id for o in outcomes if o.record is not None}
    assert len(records) == 400
    assert store.counts()["records"] == 400 and store.counts()["versions"] == 400
    stored = store.get_records(sorted(records))
    for content, outcome in zip(contents, outcomes, strict=True):
        assert outcome.record is not None and outcome.version is not None
        record = stored[outcome.record.id]
        # what was sent, stamped (a human curator's record has a human origin)
        assert record.content == content.model_copy(update={"origin": "human"})
        assert record.current_version_id == outcome.version.id
        proposal = store.get_proposal(outcome.proposal.id)
        assert proposal is not None and proposal.status.value == "accepted"
        assert proposal.result_record_id == record.id
        (accepted_as,) = store.list_edges(None, node_id=outcome.proposal.id)
        assert (accepted_as.type, accepted_as.dst) == ("ACCEPTED_AS", outcome.version.id)
    # every record is searchable at once, and only once
    for i in (0, 133, 399):
        hits = memory.search(f"Batch fact number {i}.", principal=CURATOR, mode="keyword")
        assert outcomes[i].record is not None
        assert hits.hits[0].record_id == outcomes[i].record.id
    # long bodies are cut in several chunks: every one of them is indexed
    assert store.chunk_count() == sum(len(chunks_for(c)) for c in contents) > 400


def test_a_batch_decides_each_record_as_one_at_a_time_would(memory: Memory, store: object) -> None:
    """The policy, the stamping and the duplicate check run per record: a batch's decisions
    are the ones ``remember`` makes for the same contents, record by record."""
    contents = _varied(42)
    batch = memory.store_many(contents, principal=AGENT)
    alone = []
    for content in contents:  # the same contents one at a time, in another set of scopes
        moved = content.model_copy(update={"scope": content.scope.replace("acme/", "acme/x-")})
        alone.append(memory.remember(moved, principal=AGENT))
    assert [o.decision for o in batch] == [o.decision for o in alone]
    assert [o.proposal.rule for o in batch] == [o.proposal.rule for o in alone]
    assert [o.proposal.reason for o in batch] == [o.proposal.reason for o in alone]
    assert {o.decision for o in batch} == {Verdict.APPROVE, Verdict.QUEUE}
    for outcome in batch:
        stored = store.get_proposal(outcome.proposal.id)
        assert stored == outcome.proposal  # queued ones wait for a curator, as stored


def test_a_rejecting_rule_rejects_in_a_batch(tmp_path: object, store: object) -> None:
    from cairn.governance.policy import parse_policy

    policy = parse_policy(
        "rules:\n"
        "  - {name: no-skills, match: {kind: skill}, decision: reject, reason: not here}\n"
        "  - {name: the-rest, match: {}, decision: approve}\n"
    )
    memory = Memory(store, policy)  # type: ignore[arg-type]
    outcomes = memory.store_many([_fact(1), _fact(2, kind="skill"), _fact(3)], principal=AGENT)
    assert [o.decision for o in outcomes] == [Verdict.APPROVE, Verdict.REJECT, Verdict.APPROVE]
    assert outcomes[1].proposal.rule == "no-skills" and outcomes[1].feedback == "not here"
    assert outcomes[1].record is None


def test_agents_cannot_vouch_for_a_batch(memory: Memory) -> None:
    """Origin and confidence are stamped per record, as for one record."""
    claimed = _fact(1, origin="human", confidence="verified")
    (outcome,) = memory.store_many([claimed], principal=AGENT)
    assert outcome.record is not None
    assert outcome.record.content.origin.value == "agent"
    assert outcome.record.content.confidence.value == "supported"


def test_a_duplicate_the_writer_cannot_read_is_not_named(memory: Memory) -> None:
    """The duplicate check reads only what the writer may read: a batch is no oracle."""
    hidden = _fact(1, acl={"roles": ["curator"]})
    memory.remember(hidden, principal=CURATOR)
    outcomes = memory.store_many([hidden, _fact(2)], principal=AGENT)
    assert [o.decision for o in outcomes] == [Verdict.APPROVE, Verdict.APPROVE]
    # ... while one it may read is named, and so is a record earlier in the same batch
    outcomes = memory.store_many([_fact(2), _fact(3), _fact(3)], principal=AGENT)
    assert [o.decision for o in outcomes] == [Verdict.REJECT, Verdict.APPROVE, Verdict.REJECT]
    assert outcomes[2].feedback is not None and outcomes[1].record is not None
    assert outcomes[1].record.id in outcomes[2].feedback


def test_a_refusal_anywhere_in_a_batch_writes_nothing(memory: Memory, store: Store) -> None:
    memory.remember(_fact(0), principal=CURATOR)
    before = _snapshot(store)
    late_refusals = [
        (AGENT, [*_varied(300), _fact(301, scope="other/place")], PermissionDenied),
        (CURATOR_OF_ACME, [*_varied(300), _fact(301, scope="elsewhere")], PermissionDenied),
        (AGENT, [*_varied(300), _fact(301, kind="unknown-kind")], InvalidInput),
    ]
    for principal, contents, error in late_refusals:
        with pytest.raises(error):
            memory.store_many(contents, principal=principal)
        assert _snapshot(store) == before


def test_a_batch_failing_inside_its_transaction_leaves_nothing(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, store: Store
) -> None:
    """A commit that fails after most of the batch's rows went in (here: the last record's
    id is taken, so the store refuses it) leaves no trace of the batch."""
    existing = memory.remember(_fact(0), principal=CURATOR).record
    assert existing is not None
    before = _snapshot(store)
    # where an accepted change's record ids are minted
    from cairn.governance import gate_plans as gate_module

    ids = iter(range(10_000))
    real_new_id = gate_module.new_id

    def new_id(prefix: str) -> str:
        # the 250th record gets the stored record's id; every other id is a fresh one
        return existing.id if prefix == "rec" and next(ids) == 249 else real_new_id(prefix)

    monkeypatch.setattr(gate_module, "new_id", new_id)
    with pytest.raises(Conflict):
        memory.store_many([_fact(i) for i in range(1, 301)], principal=AGENT)
    assert _snapshot(store) == before
    found = memory.search("Batch fact number 5", principal=CURATOR, mode="keyword").hits
    assert {hit.record_id for hit in found} == {existing.id}


def test_the_audit_entry_says_what_the_batch_did(memory: Memory) -> None:
    memory.remember(_fact(0), principal=CURATOR)
    before = _audit(memory)
    contents = [*_varied(20), _fact(0)]  # the last one duplicates a stored record
    outcomes = memory.store_many(contents, principal=AGENT)
    after = _audit(memory)
    assert after[: len(before)] == before
    (entry,) = after[len(before) :]
    assert entry.seq == before[-1].seq + 1  # type: ignore[operator]
    made = [o.record.id for o in outcomes if o.record is not None]
    assert entry.details == {
        "op": "create",
        "records": made,
        "proposals": [o.proposal.id for o in outcomes],
        "decisions": {"approve": len(made), "queue": 20 - len(made), "reject": 1},
        "rules": {
            rule: sum(1 for o in outcomes if o.proposal.rule == rule)
            for rule in dict.fromkeys(o.proposal.rule for o in outcomes)
        },
    }
    assert entry.actor == AGENT.id and entry.actor_roles == AGENT.roles
    for record_id in made:
        found = memory.audit(AuditQuery(subject_id=record_id, limit=10), principal=CURATOR)
        assert [e.id for e in found] == [entry.id]
