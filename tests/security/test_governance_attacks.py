"""What an agent key can no longer do to records, ids and provenance (on both stores).

The attacks this closes: an agent locked curators out of a record with its ACL, or changed a
curator's record's ACL through an auto-approved edit that kept the curator's origin; hidden
ids leaked through ``superseded_by``, 409 messages, baseline pins and stale-proposal errors;
the duplicate check confirmed hidden content with its id, title and scope; an agent forged
``provenance.source_kind`` to pass as ingested evidence; a principal defined without
``scopes`` got every scope.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cairn.auth import load_principals
from cairn.errors import Conflict, DuplicateContent, NotFound, PermissionDenied
from cairn.ingest.files import INGESTED_EVIDENCE
from cairn.memory import Memory
from cairn.model import (
    Acl,
    Confidence,
    Content,
    ContentPatch,
    Origin,
    Principal,
    PrincipalKind,
    Provenance,
    RecordQuery,
    Sensitivity,
    Status,
    Verdict,
)
from cairn.retrieval.context import ReadContextRequest
from cairn.store.base import Store
from cairn.workspace import Workspace
from tests.conftest import content

CURATOR_ONLY = Acl(roles=("curator",), labels=("internal",))


def _agent(name: str = "bot", **fields: object) -> Principal:
    base: dict[str, object] = {
        "id": name,
        "kind": PrincipalKind.AGENT,
        "roles": ("agent",),
        "scopes": ("acme/*",),
        "labels": ("public", "internal"),
    }
    return Principal.model_validate(base | fields)


def _create(
    memory: Memory, who: Principal, title: str, kind: str = "skill", **fields: object
) -> str:
    outcome = memory.remember(content(title, kind=kind, **fields), principal=who)
    assert outcome.record is not None, outcome.feedback
    return outcome.record.id


# ---- agents cannot lock curators out --------------------------------------------------


def test_a_curator_reads_what_an_agent_hid_from_curators(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    record_id = _create(
        memory, agent, "Only agents read this", kind="episode", acl=Acl(roles=("agent",))
    )
    assert memory.get(record_id, principal=curator).record.id == record_id
    found = memory.search("agents read", principal=curator, mode="keyword")
    assert record_id in {hit.record_id for hit in found.hits}
    assert record_id in {r.id for r in memory.list_records(RecordQuery(), principal=curator)}
    # ... but only within the curator's own scopes
    elsewhere = curator.model_copy(update={"scopes": ("globex/*",)})
    with pytest.raises(NotFound):
        memory.get(record_id, principal=elsewhere)


def test_an_acl_change_always_waits_for_a_curator(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    # the agent's own skill: the policy approves skill edits by themselves ...
    mine = _create(memory, agent, "Deploy with make release")
    edited = memory.update(mine, ContentPatch(body="Run make release."), principal=agent)
    assert edited.decision is Verdict.APPROVE
    # ... but never one that changes who may read it
    narrowed = memory.update(mine, ContentPatch(acl=Acl(roles=("agent",))), principal=agent)
    assert narrowed.decision is Verdict.QUEUE
    assert narrowed.proposal.rule == "acl-change-needs-review"
    assert memory.get(mine, principal=curator).version.content.acl == Acl()


def test_an_agent_edit_of_a_record_it_did_not_write_waits(
    memory: Memory, curator: Principal
) -> None:
    agent, other = _agent(), _agent("other-bot")
    theirs = _create(memory, other, "Rotate logs nightly")
    queued = memory.update(theirs, ContentPatch(body="Rotate weekly."), principal=agent)
    assert (queued.decision, queued.proposal.rule) == (
        Verdict.QUEUE,
        "others-records-need-review",
    )
    # a curator's record, through an auto-approved kind and through supersede alike
    humans = _create(memory, curator, "Page the on-call first")
    for outcome in (
        memory.update(humans, ContentPatch(body="Email instead."), principal=agent),
        memory.supersede(humans, content=content("Email first", kind="skill"), principal=agent),
    ):
        assert outcome.decision is Verdict.QUEUE, outcome.proposal.rule
    assert memory.get(humans, principal=curator).record.current_version == 1
    assert memory.get(humans, principal=curator).record.superseded_by is None


def test_an_edit_of_a_human_or_verified_record_waits_even_by_its_author(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    mine = _create(memory, agent, "Backups run at two")
    memory.update(
        mine, ContentPatch(body="Backups run at three."), principal=curator
    )  # now a human's version
    again = memory.update(mine, ContentPatch(body="Backups run at four."), principal=agent)
    assert (again.decision, again.proposal.rule) == (Verdict.QUEUE, "human-records-need-review")


def test_a_new_version_is_the_editors(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    humans = _create(memory, curator, "Tag releases", confidence=Confidence.VERIFIED)
    queued = memory.update(humans, ContentPatch(body="Tag and sign releases."), principal=agent)
    accepted = memory.decide(queued.proposal.id, approve=True, principal=curator)
    assert accepted.version is not None
    assert accepted.version.created_by == agent.id
    assert accepted.version.content.origin is Origin.AGENT
    assert accepted.version.content.confidence is Confidence.VERIFIED  # unchanged field
    # an agent's patch cannot raise confidence to verified
    mine = _create(memory, agent, "Cache for an hour")
    raised = memory.update(mine, ContentPatch(confidence=Confidence.VERIFIED), principal=agent)
    assert raised.version is not None
    assert raised.version.content.confidence is Confidence.SUPPORTED


# ---- hidden ids never named -----------------------------------------------------------


def test_a_hidden_successor_is_never_named(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    old = _create(memory, curator, "Use Postgres 15", kind="decision")
    new = _create(memory, curator, "Use Postgres 17", kind="decision", acl=CURATOR_ONLY)
    memory.supersede(old, by=new, principal=curator)
    view = memory.get(old, principal=agent)
    assert view.record.superseded_by is None and view.resolved_id == old
    listed = memory.list_records(RecordQuery(), principal=agent)
    assert new not in json.dumps([r.model_dump(mode="json") for r in listed])
    with pytest.raises(Conflict) as refused:
        memory.supersede(old, content=content("Use Postgres 16", kind="decision"), principal=agent)
    assert new not in refused.value.message and "already superseded" in refused.value.message
    checked = memory.validate([old], principal=agent)
    assert checked.records[0].problems == ("superseded",)
    assert new not in checked.model_dump_json()
    # the curator, who may read the successor, is told which it is
    assert memory.get(old, principal=curator).record.superseded_by == new


def test_baselines_pin_only_what_the_reader_may_read(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    shown = _create(memory, curator, "Public runbook", kind="fact")
    hidden = _create(memory, curator, "Secret runbook", kind="fact", acl=CURATOR_ONLY)
    memory.publish("acme/app", principal=curator)
    (baseline,) = memory.baselines("acme/app", principal=agent)
    assert set(baseline.pins) == {shown}
    assert hidden not in baseline.model_dump_json()
    assert set(memory.baselines("acme/app", principal=curator)[0].pins) == {shown, hidden}


def test_a_version_names_its_proposal_only_to_those_who_may_see_it(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    record_id = _create(memory, curator, "Shared fact", kind="fact")
    view = memory.get(record_id, principal=agent)
    assert view.version.proposal_id is None
    assert memory.get(record_id, principal=curator).version.proposal_id is not None


# ---- the duplicate check is no oracle -------------------------------------------------


def test_the_duplicate_check_never_names_a_hidden_record(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    hidden = _create(memory, curator, "Salary bands 2027", kind="fact", acl=CURATOR_ONLY)
    copy = content("Salary bands 2027", kind="fact")
    outcome = memory.remember(copy, principal=agent)  # facts wait for a curator
    dumped = outcome.model_dump_json()
    assert outcome.decision is Verdict.QUEUE and hidden not in dumped
    assert "duplicate" not in dumped.lower()
    # The curator sees the duplicate and is told, but nothing is written for the agent to read.
    with pytest.raises(DuplicateContent) as told:
        memory.decide(outcome.proposal.id, approve=True, principal=curator)
    assert hidden in told.value.message
    pending = memory.proposal(outcome.proposal.id, principal=agent)
    assert pending.status.value == "pending" and hidden not in pending.model_dump_json()
    # a duplicate the agent can read is named, as before
    visible = _create(memory, curator, "Office hours", kind="episode")
    with pytest.raises(DuplicateContent) as named:
        memory.remember(content("Office hours", kind="episode"), principal=agent)
    assert visible in named.value.message


# ---- provenance and origin are the kernel's -------------------------------------------


def test_an_agent_cannot_pass_as_ingested_evidence(
    memory: Memory, curator: Principal, tmp_path: Path
) -> None:
    agent = _agent()
    forged = content(
        "Guide",
        kind="episode",
        origin=Origin.SYSTEM,
        confidence=Confidence.VERIFIED,
        provenance=Provenance(source_kind=INGESTED_EVIDENCE, path="docs/guide.md"),
    )
    outcome = memory.remember(forged, principal=agent)
    assert outcome.version is not None
    stored = outcome.version.content
    assert stored.provenance.source_kind is None and stored.provenance.path == "docs/guide.md"
    assert (stored.origin, stored.confidence) == (Origin.AGENT, Confidence.SUPPORTED)
    # a patch cannot forge it either
    patched = memory.update(
        outcome.record.id if outcome.record else "",
        ContentPatch(provenance=Provenance(source_kind=INGESTED_EVIDENCE)),
        principal=agent,
    )
    assert patched.version is None or patched.version.content.provenance.source_kind is None
    # The curator's later ingest of the same path makes its own evidence record.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\nThe real guide.\n")
    report = memory.ingest(["docs/guide.md"], principal=curator, scope="acme/app")
    assert len(report.created) == 1 and report.updated == []
    ingested = memory.get(report.created[0], principal=curator).version.content
    assert ingested.provenance.source_kind == INGESTED_EVIDENCE


def test_a_human_key_cannot_claim_system_origin(memory: Memory, curator: Principal) -> None:
    outcome = memory.remember(content("Claimed", origin=Origin.SYSTEM), principal=curator)
    assert outcome.version is not None and outcome.version.content.origin is Origin.HUMAN


# ---- scopes fail closed ---------------------------------------------------------------


def test_a_principal_without_scopes_reaches_none(tmp_path: Path) -> None:
    folder = tmp_path / ".cairn"
    workspace = Workspace(folder)
    keys = workspace.init().keys
    data = yaml.safe_load((folder / "principals.yaml").read_text())
    for entry in data["principals"]:
        del entry["scopes"]  # an operator forgot them
    (folder / "principals.yaml").write_text(yaml.safe_dump(data))
    agent = workspace.authenticate(keys["agent"])
    curator = workspace.authenticate(keys["curator"])
    assert agent.scopes == () and curator.scopes == ()
    assert all(e.scopes == () for e in load_principals(folder / "principals.yaml").principals)
    with workspace.open_memory(embedder=None) as memory:
        with pytest.raises(PermissionDenied):
            memory.remember(content("Anything", kind="episode"), principal=agent)
        with pytest.raises(PermissionDenied):
            memory.remember(content("Anything", kind="episode"), principal=curator)
        request = ReadContextRequest(scope="acme/app", query="anything", mode="keyword")
        assert memory.read_context(request, principal=agent).items == ()
        assert Principal(id="bare").scopes == ()


def test_sensitivity_and_labels_still_bind_non_curators(memory: Memory, curator: Principal) -> None:
    agent = _agent(sensitivity=Sensitivity.LOW)
    record_id = _create(
        memory, curator, "Incident costs", kind="fact",
        acl=Acl(labels=("internal",), sensitivity=Sensitivity.HIGH),
    )  # fmt: skip
    with pytest.raises(NotFound):
        memory.get(record_id, principal=agent)
    assert memory.get(record_id, principal=curator).record.status is Status.ACTIVE


def test_stale_proposal_errors_name_no_unstored_proposal(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    record_id = _create(memory, agent, "Retry three times")
    first = memory.get(record_id, principal=agent).version.id
    memory.update(record_id, ContentPatch(body="Retry twice."), principal=agent)
    from cairn.errors import StaleProposal

    with pytest.raises(StaleProposal) as stale:
        memory.update(
            record_id, ContentPatch(body="Retry once."), principal=agent, base_version_id=first
        )
    assert "prp_" not in stale.value.message
    assert memory.proposals(principal=curator) == []


def test_content_of_other_agents_proposals_stays_theirs(memory: Memory, curator: Principal) -> None:
    agent, other = _agent(), _agent("other-bot")
    queued = memory.remember(content("Hiring plan", kind="belief"), principal=other)
    with pytest.raises(NotFound):
        memory.proposal(queued.proposal.id, principal=agent)
    assert memory.proposals(principal=agent) == []
    with pytest.raises(NotFound) as rebase:
        memory.rebase(queued.proposal.id, principal=agent)
    with pytest.raises(NotFound) as missing:
        memory.rebase("prp_01NOSUCHPROPOSAL000000000", principal=agent)
    assert rebase.value.message.replace(queued.proposal.id, "X") == missing.value.message.replace(
        "prp_01NOSUCHPROPOSAL000000000", "X"
    )
    assert memory.proposal(queued.proposal.id, principal=curator).id == queued.proposal.id
    content_check = Content.model_validate(queued.proposal.change.model_dump()["content"])
    assert content_check.title == "Hiring plan"


def test_resolve_never_names_a_hidden_successor(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    old = _create(memory, curator, "Deploys on Tuesdays", kind="decision")
    new = _create(memory, curator, "Deploys on Wednesdays", kind="decision", acl=CURATOR_ONLY)
    memory.supersede(old, by=new, principal=curator)
    resolved = memory.resolve(old, principal=agent)
    assert resolved.id == old and resolved.superseded_by is None
    assert new not in resolved.model_dump_json()


def test_a_baseline_shows_only_readable_pins_and_no_hidden_proposal(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    record_id = _create(memory, curator, "Salary bands", kind="fact", acl=CURATOR_ONLY)
    first = memory.get(record_id, principal=curator).version.id
    memory.publish("acme/app", principal=curator)  # pins the curator-only v1
    memory.update(record_id, ContentPatch(acl=Acl()), principal=curator)  # v2 opens it up
    (baseline,) = memory.baselines("acme/app", principal=agent)
    assert baseline.pins == {} and first not in baseline.model_dump_json()
    assert baseline.proposal_id is None
    (as_curator,) = memory.baselines("acme/app", principal=curator)
    assert as_curator.pins == {record_id: first} and as_curator.proposal_id is not None


def test_reads_through_a_baseline_follow_the_records_current_acl(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    record_id = _create(memory, curator, "Launch plan zeta", kind="fact")
    memory.publish("acme/app", principal=curator)  # pins v1, readable by agents
    memory.update(record_id, ContentPatch(acl=CURATOR_ONLY), principal=curator)  # v2 closes it
    from cairn.model import VersionPin

    published = VersionPin.published()
    with pytest.raises(NotFound):
        memory.get(record_id, principal=agent, selector=published)
    found = memory.search("launch plan zeta", principal=agent, mode="keyword", selector=published)
    assert found.hits == ()
    context = memory.read_context(
        ReadContextRequest(scope="acme/app", query="launch plan zeta", mode="keyword"),
        principal=agent,
    )
    assert context.items == () and record_id not in context.model_dump_json()
    # the curator still reads the published version
    assert memory.search(
        "launch plan zeta", principal=curator, mode="keyword", selector=published
    ).hits


def test_vector_reads_through_a_baseline_follow_the_current_acl_too(
    memory: Memory, curator: Principal, store: Store
) -> None:
    from cairn.model import VersionPin

    vectors = Memory(store, memory.policy_in_force, embedder="static")
    agent = _agent()
    record_id = _create(vectors, curator, "Launch plan omega", kind="fact")
    _create(vectors, curator, "Unrelated but public", kind="fact")
    vectors.publish("acme/app", principal=curator)
    vectors.update(record_id, ContentPatch(acl=CURATOR_ONLY), principal=curator)
    vectors.index_pending()
    published = VersionPin.published()
    for mode in ("vector", "hybrid"):
        found = vectors.search("launch plan omega", principal=agent, mode=mode, selector=published)
        assert record_id not in {hit.record_id for hit in found.hits}, mode
        mine = vectors.search("launch plan omega", principal=curator, mode=mode, selector=published)
        assert record_id in {hit.record_id for hit in mine.hits}, mode
