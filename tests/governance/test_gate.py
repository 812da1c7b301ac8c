"""The Librarian gate: role limits, policy, staleness and rebase, duplicates, supersession."""

from __future__ import annotations

import pytest

from cairn.errors import (
    Conflict,
    DuplicateContent,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StaleProposal,
    SupersessionCycle,
)
from cairn.memory import Memory
from cairn.model import (
    Acl,
    AuditQuery,
    Confidence,
    ContentPatch,
    Origin,
    PinKind,
    Principal,
    ProposalStatus,
    Status,
    Verdict,
    VersionPin,
)
from cairn.store.base import Store
from tests.conftest import content
from tests.factories import CURATOR


def _active(memory: Memory, curator: Principal, title: str = "Tests run with make test") -> str:
    outcome = memory.remember(content(title), principal=curator)
    assert outcome.record is not None
    return outcome.record.id


def _snapshot(memory: Memory, store: Store) -> tuple[dict[str, int], int]:
    return memory.status(principal=CURATOR), store.count_audit()


# ---- policy ----------------------------------------------------------------------------


def test_episodes_are_auto_approved_for_agents(memory: Memory, agent: Principal) -> None:
    outcome = memory.remember(content("Debugged the flaky test", kind="episode"), principal=agent)
    assert outcome.decision is Verdict.APPROVE
    assert outcome.proposal.rule == "episodes-are-history"
    assert outcome.record is not None and outcome.record.status is Status.ACTIVE


def test_beliefs_wait_for_a_curator(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    outcome = memory.remember(content("User prefers squash merges", kind="belief"), principal=agent)
    assert outcome.decision is Verdict.QUEUE
    assert outcome.record is None
    assert memory.status(principal=CURATOR)["records"] == 0, (
        "a queued proposal must not write a record"
    )
    queue = memory.proposals(principal=curator)
    assert [p.id for p in queue] == [outcome.proposal.id]
    accepted = memory.decide(outcome.proposal.id, approve=True, principal=curator)
    assert accepted.record is not None and accepted.record.status is Status.ACTIVE
    assert store.get_proposal(outcome.proposal.id).status is ProposalStatus.ACCEPTED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("impact", "decision"), [("low", Verdict.APPROVE), ("high", Verdict.QUEUE)]
)
def test_decisions_follow_their_impact(
    memory: Memory, agent: Principal, impact: str, decision: Verdict
) -> None:
    proposal = content("Use REST, not GraphQL", kind="decision", metadata={"impact": impact})
    assert memory.remember(proposal, principal=agent).decision is decision


