"""Bulk approval (one reason, one transaction) and the review queue's filters."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cairn.errors import Conflict, InvalidInput, PermissionDenied, StaleProposal
from cairn.memory import Memory
from cairn.model import (
    AuditQuery,
    ContentPatch,
    Principal,
    ProposalFilter,
    ProposalStatus,
    Status,
    utcnow,
)
from cairn.store.base import Store
from tests.conftest import content


def _queued(memory: Memory, agent: Principal, title: str, **fields: object) -> str:
    outcome = memory.remember(content(title, kind="belief", **fields), principal=agent)
    assert outcome.proposal.status is ProposalStatus.PENDING
    return outcome.proposal.id


def test_approve_many_approves_each_with_one_reason_and_audits_each(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    ids = [_queued(memory, agent, f"Belief number {n}") for n in range(3)]
    outcomes = memory.approve_many(ids, principal=curator, reason="triaged together")
    assert [o.proposal.id for o in outcomes] == ids
    assert all(o.record is not None and o.record.status is Status.ACTIVE for o in outcomes)
    entries = memory.audit(AuditQuery(action="approve"), principal=curator)
    assert {e.proposal_id for e in entries} == set(ids)
    assert {e.reason for e in entries} == {"triaged together"}
    assert all(e.details.get("bulk") is True for e in entries)
    assert memory.proposals(principal=curator) == []


def test_one_that_cannot_be_approved_refuses_them_all(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    base = memory.remember(content("A fact to edit", kind="fact"), principal=curator)
    assert base.record is not None
    record_id = base.record.id
    stale = memory.update(record_id, ContentPatch(body="agent edit"), principal=agent).proposal.id
    fresh = _queued(memory, agent, "An innocent belief")
    memory.update(record_id, ContentPatch(body="curator edit"), principal=curator)
    audit_before = store.count_audit()
    with pytest.raises(StaleProposal):
        memory.approve_many([fresh, stale], principal=curator, reason="all good")
    assert store.count_audit() == audit_before
    assert {p.id for p in memory.proposals(principal=curator)} == {fresh, stale}


def test_approve_many_is_for_curators_and_needs_a_reason(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    ids = [_queued(memory, agent, "A belief to approve")]
    with pytest.raises(PermissionDenied):
        memory.approve_many(ids, principal=agent, reason="me")
    with pytest.raises(InvalidInput):
        memory.approve_many(ids, principal=curator, reason=" ")
    with pytest.raises(InvalidInput):
        memory.approve_many(ids + ids, principal=curator, reason="twice")
    assert [p.id for p in memory.proposals(principal=curator)] == ids


def test_two_changes_to_one_record_are_refused_together(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    base = memory.remember(content("Shared fact", kind="fact"), principal=curator)
    assert base.record is not None
    one = memory.update(base.record.id, ContentPatch(body="one"), principal=agent).proposal.id
    two = memory.update(base.record.id, ContentPatch(body="two"), principal=agent).proposal.id
    with pytest.raises(Conflict):
        memory.approve_many([one, two], principal=curator, reason="both")
    assert len(memory.proposals(principal=curator)) == 2


def test_queue_filters(memory: Memory, agent: Principal, curator: Principal) -> None:
    belief = _queued(memory, agent, "Belief in scope a", scope="acme/x/a")
    other = _queued(memory, agent, "Belief in scope b", scope="acme/x/b")
    fact = memory.remember(content("A fact", kind="fact"), principal=curator)
    assert fact.record is not None
    update = memory.update(fact.record.id, ContentPatch(body="new"), principal=agent).proposal.id

    def ids(**narrow: object) -> set[str]:
        found = memory.proposals(principal=curator, narrow=ProposalFilter.model_validate(narrow))
        return {p.id for p in found}

    assert ids() == {belief, other, update}
    assert ids(scope="acme/x/a") == {belief}
    assert ids(scope="acme/x/*") == {belief, other}
    assert ids(kind="belief") == {belief, other}
    assert ids(kind="fact") == {update}  # the kind of the record the update is about
    assert ids(op="update") == {update}
    assert ids(author=agent.id) == {belief, other, update}
    assert ids(author=curator.id) == set()
    rule = memory.proposal(belief, principal=curator).rule
    assert rule is not None
    assert belief in ids(rule=rule)
    assert ids(rule="no-such-rule") == set()
    assert ids(created_before=utcnow() - timedelta(days=1)) == set()
    assert ids(created_before=utcnow() + timedelta(seconds=1)) == {belief, other, update}


def test_audit_filters_by_rule_and_until(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    queued = _queued(memory, agent, "Audit me")
    memory.decide(queued, approve=True, principal=curator, reason="ok")
    by_rule = memory.audit(AuditQuery(rule="curator"), principal=curator)
    assert [e.proposal_id for e in by_rule] == [queued]
    assert memory.audit(AuditQuery(until=utcnow() - timedelta(days=1)), principal=curator) == []


def test_approve_many_refuses_an_update_and_a_create_bringing_one_content(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    """Not only two creates: any two of the proposals that would store the same content are
    refused by name, before anything is written."""
    kept = memory.remember(content("Belief kept", kind="belief"), principal=curator).record
    assert kept is not None
    update = memory.update(
        kept.id, ContentPatch(title="Belief shared", body="Belief shared. Details follow."),
        principal=agent,
    )  # fmt: skip
    create = _queued(memory, agent, "Belief shared")
    with pytest.raises(Conflict, match=f"proposal {create} has the same content as another"):
        memory.approve_many([update.proposal.id, create], principal=curator, reason="both")
    pending = memory.proposals(principal=curator, status=ProposalStatus.PENDING)
    assert {p.id for p in pending} >= {update.proposal.id, create}
