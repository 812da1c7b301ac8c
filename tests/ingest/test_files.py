"""Ingest: evidence records with git provenance; unchanged files create nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Principal, Status
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR


def test_ingest_is_idempotent_and_versions_changes(tmp_path: Path, curator: Principal) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nFirst.\n")
    (docs / "b.txt").write_text("plain text notes\n")
    store = SqliteStore(tmp_path / "c.db")
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder=None)
    first = memory.ingest(["docs"], principal=curator, scope="acme/app")
    assert len(first.created) == 2
    alpha = next(
        r for r in map(store.get_record, first.created) if r and r.content.title == "Alpha"
    )
    assert alpha.content.provenance.path == "docs/a.md"
    assert alpha.content.provenance.source_kind == "INGESTED_EVIDENCE"
    audit_before = store.count_audit()

    again = memory.ingest(["docs/*"], principal=curator, scope="acme/app")
    assert again.created == [] and sorted(again.unchanged) == sorted(first.created)
    assert store.count_audit() == audit_before, "unchanged content creates nothing"

    (docs / "a.md").write_text("# Alpha\n\nSecond.\n")
    changed = memory.ingest(["docs/a.md"], principal=curator, scope="acme/app")
    assert changed.updated == [alpha.id]
    assert store.get_record(alpha.id).current_version == 2  # type: ignore[union-attr]
    # the ingested file is linked: drift is noticed
    (docs / "a.md").write_text("# Alpha\n\nThird, not ingested.\n")
    assert memory.refresh(principal=curator).marked_stale == [alpha.id]
    assert store.get_record(alpha.id).status is Status.STALE  # type: ignore[union-attr]


def test_agents_ingest_through_the_gate(tmp_path: Path, agent: Principal) -> None:
    (tmp_path / "n.md").write_text("# Note\n\nbody\n")
    opened = DEFAULT_POLICY_YAML.replace(
        "    - path: .\n      roles: [curator, admin]\n",
        "    - path: .\n      roles: [curator, admin, agent]\n",
    )
    assert opened != DEFAULT_POLICY_YAML
    memory = Memory(
        SqliteStore(tmp_path / "c.db"),
        parse_policy(opened),
        root=tmp_path,
        embedder=None,
    )
    report = memory.ingest(["n.md"], principal=agent, scope="acme/app")
    assert report.created == [] and len(report.queued) == 1  # documents wait for a curator


def test_a_pattern_matching_nothing_is_an_error(tmp_path: Path, curator: Principal) -> None:
    memory = Memory(
        SqliteStore(tmp_path / "c.db"),
        parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path,
        embedder=None,
    )
    with pytest.raises(NotFound, match="nothing matches"):
        memory.ingest(["missing/*.md"], principal=curator, scope="acme/app")


def test_nothing_outside_the_repository_can_be_ingested(tmp_path: Path, curator: Principal) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nnot for the store\n")
    (repo / "link.md").symlink_to(secret)
    memory = Memory(
        SqliteStore(tmp_path / "c.db"), parse_policy(DEFAULT_POLICY_YAML), root=repo, embedder=None
    )
    refusals = {
        str(secret): (InvalidInput, "relative to the project"),
        "../secret.md": (InvalidInput, "without '..'"),
        "link.md": (PermissionDenied, "outside its root"),
    }
    for pattern, (error, message) in refusals.items():
        with pytest.raises(error, match=message):
            memory.ingest([pattern], principal=curator, scope="acme/app")
    assert memory.status(principal=CURATOR)["records"] == 0
