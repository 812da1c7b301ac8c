"""The storage protocol's contract, run on every backend (the ``store`` fixture).

These talk to the store directly, below the gate, to pin down what every backend must do
with change sets: all-or-nothing commits, preconditions, ordering and filters.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from cairn.errors import Conflict
from cairn.model import (
    Acl,
    AuditEntry,
    AuditQuery,
    Baseline,
    Content,
    CreateChange,
    Edge,
    EdgeStatus,
    Origin,
    PathLink,
    Proposal,
    ProposalStatus,
    Record,
    RecordQuery,
    Status,
    Version,
    new_id,
)
from cairn.store.base import (
    ChangeSet,
    ChunkDraft,
    ChunkFilter,
    EdgeFilter,
    ExpectProposal,
    ExpectPublished,
    ExpectRecord,
    KeywordQuery,
    PutBaseline,
    PutBatch,
    PutEdge,
    PutPathLink,
    PutProposal,
    PutRecord,
    PutVersion,
    SetPublished,
    Store,
    Write,
)
from cairn.store.sql.dialect import Dialect

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _audit(action: str = "approve", subject: str | None = None) -> AuditEntry:
    return AuditEntry(
        id=new_id("aud"), at=T0, actor="tester", actor_roles=("curator",), action=action,
        subject_id=subject, details={"nested": {"b": 2, "a": [1, 2.5, None]}},
    )  # fmt: skip


def _new(
    title: str,
    *,
    scope: str = "acme/app",
    kind: str = "fact",
    metadata: dict[str, object] | None = None,
    at: datetime = T0,
) -> tuple[Record, Version]:
    content = Content(kind=kind, scope=scope, title=title, body=title, metadata=metadata or {})
    record_id = new_id("rec")
    version = Version(
        id=new_id("ver"), record_id=record_id, number=1, content=content,
        content_hash=content.content_hash(), created_at=at, created_by="tester",
    )  # fmt: skip
    record = Record(
        id=record_id, kind=kind, scope=scope, status=Status.ACTIVE,
        current_version_id=version.id, current_version=1, created_at=at, updated_at=at,
        status_changed_at=at, created_by="tester", content=content,
    )  # fmt: skip
    return record, version


def _create(store: Store, title: str, **kw: object) -> Record:
    record, version = _new(title, **kw)  # type: ignore[arg-type]
    store.commit(
        [
            ChangeSet(
                audit=_audit(subject=record.id),
                writes=(PutRecord(record), PutVersion(version)),
                expects=(ExpectRecord(record.id, None),),
            )
        ]
    )
    return record


def _bump(store: Store, record: Record, body: str) -> Record:
    content = record.content.model_copy(update={"body": body})
    version = Version(
        id=new_id("ver"), record_id=record.id, number=record.current_version + 1,
        content=content, content_hash=content.content_hash(), created_at=T0,
        created_by="tester",
    )  # fmt: skip
    updated = record.model_copy(
        update={"current_version_id": version.id, "current_version": version.number,
                "content": content}
    )  # fmt: skip
    store.commit(
        [
            ChangeSet(
                audit=_audit(subject=record.id),
                writes=(PutRecord(updated), PutVersion(version)),
                expects=(ExpectRecord(record.id, record.current_version_id),),
            )
        ]
    )
    return updated


def _proposal(status: ProposalStatus = ProposalStatus.PENDING) -> Proposal:
    content = Content(kind="fact", scope="acme/app", title="proposed")
    return Proposal(
        id=new_id("prp"), change=CreateChange(content=content), scope="acme/app",
        record_id=None, base_version_id=None, principal_id="bot", principal_roles=("agent",),
        status=status, created_at=T0,
    )  # fmt: skip


def test_commit_returns_increasing_audit_seqs_one_per_changeset(store: Store) -> None:
    first = _create(store, "one")
    record, version = _new("two")
    seqs = store.commit(
        [
            ChangeSet(audit=_audit(), writes=(PutRecord(record), PutVersion(version))),
            ChangeSet(audit=_audit("note")),
        ]
    )
    assert len(seqs) == 2 and seqs[0] < seqs[1]
    assert store.count_audit() == 3
    entries = store.list_audit(AuditQuery())
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert entries[0].subject_id == first.id
    assert entries[0].details == {"nested": {"b": 2, "a": [1, 2.5, None]}}
    assert entries[0].at == T0


def test_a_failed_precondition_writes_nothing_of_the_whole_commit(store: Store) -> None:
    existing = _create(store, "exists")
    record, version = _new("would be new")
    before = store.counts()
    with pytest.raises(Conflict):
        store.commit(
            [
                ChangeSet(audit=_audit(), writes=(PutRecord(record), PutVersion(version))),
                ChangeSet(audit=_audit(), expects=(ExpectRecord(existing.id, None),)),
            ]
        )
    assert store.counts() == before
    assert store.get_record(record.id) is None


def test_expect_record_checks_head_version_and_status(store: Store) -> None:
    record = _create(store, "head")
    newer = _bump(store, record, "second body")
    with pytest.raises(Conflict):  # pinned to the old head
        _bump(store, record, "lost update")
    with pytest.raises(Conflict):
        store.commit(
            [
                ChangeSet(
                    audit=_audit(),
                    expects=(ExpectRecord(record.id, newer.current_version_id, Status.DRAFT),),
                )
            ]
        )
    with pytest.raises(Conflict):
        store.commit([ChangeSet(audit=_audit(), expects=(ExpectRecord("rec_missing", "v"),))])
    assert [v.number for v in store.list_versions(record.id)] == [1, 2]
    head = store.get_record(record.id)
    assert head is not None and head.content.body == "second body"


def test_expect_proposal_and_published(store: Store) -> None:
    proposal = _proposal()
    store.commit([ChangeSet(audit=_audit("propose"), writes=(PutProposal(proposal),))])
    accepted = proposal.model_copy(update={"status": ProposalStatus.ACCEPTED})
    decide = ChangeSet(
        audit=_audit(),
        writes=(PutProposal(accepted),),
        expects=(ExpectProposal(proposal.id, ProposalStatus.PENDING),),
    )
    store.commit([decide])
    with pytest.raises(Conflict):
        store.commit([decide.__class__(audit=_audit(), writes=decide.writes,
                                       expects=decide.expects)])  # fmt: skip
    got = store.get_proposal(proposal.id)
    assert got is not None and got.status is ProposalStatus.ACCEPTED
    assert got.change == proposal.change

    record = _create(store, "pinned")
    baseline = Baseline(
        id=new_id("bsl"), scope="acme/app", name="v1", pins={record.id: record.current_version_id},
        created_at=T0, created_by="tester",
    )  # fmt: skip
    publish = ChangeSet(
        audit=_audit("publish"),
        writes=(PutBaseline(baseline), SetPublished("acme/app", baseline.id)),
        expects=(ExpectPublished("acme/app", None),),
    )
    store.commit([publish])
    assert store.published_baseline_id("acme/app") == baseline.id
    assert store.get_baseline(baseline.id) == baseline
    again = Baseline(**{**baseline.model_dump(), "id": new_id("bsl")})
    with pytest.raises(Conflict):  # someone published meanwhile
        store.commit(
            [
                ChangeSet(
                    audit=_audit("publish"),
                    writes=(PutBaseline(again), SetPublished("acme/app", again.id)),
                    expects=(ExpectPublished("acme/app", None),),
                )
            ]
        )
    assert store.published_baseline_id("acme/app") == baseline.id
    assert [b.id for b in store.list_baselines("acme/app")] == [baseline.id]


def test_versions_are_never_replaced(store: Store) -> None:
    record, version = _new("once")
    store.commit([ChangeSet(audit=_audit(), writes=(PutRecord(record), PutVersion(version)))])
    changed = version.model_copy(update={"content_hash": "x"})
    with pytest.raises(Conflict):
        store.commit([ChangeSet(audit=_audit(), writes=(PutVersion(changed),))])
    assert store.get_version(version.id) == version


def test_a_nested_metadata_filter_matches_whatever_the_order_of_its_keys(store: Store) -> None:
    owner = {"team": "core", "lead": {"name": "ana", "since": 2021}}
    a = _create(store, "alpha", metadata={"owner": owner, "tags": [{"z": 1, "a": 2}]})
    _create(store, "beta", metadata={"owner": {"team": "core", "lead": {"name": "bo"}}})

    def ids(metadata: dict[str, object]) -> list[str]:
        return [r.id for r in store.query_records(RecordQuery(metadata=metadata), scope_globs=())]

    # Keys in the order they were written, reversed, and nested in a list: all the same value.
    assert ids({"owner": owner}) == [a.id]
    assert ids({"owner": {"lead": {"since": 2021, "name": "ana"}, "team": "core"}}) == [a.id]
    assert ids({"tags": [{"a": 2, "z": 1}]}) == [a.id]
    assert ids({"owner": {"team": "core"}}) == []  # a part of an object is not the object
    assert store.get_record(a.id).content.metadata == {  # type: ignore[union-attr]
        "owner": owner,
        "tags": [{"z": 1, "a": 2}],
    }


def test_a_metadata_filter_matches_text_and_numbers_however_they_are_spelt(
    store: Store,
) -> None:
    # Non-ASCII text and floats whose JSON spelling differs between encoders (pydantic
    # writes "José" and 1e-7; json.dumps "Jos\\u00e9" and 1e-07): the same value matches.
    a = _create(store, "alpha", metadata={"owner": "José", "ratio": 1e-7, "big": 1e16})
    _create(store, "beta", metadata={"owner": "Jose", "ratio": 0.5, "big": 1.0})

    def ids(metadata: dict[str, object]) -> list[str]:
        return [r.id for r in store.query_records(RecordQuery(metadata=metadata), scope_globs=())]

    assert ids({"owner": "José"}) == [a.id]
    assert ids({"ratio": 1e-7}) == [a.id]
    assert ids({"big": 1e16}) == [a.id]
    assert ids({"owner": {"José": 1}}) == []


def test_the_sqlite_metadata_filter_matches_rows_older_versions_wrote() -> None:
    # Before pydantic wrote SQLite's JSON, json.dumps did: key-sorted, ASCII, 1e-07.
    metadata = {"owner": "José", "ratio": 1e-7, "lead": {"name": "Zoë", "since": 2021}}
    legacy = json.dumps({"metadata": metadata}, sort_keys=True, separators=(",", ":"))
    current = Content(kind="fact", scope="a/b", title="t", body="t", metadata=metadata)
    with sqlite3.connect(":memory:") as conn:
        conn.execute("CREATE TABLE v (content TEXT)")
        conn.executemany("INSERT INTO v VALUES (?)", [(legacy,), (current.model_dump_json(),)])
        for key, value in metadata.items():
            test, params = Dialect().json_equals("content", ("metadata", key), value)
            assert conn.execute(f"SELECT count(*) FROM v WHERE {test}", params).fetchone() == (2,)


def test_query_records_filters_and_orders_by_id(store: Store) -> None:
    a = _create(store, "alpha", scope="acme/app", metadata={"team": "core", "n": 1})
    b = _create(store, "beta", scope="acme/web", kind="decision", metadata={"team": "web"})
    c = _create(store, "gamma", scope="other/x", at=T0 + timedelta(days=2))

    def ids(query: RecordQuery, globs: tuple[str, ...] = ()) -> list[str]:
        return [r.id for r in store.query_records(query, scope_globs=globs)]

    assert ids(RecordQuery()) == sorted([a.id, b.id, c.id])
    assert ids(RecordQuery(), ("acme/*",)) == sorted([a.id, b.id])
    assert ids(RecordQuery(scope="acme/a?p")) == [a.id]
    assert ids(RecordQuery(scope="acme/[aw]*")) == sorted([a.id, b.id])
    assert ids(RecordQuery(kinds=("decision",))) == [b.id]
    assert ids(RecordQuery(statuses=(Status.DRAFT,))) == []
    assert ids(RecordQuery(metadata={"team": "core"})) == [a.id]
    assert ids(RecordQuery(metadata={"n": 1})) == [a.id]
    assert ids(RecordQuery(created_after=T0 + timedelta(days=1))) == [c.id]
    assert ids(RecordQuery(created_before=T0 + timedelta(days=1))) == sorted([a.id, b.id])
    assert ids(RecordQuery(), ("acme/app", "other/*")) == sorted([a.id, c.id])
    # GLOB is case-sensitive and treats '_' and '%' literally
    assert ids(RecordQuery(scope="ACME/*")) == []
    assert ids(RecordQuery(scope="acme_app")) == []


# Scope names with characters that mean something to LIKE, to regular expressions or to
# bracket expressions, and patterns SQLite takes literally, never matches, or reads as a class.
ODD_SCOPES = ("acme/a", "acme/b", "acme/-", "acme/]", "acme/^", "acme/\\", "acme/%", "acme/_",
              "acme/[x", "acme/:", "acme/é", "acme/z", "acme/`", "acme/[")  # fmt: skip
ODD_GLOBS = ("acme/[ab]", "acme/[^ab]", "acme/[]]", "acme/[^]]", "acme/[]a]", "acme/[a-]",
             "acme/[-a]", "acme/[z-a]", "acme/[a-c-e]", "acme/[[:alpha:]]", "acme/[[.x.]]*",
             "acme/[[=a=]]*", "acme/[^]*", "acme/[\\]", "acme/[%_]", "acme/[x",
             "acme/[*", "acme[/a", "acme/[:]", "acme/[é]", "acme/[a-é]", "acme/[^a-y]",
             "acme/[\\d]", "acme/[.]", "acme/?", "acme/[?]", "acme/[*]", "acme/[]-a]",
             "acme/[^]-a]", "acme/[]--]", "acme/[]-^]", "acme/[]-[]")  # fmt: skip


def test_scope_globs_match_as_sqlite_glob_does(store: Store) -> None:
    """Every backend matches a scope glob exactly as SQLite's GLOB does (asked here of SQLite
    itself), classes included: nothing refused, nothing taken for a regular expression."""
    made = {scope: _create(store, f"in {scope}", scope=scope).id for scope in ODD_SCOPES}
    with sqlite3.connect(":memory:") as oracle:
        for glob in ODD_GLOBS:
            expected = sorted(
                made[scope]
                for scope in ODD_SCOPES
                if oracle.execute("SELECT ? GLOB ?", (scope, glob)).fetchone()[0]
            )
            got = [r.id for r in store.query_records(RecordQuery(scope=glob), scope_globs=())]
            assert got == expected, glob
            through = store.query_records(RecordQuery(), scope_globs=(glob, "none/*"))
            assert [r.id for r in through] == expected, glob


def test_reads_by_id_hash_and_batches(store: Store) -> None:
    a = _create(store, "alpha")
    b = _create(store, "beta")
    assert store.get_records([a.id, b.id, "rec_missing", a.id]).keys() == {a.id, b.id}
    got = store.get_record(a.id)
    assert got is not None and got.content == a.content and got.created_at == T0
    assert [r.id for r in store.find_by_hashes("acme/app", [a.content.content_hash()])] == [a.id]
    assert store.find_by_hashes("acme/other", [a.content.content_hash()]) == []
    v1 = store.get_version_by_number(a.id, 1)
    assert v1 is not None and v1.id == a.current_version_id
    assert store.get_version_by_number(a.id, 2) is None


def _edge(src: str, dst: str, **changes: object) -> Edge:
    fields: dict[str, object] = {
        "id": new_id("edg"), "type": "DEPENDS_ON", "src": src, "dst": dst,
        "scope": "acme/app", "acl": Acl(), "metadata": {"why": "ünïcode"},
        "origin": Origin.HUMAN, "created_at": T0, "created_by": "carol",
    }  # fmt: skip
    fields.update(changes)
    return Edge.model_validate(fields)


def test_edges_and_path_links_upsert(store: Store) -> None:
    record = _create(store, "linked")
    other = _create(store, "other")
    link = PathLink(record_id=record.id, path="docs/a.md", content_hash="h1")
    edge = _edge(record.id, other.id, valid_from=T0)
    store.commit(
        [ChangeSet(audit=_audit(), writes=(PutPathLink(link), PutEdge(edge), PutEdge(edge)))]
    )
    removed = edge.model_copy(
        update={"status": EdgeStatus.REMOVED, "removed_at": T0, "removed_by": "carol",
                "type": "IGNORED_ON_UPDATE"}
    )  # fmt: skip
    store.commit(
        [
            ChangeSet(
                audit=_audit(),
                writes=(PutPathLink(link.model_copy(update={"drifted": True})), PutEdge(removed)),
            )
        ]
    )
    assert store.list_path_links(record.id) == [link.model_copy(update={"drifted": True})]
    # only an edge's state changes once written: its type, ends and ACL are fixed
    assert store.get_edge(edge.id) == removed.model_copy(update={"type": "DEPENDS_ON"})
    assert store.list_edges(None, node_id=other.id) == [store.get_edge(edge.id)]
    assert store.get_edge("edg_missing") is None


def test_edges_page_by_id_and_filter_in_the_store(store: Store) -> None:
    a, b = _create(store, "a"), _create(store, "b")
    made = [_edge(a.id, b.id, type=t) for t in ("DEPENDS_ON", "SUPPORTS") * 5]
    made.append(_edge(a.id, b.id, scope="other/app"))
    store.commit([ChangeSet(audit=_audit(), writes=tuple(PutEdge(e) for e in made))])
    acl_ids = frozenset(row.id for row in store.acls())
    scope_ids = frozenset(i for i, name in store.scopes().items() if name == "acme/app")
    where = EdgeFilter(acl_ids=acl_ids, scope_ids=scope_ids, types=frozenset({"SUPPORTS"}))
    paged: list[str] = []
    after: str | None = None
    while page := store.list_edges(where, node_id=a.id, after=after, limit=2):
        paged += [e.id for e in page]
        assert len(paged) <= 5, "paging must move forward"
        after = page[-1].id
    assert paged == sorted(e.id for e in made if e.type == "SUPPORTS" and e.scope == "acme/app")
    nothing = EdgeFilter(acl_ids=frozenset(), scope_ids=scope_ids)
    assert store.list_edges(nothing, node_id=a.id) == []


def test_list_proposals_and_counts(store: Store) -> None:
    pending = [_proposal() for _ in range(3)]
    store.commit([ChangeSet(audit=_audit(), writes=(PutProposal(p),)) for p in pending])
    assert [p.id for p in store.list_proposals(status=ProposalStatus.PENDING, limit=2)] == sorted(
        p.id for p in pending
    )[:2]
    assert len(store.list_proposals(offset=1)) == 2
    counts = store.counts()
    assert counts["proposals"] == 3 and counts["proposals.pending"] == 3
    assert counts["audit"] == 3


def test_import_refuses_a_store_that_is_not_empty(store: Store) -> None:
    _create(store, "already here")
    rows = list(store.iter_all())
    with pytest.raises(Conflict):
        store.import_rows(rows)
    assert store.counts()["records"] == 1


# ---- a batch of new rows: one statement per table, all or nothing -------------------------


def _batch(n: int, *, scope: str = "acme/app") -> tuple[PutBatch, list[Record]]:
    """``n`` new records with their versions (two chunks each), accepted proposals, an
    ACCEPTED_AS edge and a path link each: what the gate's batch path writes."""
    made = [_new(f"batched {i}", scope=scope) for i in range(n)]
    writes: list[Write] = []
    for record, version in made:
        proposal = Proposal(
            id=new_id("prp"), change=CreateChange(content=record.content), scope=record.scope,
            record_id=None, base_version_id=None, principal_id="tester",
            principal_roles=("curator",), status=ProposalStatus.ACCEPTED, created_at=T0,
            result_record_id=record.id, result_version_id=version.id,
        )  # fmt: skip
        chunks = tuple(
            ChunkDraft(chunk_key=key, heading=key, start=0, end=5, text=f"{key} of {record.id}")
            for key in ("intro", "details")
        )
        edge = Edge(
            id=new_id("edg"), type="ACCEPTED_AS", src=proposal.id, dst=version.id,
            scope=record.scope, acl=record.content.acl, origin=Origin.SYSTEM, created_at=T0,
            created_by="system", proposal_id=proposal.id,
        )  # fmt: skip
        link = PathLink(record_id=record.id, path=f"docs/{record.id}.md", content_hash="h")
        writes += [PutProposal(proposal), PutRecord(record), PutVersion(version, chunks),
                   PutEdge(edge), PutPathLink(link)]  # fmt: skip
    return PutBatch.of(writes), [record for record, _ in made]


