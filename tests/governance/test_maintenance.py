"""Drift detection (refresh) and retention (vacuum), both audited system moves."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import AuditQuery, Principal, Status, utcnow
from cairn.store.base import Store
from cairn.store.sqlite import SqliteStore
from tests.conftest import content


def test_refresh_marks_drifted_records_stale_and_reactivates_them(
    memory: Memory, curator: Principal, tmp_path: Path, store: Store
) -> None:
    (tmp_path / "docs").mkdir()
    readme = tmp_path / "docs" / "testing.md"
    readme.write_text("run make test\n")
    outcome = memory.remember(content("Testing SOP"), principal=curator, paths=["docs/testing.md"])
    assert outcome.record is not None
    record_id = outcome.record.id
    assert memory.refresh(principal=curator).marked_stale == []

    readme.write_text("run pytest directly\n")
    report = memory.refresh(principal=curator)
    assert report.marked_stale == [record_id]
    assert store.get_record(record_id).status is Status.STALE  # type: ignore[union-attr]
    move = memory.audit(AuditQuery(subject_id=record_id), principal=curator)[-1]
    assert (move.actor, move.rule, move.to_status) == ("system", "drift", "stale")
    assert memory.refresh(principal=curator).marked_stale == []  # nothing more to do

    readme.write_text("run make test\n")
    assert memory.refresh(principal=curator).reactivated == [record_id]
    assert store.get_record(record_id).status is Status.ACTIVE  # type: ignore[union-attr]


def test_a_removed_file_counts_as_drift(memory: Memory, curator: Principal, tmp_path: Path) -> None:
    linked = tmp_path / "notes.md"
    linked.write_text("x")
    outcome = memory.remember(content("Notes"), principal=curator, paths=["notes.md"])
    linked.unlink()
    assert memory.refresh(principal=curator).marked_stale == [outcome.record.id]  # type: ignore[union-attr]


def test_vacuum_archives_only_what_retention_allows(
    tmp_path: Path, curator: Principal, agent: Principal
) -> None:
    now = [utcnow()]
    store = SqliteStore(tmp_path / "c.db")
    memory = Memory(
        store,
        parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path,
        clock=lambda: now[0],
    )
    draft = memory.remember(content("old draft"), principal=agent, draft=True).record
    kept = memory.remember(content("kept active"), principal=curator).record
    rejected = memory.remember(content("bad draft"), principal=agent, draft=True).record
    assert draft and kept and rejected
    memory.transition(rejected.id, Status.REJECTED, principal=curator)

    now[0] += timedelta(days=29)
    assert memory.vacuum(principal=curator).archived == []
    now[0] += timedelta(days=2)
    assert sorted(memory.vacuum(principal=curator).archived) == sorted([draft.id, rejected.id])
    assert store.get_record(kept.id).status is Status.ACTIVE  # type: ignore[union-attr]
    assert store.get_record(draft.id).status is Status.ARCHIVED  # type: ignore[union-attr]
    memory.close()
