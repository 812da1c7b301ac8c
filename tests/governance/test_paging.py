"""Keyset paging: every listing walks its whole set a page at a time, in the store, with no
gaps, no repeats and nothing the caller may not read (both stores)."""

from __future__ import annotations

import pytest

from cairn.errors import InvalidInput
from cairn.memory import Memory
from cairn.model import (
    Acl,
    AuditQuery,
    Content,
    ContentPatch,
    Principal,
    PrincipalKind,
    ProposalStatus,
    RecordQuery,
)
from tests.factories import CURATOR

READER = Principal(id="rita", kind=PrincipalKind.HUMAN, roles=("reader",), scopes=("acme/*",))
AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))


def _fact(i: int, *, acl: Acl | None = None) -> Content:
    fields: dict[str, object] = {
        "kind": "fact",
        "scope": "acme/app",
        "title": f"Fact number {i}",
        "body": f"Fact number {i} is about the {i}th thing.",
    }
    if acl is not None:
        fields["acl"] = acl
    return Content.model_validate(fields)


def test_records_page_by_id_without_gaps_or_hidden_records(memory: Memory) -> None:
    visible: set[str] = set()
    for i in range(23):
        hidden = i % 4 == 0
        acl = Acl(roles=("curator",)) if hidden else None
        outcome = memory.remember(_fact(i, acl=acl), principal=CURATOR)
        assert outcome.record is not None
        if not hidden:
            visible.add(outcome.record.id)

    seen: list[str] = []
    after: str | None = None
    while True:
        page = memory.list_records(RecordQuery(limit=5, after=after), principal=READER)
        if not page:
            break
        assert len(page) <= 5
        seen.extend(r.id for r in page)
        assert len(seen) <= 23, "paging must move forward"
        after = page[-1].id
    assert seen == sorted(seen), "a keyset page runs in id order"
    assert len(seen) == len(set(seen)), "no record appears on two pages"
    assert set(seen) == visible, "every readable record, and only those"


def test_proposals_page_by_id_and_agents_page_only_their_own(memory: Memory) -> None:
    other = Principal(id="bob", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    mine: set[str] = set()
    base = memory.remember(_fact(0), principal=CURATOR).record
    assert base is not None
    for i in range(12):
        who = AGENT if i % 3 else other
        outcome = memory.update(
            base.id, ContentPatch(body=f"Rewritten body number {i}."), principal=who
        )
        assert outcome.proposal.status is ProposalStatus.PENDING
        if who is AGENT:
            mine.add(outcome.proposal.id)

    def walk(principal: Principal) -> list[str]:
        ids: list[str] = []
        after: str | None = None
        while page := memory.proposals(principal=principal, limit=3, after=after):
            ids.extend(p.id for p in page)
            assert len(ids) <= 12, "paging must move forward"
            after = page[-1].id
        return ids

    assert set(walk(AGENT)) == mine
    everyone = walk(CURATOR)
    assert len(everyone) == 12 == len(set(everyone))
    assert everyone == sorted(everyone)


def test_history_and_audit_page_by_number(memory: Memory) -> None:
    record = memory.remember(_fact(0), principal=CURATOR).record
    assert record is not None
    record_id = record.id
    for i in range(6):
        memory.update(record_id, ContentPatch(body=f"Version body {i}."), principal=CURATOR)

    numbers: list[int] = []
    after = 0
    while page := memory.history(record_id, principal=CURATOR, after=after, limit=2):
        numbers.extend(v.number for v in page)
        assert len(numbers) <= 7, "paging must move forward"
        after = page[-1].number
    assert numbers == list(range(1, 8))

    seqs: list[int] = []
    last: int | None = None
    while entries := memory.audit(AuditQuery(limit=4, after_seq=last), principal=CURATOR):
        seqs.extend(e.seq for e in entries if e.seq is not None)
        assert len(seqs) <= 1000, "paging must move forward"
        last = seqs[-1]
    everything = memory.audit(AuditQuery(limit=1000), principal=CURATOR)
    assert seqs == sorted(e.seq for e in everything if e.seq is not None)
    assert len(seqs) == len(everything) == 7


def test_out_of_range_history_pages_are_refused(memory: Memory) -> None:
    record = memory.remember(_fact(0), principal=CURATOR).record
    assert record is not None
    with pytest.raises(InvalidInput):
        memory.history(record.id, principal=CURATOR, after=2**70)
    with pytest.raises(InvalidInput):
        memory.history(record.id, principal=CURATOR, limit=0)