def _tables(store: Store) -> tuple[object, ...]:
    return (
        store.counts(),
        store.chunk_count(),
        len(store.list_edges(None, limit=10_000)),
        len(store.list_path_links()),
    )


def test_a_batch_writes_every_row_of_every_table(store: Store) -> None:
    before = store.chunk_changes(0)
    write, records = _batch(120)
    (seq,) = store.commit([ChangeSet(audit=_audit("batch"), writes=(write,))])
    assert seq > 0
    assert store.get_records([r.id for r in records]) == {r.id: r for r in records}
    counts = store.counts()
    assert counts["records"] == counts["versions"] == counts["proposals"] == 120
    assert store.chunk_count() == 240 and len(store.list_path_links()) == 120
    assert len(store.list_edges(None, limit=1_000)) == 120
    for record, proposal in zip(records, write.proposals, strict=True):
        assert store.get_proposal(proposal.id) == proposal
        assert store.list_path_links(record.id)[0].path == f"docs/{record.id}.md"
    # the chunks are indexed for keyword search and numbered for the catalogs, each
    # version's after the one before (a catalog following seqs misses none)
    changes = store.chunk_changes(before[-1].seq if before else 0)
    assert [c.record_id for c in changes] == [r.id for r in records for _ in range(2)]
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    assert all(c.is_head and c.status == "active" for c in changes)
    readable = ChunkFilter(acl_ids=frozenset(a.id for a in store.acls()),
                           statuses=frozenset({"active"}))  # fmt: skip
    hits = store.keyword_search(KeywordQuery(terms=("details",)), readable, 500)
    assert len(hits) == 120