def test_rejection_needs_a_reason_and_is_audited(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    queued = memory.remember(content("The sky is green", kind="belief"), principal=agent)
    with pytest.raises(InvalidInput) as info:
        memory.decide(queued.proposal.id, approve=False, principal=curator, reason=" ")
    assert info.value.field == "reason"
    rejected = memory.decide(queued.proposal.id, approve=False, principal=curator, reason="false")
    assert rejected.decision is Verdict.REJECT
    entry = memory.audit(AuditQuery(action="reject"), principal=curator)[-1]
    assert (entry.actor, entry.reason, entry.proposal_id) == ("carol", "false", queued.proposal.id)
    with pytest.raises(Conflict):
        memory.decide(queued.proposal.id, approve=True, principal=curator)


# ---- what agents may never do -----------------------------------------------------------


def test_agents_cannot_approve_or_reject(memory: Memory, agent: Principal, store: Store) -> None:
    queued = memory.remember(content("A belief", kind="belief"), principal=agent)
    before = _snapshot(memory, store)
    with pytest.raises(PermissionDenied):
        memory.decide(queued.proposal.id, approve=True, principal=agent)
    with pytest.raises(PermissionDenied):
        memory.decide(queued.proposal.id, approve=False, principal=agent, reason="no")
    assert _snapshot(memory, store) == before


def test_agents_cannot_archive_publish_or_promote_drafts(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    record_id = _active(memory, curator)
    draft = memory.remember(content("A note for the next session"), principal=agent, draft=True)
    assert draft.record is not None and draft.record.status is Status.DRAFT
    before = _snapshot(memory, store)
    with pytest.raises(PermissionDenied):
        memory.archive(record_id, principal=agent)
    with pytest.raises(PermissionDenied):
        memory.publish("acme/app", principal=agent)
    with pytest.raises(PermissionDenied):
        memory.transition(draft.record.id, Status.ACTIVE, principal=agent)
    assert _snapshot(memory, store) == before
    promoted = memory.transition(draft.record.id, Status.ACTIVE, principal=curator)
    assert promoted.record is not None and promoted.record.status is Status.ACTIVE


def test_agents_cannot_claim_human_origin_or_verification(memory: Memory, agent: Principal) -> None:
    claimed = content("Ran the suite", kind="episode", origin="human", confidence="verified")
    outcome = memory.remember(claimed, principal=agent)
    assert outcome.version is not None
    assert outcome.version.content.origin is Origin.AGENT
    assert outcome.version.content.confidence is Confidence.SUPPORTED


def test_principals_are_confined_to_their_scopes(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    outside = memory.remember(content("Other team's fact", scope="globex/app"), principal=curator)
    assert outside.record is not None
    before = _snapshot(memory, store)
    with pytest.raises(PermissionDenied):
        memory.remember(content("Sneaky", scope="globex/app", kind="episode"), principal=agent)
    with pytest.raises(NotFound):
        memory.get(outside.record.id, principal=agent)
    with pytest.raises(NotFound):
        memory.update(outside.record.id, ContentPatch(body="x"), principal=agent)
    assert _snapshot(memory, store) == before


# ---- stale proposals and rebase -----------------------------------------------------------


def test_stale_accept_is_refused_and_rebase_repins(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    record_id = _active(memory, curator)
    v1 = memory.get(record_id, principal=agent).version
    queued = memory.update(
        record_id,
        ContentPatch(body="Use make test -j2", metadata={"impact": "high"}),
        principal=agent,
        base_version_id=v1.id,
    )
    assert queued.decision is Verdict.QUEUE  # facts are not auto-approved for agents
    memory.update(record_id, ContentPatch(body="Use make test, always"), principal=curator)

    before = _snapshot(memory, store)
    with pytest.raises(StaleProposal):
        memory.decide(queued.proposal.id, approve=True, principal=curator)
    assert _snapshot(memory, store) == before

    rebased = memory.rebase(queued.proposal.id, principal=agent)
    old = store.get_proposal(queued.proposal.id)
    assert old is not None and old.status is ProposalStatus.REBASED
    assert old.rebased_to == rebased.proposal.id
    assert rebased.proposal.rebased_from == queued.proposal.id
    head = store.get_record(record_id)
    assert head is not None and rebased.proposal.base_version_id == head.current_version_id

    accepted = memory.decide(rebased.proposal.id, approve=True, principal=curator)
    assert accepted.version is not None and accepted.version.number == 3
    assert accepted.version.content.body == "Use make test -j2"


def test_a_fresh_proposal_cannot_rebase(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    record_id = _active(memory, curator)
    queued = memory.update(record_id, ContentPatch(body="new", metadata={"x": 1}), principal=agent)
    with pytest.raises(Conflict):
        memory.rebase(queued.proposal.id, principal=agent)


def test_an_outdated_pin_is_refused_at_submission(
    memory: Memory, agent: Principal, curator: Principal
) -> None:
    record_id = _active(memory, curator)
    v1 = memory.get(record_id, principal=curator).version.id
    memory.update(record_id, ContentPatch(body="v2"), principal=curator)
    with pytest.raises(StaleProposal):
        memory.update(record_id, ContentPatch(body="v3"), principal=curator, base_version_id=v1)


# ---- duplicates ----------------------------------------------------------------------


def test_duplicates_are_refused_with_feedback(
    memory: Memory, agent: Principal, curator: Principal, store: Store
) -> None:
    record_id = _active(memory, curator)
    # the same content with other case and spacing
    retyped = content(
        "  tests RUN with make   test ", body="Tests run with make test.  DETAILS follow."
    )
    with pytest.raises(DuplicateContent) as info:
        memory.remember(retyped, principal=agent)
    assert record_id in info.value.message
    assert "updating" in info.value.message
    assert info.value.details["existing_record_id"] == record_id
    rejected = store.list_proposals(status=ProposalStatus.REJECTED)
    assert len(rejected) == 1 and rejected[0].rule == "duplicate_content"
    assert memory.status(principal=CURATOR)["records"] == 1
    # the same text in another scope is not a duplicate
    elsewhere = memory.remember(
        content("Tests run with make test", scope="acme/web"), principal=curator
    )
    assert elsewhere.record is not None


# ---- versions and supersession --------------------------------------------------------------


def test_old_versions_stay_readable(memory: Memory, curator: Principal, agent: Principal) -> None:
    record_id = _active(memory, curator)
    first = memory.get(record_id, principal=agent).version
    for body in ("second", "third"):
        memory.update(record_id, ContentPatch(body=body), principal=curator)
    history = memory.history(record_id, principal=agent)
    assert [v.number for v in history] == [1, 2, 3]
    assert [v.content.body for v in history][1:] == ["second", "third"]
    by_number = memory.get(record_id, principal=agent, version=1)
    by_id = memory.get(
        record_id,
        principal=agent,
        selector=VersionPin(kind=PinKind.VERSION_REF, version_id=first.id),
    )
    assert by_number.version == by_id.version == first
    assert memory.get(record_id, principal=agent).version.number == 3


def test_supersession_chain_resolves_to_the_newest(memory: Memory, curator: Principal) -> None:
    a, b, c = (_active(memory, curator, title) for title in ("Use Python 3.10", "Use 3.11", "3.12"))
    memory.supersede(a, by=b, principal=curator)
    memory.supersede(b, by=c, principal=curator)
    assert memory.resolve(a, principal=curator).id == c
    assert memory.get(a, principal=curator).resolved_id == c
    with pytest.raises(SupersessionCycle):
        memory.supersede(c, by=a, principal=curator)
    with pytest.raises(SupersessionCycle):
        memory.supersede(c, by=c, principal=curator)
    with pytest.raises(Conflict):
        memory.supersede(a, by=c, principal=curator)  # already superseded


def test_supersede_with_new_content(memory: Memory, curator: Principal) -> None:
    old = _active(memory, curator)
    replacement = content("Tests run with make test -j2")
    outcome = memory.supersede(old, content=replacement, principal=curator)
    assert outcome.record is not None
    assert memory.resolve(old, principal=curator).id == outcome.record.id
    edges = memory.edges(old, principal=curator, types=["SUPERSEDES"])
    assert [(e.src, e.dst) for e in edges] == [(outcome.record.id, old)]


# ---- baselines and selectors -------------------------------------------------------------


def test_published_selector_sees_the_published_version(
    memory: Memory, curator: Principal, agent: Principal, store: Store
) -> None:
    record_id = _active(memory, curator)
    with pytest.raises(NotFound):
        memory.get(record_id, principal=agent, selector=VersionPin.published())
    published = memory.publish("acme/app", principal=curator)
    assert published.decision is Verdict.APPROVE
    first_baseline = store.published_baseline_id("acme/app")
    memory.update(record_id, ContentPatch(body="v2 text"), principal=curator)

    seen = memory.get(record_id, principal=agent, selector=VersionPin.published())
    assert seen.version.number == 1 and seen.selector_used.baseline_id == first_baseline
    assert memory.get(record_id, principal=agent).version.number == 2

    memory.publish("acme/app", principal=curator, record_ids=[record_id])
    assert (
        memory.get(record_id, principal=agent, selector=VersionPin.published()).version.number == 2
    )
    old = VersionPin(kind=PinKind.BASELINE_REF, baseline_id=first_baseline)
    assert memory.get(record_id, principal=agent, selector=old).version.number == 1


def test_publishing_is_audited(memory: Memory, curator: Principal, store: Store) -> None:
    _active(memory, curator)
    memory.publish("acme/app", principal=curator, name="r1")
    entry = memory.audit(AuditQuery(), principal=curator)[-1]
    assert entry.details["op"] == "publish"
    assert entry.subject_id == store.published_baseline_id("acme/app")


# ---- bad input changes nothing -----------------------------------------------------------------


def test_unknown_kind_is_refused(memory: Memory, curator: Principal, store: Store) -> None:
    before = _snapshot(memory, store)
    with pytest.raises(InvalidInput) as info:
        memory.remember(content("x", kind="decison"), principal=curator)
    assert info.value.field == "kind" and "decison" in info.value.message
    assert _snapshot(memory, store) == before


def test_unknown_record_is_not_found(memory: Memory, curator: Principal, store: Store) -> None:
    before = _snapshot(memory, store)
    for call in (
        lambda: memory.get("rec_nope", principal=curator),
        lambda: memory.update("rec_nope", ContentPatch(body="x"), principal=curator),
        lambda: memory.archive("rec_nope", principal=curator),
        lambda: memory.decide("prp_nope", approve=True, principal=curator),
    ):
        with pytest.raises(NotFound):
            call()
    assert _snapshot(memory, store) == before


def test_empty_update_is_refused(memory: Memory, curator: Principal) -> None:
    record_id = _active(memory, curator)
    with pytest.raises(InvalidInput):
        memory.update(record_id, ContentPatch(), principal=curator)
    same = memory.get(record_id, principal=curator).version.content.body
    with pytest.raises(InvalidInput):
        memory.update(record_id, ContentPatch(body=same), principal=curator)


def test_archive_is_reversible_by_a_curator(
    memory: Memory, curator: Principal, store: Store
) -> None:
    record_id = _active(memory, curator)
    memory.archive(record_id, principal=curator, reason="obsolete")
    assert store.get_record(record_id).status is Status.ARCHIVED  # type: ignore[union-attr]
    memory.restore(record_id, principal=curator)
    assert store.get_record(record_id).status is Status.ACTIVE  # type: ignore[union-attr]


def test_supersede_with_a_patch_of_the_current_content(
    memory: Memory, curator: Principal, store: Store
) -> None:
    old = _active(memory, curator)
    outcome = memory.supersede(
        old, patch=ContentPatch(title="Tests run with tox"), principal=curator
    )
    assert outcome.record is not None and outcome.version is not None
    assert outcome.version.content.title == "Tests run with tox"
    assert (
        outcome.version.content.body
        == store.get_version(
            store.get_record(old).current_version_id  # type: ignore[union-attr]
        ).content.body
    )  # type: ignore[union-attr]
    assert memory.resolve(old, principal=curator).id == outcome.record.id


def test_superseding_never_tells_how_hidden_records_are_linked(
    memory: Memory, curator: Principal, agent: Principal
) -> None:
    # B is superseded by a record the agent may not read, which in one world is itself
    # superseded by A: proposing "A by B" must get the same answer in both worlds
    answers = []
    for linked in (True, False):
        a = _active(memory, curator, f"Record A {linked}")
        b = _active(memory, curator, f"Record B {linked}")
        secret = Acl(labels=("secret",))
        hidden = memory.remember(
            content(f"Hidden H {linked}", acl=secret), principal=curator
        ).record
        assert hidden is not None
        memory.supersede(b, by=hidden.id, principal=curator)
        if linked:
            memory.supersede(hidden.id, by=a, principal=curator)  # B -> H -> A
        with pytest.raises(SupersessionCycle) as caught:
            memory.supersede(a, by=b, principal=agent)
        answers.append(str(caught.value).replace(b, "B"))
        assert hidden.id not in str(caught.value)
    assert answers[0] == answers[1]
