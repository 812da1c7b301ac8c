"""``cairn export`` / ``cairn import``: whole stores as JSON Lines, between backends."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cairn.errors import Conflict, InvalidInput
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import ContentPatch, EdgeDraft, Principal, RecordQuery, Status
from cairn.store.base import Store
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from cairn.store.transfer import export_store, import_store
from tests.conftest import content
from tests.pg import PgCluster


def _export(store: Store) -> str:
    out = io.StringIO()
    export_store(store, out)
    return out.getvalue()


def _populate(store: Store, root: Path, curator: Principal, agent: Principal) -> None:
    """A history touching every table: versions, drafts, queue, rejection, rebase,
    supersession, archive, baselines, published pointers, path links."""
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "deploy.md").write_text("deploy steps\n")
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=root)
    a = memory.remember(content("Deploys need a ticket", metadata={"team": "ops", "n": 1.5}),
                        principal=curator, paths=["docs/deploy.md"]).record  # fmt: skip
    assert a is not None
    memory.update(a.id, ContentPatch(body="Deploys need a ticket and a reviewer"),
                  principal=curator)  # fmt: skip
    queued = memory.update(a.id, ContentPatch(title="Deploys need two tickets"), principal=agent)
    memory.update(a.id, ContentPatch(tags=("ops",)), principal=curator)
    memory.rebase(queued.proposal.id, principal=agent)
    belief = memory.remember(content("Ünïcode ✓ belief", kind="belief"), principal=agent)
    memory.decide(belief.proposal.id, approve=False, principal=curator, reason="unsupported")
    draft = memory.remember(content("A draft note"), principal=agent, draft=True).record
    assert draft is not None
    memory.transition(draft.id, Status.ACTIVE, principal=curator)
    memory.publish("acme/app", principal=curator, name="first")
    b = memory.supersede(a.id, principal=curator, content=content("Deploys are automatic"))
    assert b.record is not None
    memory.link(
        EdgeDraft(type="DEPENDS_ON", src=b.record.id, dst=draft.id, metadata={"why": "notes"}),
        principal=curator,
    )
    memory.archive(draft.id, principal=curator)
    memory.publish("acme/app", principal=curator, name="second")
    (root / "docs" / "deploy.md").write_text("changed\n")
    memory.refresh(principal=curator)


def test_sqlite_to_postgres_to_sqlite_round_trip_is_identical(
    tmp_path: Path, pg_cluster: PgCluster, curator: Principal, agent: Principal
) -> None:
    source = SqliteStore(tmp_path / "source.db")
    _populate(source, tmp_path, curator, agent)
    original = _export(source)
    url = pg_cluster.new_database()
    try:
        with PostgresStore(url) as pg:
            counts = import_store(pg, io.StringIO(original))
            assert counts["record"] == 3 and counts["audit"] == source.count_audit()
            via_pg = _export(pg)
            assert pg.count_audit() == source.count_audit()
        back = SqliteStore(tmp_path / "back.db")
        import_store(back, io.StringIO(via_pg))
        assert via_pg == original
        assert _export(back) == original
        # ids, version numbers and audit seqs survive, and the copy keeps working
        for record in source.query_records(RecordQuery(), scope_globs=()):
            assert back.list_versions(record.id) == source.list_versions(record.id)
        memory = Memory(back, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
        assert memory.remember(content("Written after import"), principal=curator).record
        back.close()
    finally:
        pg_cluster.drop_database(url)
        source.close()


def test_export_lines_are_typed_and_ordered(
    store: Store, tmp_path: Path, curator: Principal, agent: Principal
) -> None:
    _populate(store, tmp_path, curator, agent)
    lines = [json.loads(line) for line in _export(store).splitlines()]
    assert lines[0] == {"format": "cairn-export", "version": 2}
    assert lines[-1]["type"] == "end"
    kinds = [line["type"] for line in lines[1:-1]]
    order = ["record", "version", "proposal", "audit", "baseline", "published", "edge",
             "path_link"]  # fmt: skip
    assert kinds == sorted(kinds, key=order.index)
    assert set(kinds) == set(order)
    audit = [line["data"]["seq"] for line in lines if line.get("type") == "audit"]
    assert audit == list(range(1, len(audit) + 1))


def _export_lines(tmp_path: Path, curator: Principal, agent: Principal) -> list[str]:
    """The lines of an export of a store holding a history that touches every table."""
    source = SqliteStore(tmp_path / "source.db")
    _populate(source, tmp_path, curator, agent)
    lines = _export(source).splitlines(keepends=True)
    source.close()
    return lines


def test_a_cut_short_or_wrong_file_loads_nothing(
    store: Store, tmp_path: Path, curator: Principal, agent: Principal
) -> None:
    full = _export_lines(tmp_path, curator, agent)
    for broken in (
        full[:-1],  # no trailer
        full[:5] + full[6:],  # a row missing: counts disagree
        [full[0], *reversed(full[1:-1]), full[-1]],  # out of order
        ['{"format": "something else"}\n', *full[1:]],
    ):
        with pytest.raises(InvalidInput):
            import_store(store, broken)
        assert store.counts()["records"] == 0 and store.count_audit() == 0
    import_store(store, full)
    with pytest.raises(Conflict):  # never into a store that holds anything
        import_store(store, full)


def test_a_bad_row_is_named_in_one_line_without_the_parsers_internals(
    store: Store, tmp_path: Path, curator: Principal, agent: Principal
) -> None:
    full = _export_lines(tmp_path, curator, agent)
    index = next(i for i, line in enumerate(full) if '"type":"version"' in line.replace(" ", ""))
    row = json.loads(full[index])
    row["data"]["number"] = "not a number"
    broken = [*full[:index], json.dumps(row) + "\n", *full[index + 1 :]]
    with pytest.raises(InvalidInput) as refused:
        import_store(store, broken)
    said = refused.value.message
    assert f"line {index + 1}: not a valid version row" in said and "number" in said
    assert "\n" not in said and "pydantic" not in said and "not a number" not in said
    assert store.counts()["records"] == 0


def test_a_version_1_export_still_imports_its_links_for_curators_only(
    store: Store, tmp_path: Path, curator: Principal, agent: Principal
) -> None:
    """Version 1 files held edges as bare (src, dst, type, created_at): they come back as
    system edges only curators read, since the file says nothing about who else may."""
    source = SqliteStore(tmp_path / "source.db")
    _populate(source, tmp_path, curator, agent)
    lines = []
    for line in _export(source).splitlines():
        obj = json.loads(line)
        if obj.get("format"):
            obj["version"] = 1
        elif obj.get("type") == "edge":
            data = obj["data"]
            obj["data"] = {k: data[k] for k in ("src", "dst", "type", "created_at")}
        lines.append(json.dumps(obj) + "\n")
    source.close()
    counts = import_store(store, lines)
    imported = store.list_edges(None, limit=1000)
    assert len(imported) == counts["edge"] > 0
    assert {e.type for e in imported} >= {"SUPERSEDES", "ACCEPTED_AS", "DEPENDS_ON"}
    assert all(e.acl.roles == ("curator",) and e.origin.value == "system" for e in imported)