@pytest.mark.parametrize("taken", ["proposals", "records", "versions", "edges"])
def test_a_batch_with_a_stored_id_writes_nothing(store: Store, taken: str) -> None:
    """Every row of a batch is new: one id already stored (here in the last item, after
    the rest went in) fails the commit, and nothing of the batch remains."""
    first, _ = _batch(1)
    store.commit([ChangeSet(audit=_audit("batch"), writes=(first,))])
    before = _tables(store)
    write, _ = _batch(50)
    clash = {
        "proposals": lambda w: dataclasses.replace(
            w, proposals=(*w.proposals[:-1], w.proposals[-1].model_copy(
                update={"id": first.proposals[0].id}))),
        "records": lambda w: dataclasses.replace(
            w, records=(*w.records[:-1], w.records[-1].model_copy(
                update={"id": first.records[0].id}))),
        "versions": lambda w: dataclasses.replace(
            w, versions=(*w.versions[:-1], PutVersion(w.versions[-1].version.model_copy(
                update={"id": first.versions[0].version.id}), w.versions[-1].chunks))),
        "edges": lambda w: dataclasses.replace(
            w, edges=(*w.edges[:-1], w.edges[-1].model_copy(update={"id": first.edges[0].id}))),
    }[taken](write)  # fmt: skip
    with pytest.raises(Conflict):
        store.commit([ChangeSet(audit=_audit("batch"), writes=(clash,))])
    assert _tables(store) == before
    assert store.get_edge(first.edges[0].id) == first.edges[0]


def test_records_are_found_by_many_hashes(store: Store) -> None:
    a, b, c = (_create(store, title) for title in ("alpha", "beta", "gamma"))
    _create(store, "alpha", scope="acme/other")
    hashes = [r.content.content_hash() for r in (c, a, b)] + ["0" * 64]
    assert [r.id for r in store.find_by_hashes("acme/app", hashes)] == sorted([a.id, b.id, c.id])
    # more hashes than one statement takes
    many = [f"{i:064x}" for i in range(1_200)] + [b.content.content_hash()]
    assert [r.id for r in store.find_by_hashes("acme/app", many)] == [b.id]


def test_a_misspelt_listing_key_is_refused_not_dropped(store: Store) -> None:
    # Dropping it would list without the filter it meant: someone else's proposals, every
    # record, any task.
    listings: list[Callable[[], object]] = [
        lambda: store.list_proposals(proposr="pr_someone"),  # type: ignore[call-arg]
        lambda: store.query_records(RecordQuery(), scope_glob=["a/*"]),  # type: ignore[call-arg]
        lambda: store.list_tasks("owner", contextid="c1"),  # type: ignore[call-arg]
    ]
    for listing in listings:
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            listing()
