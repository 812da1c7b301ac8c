"""The reference scenario: "How do I run tests?" end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cairn.errors import NotFound, PermissionDenied, StaleProposal
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Content, ContentPatch, Principal, PrincipalKind, VersionPin
from cairn.retrieval.context import ReadContextRequest
from cairn.store.base import Store

SOP = """# Testing SOP

How to run the Phase 0/1/2 tests.

## Phase 0

Run `make lint` for ruff and mypy.

## Phase 1 and 2

Run `make test`: unit tests first (phase 1), then the integration suite (phase 2).
"""

BACKLOG = {
    "backlog/656-testing.md": "# 656 testing backlog\n\nWe want phase 0/1/2 tests to be run "
    "locally before CI. Nobody wrote the SOP yet.\n",
    "backlog/700-deploys.md": "# 700 deploys\n\nDeploys go out on Tuesdays.\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for relative, text in BACKLOG.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "backlog",
        ],
        check=True,
    )
    return tmp_path


def _answer_citations(answer_pairs: set[tuple[str, str]], returned: set[tuple[str, str]]) -> None:
    """An agent's answer may only cite (record, version) pairs the read returned."""
    invented = answer_pairs - returned
    assert not invented, f"invented citations: {invented}"


def test_how_do_i_run_tests(store: Store, repo: Path, curator: Principal) -> None:
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=repo, embedder="static")
    agent = Principal(
        id="exec-agent", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/product",)
    )
    outsider = Principal(
        id="other-team", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("globex/*",)
    )

    # 1. seed evidence: ingested backlog markdown, provenance from git
    report = memory.ingest(["backlog/**/*.md"], principal=curator, scope="acme/product")
    assert len(report.created) == 2
    evidence = store.get_record(report.created[0])
    assert evidence is not None
    assert evidence.content.provenance.source_kind == "INGESTED_EVIDENCE"
    assert evidence.content.provenance.commit_sha and evidence.content.provenance.path

    # publish one canonical Testing SOP into the published baseline
    sop = memory.remember(
        Content(
            kind="document",
            scope="acme/product",
            title="Testing SOP",
            body=SOP,
            confidence="verified",
            origin="human",
        ),
        principal=curator,
    ).record
    assert sop is not None
    memory.publish("acme/product", principal=curator, name="sop")

    # 2. retrieve context (published) → the SOP first, with version-pinned citations
    request = ReadContextRequest(scope="acme/product", query="how do I run Phase 0/1/2 tests?")
    context = memory.read_context(request, principal=agent)
    assert context.selector_used.kind.value == "published"
    assert context.items[0].record_id == sop.id
    returned = {(c.record_id, c.version_id) for i in context.items for c in i.citations}
    assert (sop.id, sop.current_version_id) in returned
    _answer_citations({(sop.id, sop.current_version_id)}, returned)
    with pytest.raises(AssertionError, match="invented"):
        _answer_citations({(sop.id, "ver_made_up")}, returned)

    # 3. a proposal against the pinned version; meanwhile the SOP moves on
    pinned = context.items[0].version_id
    proposal = memory.update(
        sop.id,
        ContentPatch(body=SOP + "\nUse `make test -j2` on two cores.\n"),
        principal=agent,
        base_version_id=pinned,
    ).proposal
    memory.update(sop.id, ContentPatch(body=SOP + "\nCI runs the same.\n"), principal=curator)

    # stale detection blocks accept; rebase first
    with pytest.raises(StaleProposal):
        memory.decide(proposal.id, approve=True, principal=curator)
    rebased = memory.rebase(proposal.id, principal=agent).proposal

    # 4. curator accepts → a new version exists
    accepted = memory.decide(rebased.id, approve=True, principal=curator)
    assert accepted.version is not None and accepted.version.number == 3

    # 5. curator promotes → read (published) returns the new version by default
    memory.publish("acme/product", principal=curator, record_ids=[sop.id])
    after = memory.read_context(request, principal=agent)
    assert after.items[0].record_id == sop.id
    assert after.items[0].version_id == accepted.version.id

    # permission trimming: an unauthorized principal can neither read nor propose here
    outside = memory.read_context(request, principal=outsider)
    assert outside.items == ()
    with pytest.raises(NotFound):
        memory.get(sop.id, principal=outsider, selector=VersionPin.published())
    with pytest.raises(PermissionDenied):
        memory.remember(
            Content(kind="episode", scope="acme/product", title="sneaky"), principal=outsider
        )
    with pytest.raises(NotFound):
        memory.update(sop.id, ContentPatch(body="x"), principal=outsider)
