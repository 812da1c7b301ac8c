"""The retrieval index's contract, run on every backend (the ``store`` fixture).

Chunks are written with their version in the commit, their filter columns follow the
record's state with a fresh ``seq``, keyword search filters before it ranks, timestamps
compare as instants, and the vector cache is keyed by content hash.
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cairn.store.sqlite as sqlite_module
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import AuditEntry, Content, Principal, Record, Status, Version, new_id
from cairn.retrieval.recall import HOPELESS_POSTINGS
from cairn.search.fts import select_terms
from cairn.store.base import (
    VECTORS_FROM,
    ChangeSet,
    ChunkDraft,
    ChunkFilter,
    ExpectRecord,
    KeywordQuery,
    PutRecord,
    PutVersion,
    Store,
    text_hash,
)
from cairn.store.migrations import SQLITE_MIGRATIONS
from cairn.store.pg_migrations import PG_MIGRATIONS
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from cairn.store.transfer import export_store, import_store
from tests.pg import PgCluster

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _audit(subject: str) -> AuditEntry:
    return AuditEntry(
        id=new_id("aud"), at=T0, actor="tester", actor_roles=("curator",), action="approve",
        subject_id=subject,
    )  # fmt: skip


def _chunks(*texts: str, heading: str = "") -> tuple[ChunkDraft, ...]:
    return tuple(
        ChunkDraft(chunk_key=f"c{i}", heading=heading, start=0, end=len(t), text=t)
        for i, t in enumerate(texts)
    )


def _create(
    store: Store, title: str, *texts: str, acl: dict[str, object] | None = None, **fields: object
) -> tuple[Record, Version]:
    content = Content.model_validate(
        {"kind": "fact", "scope": "acme/app", "title": title, "body": " ".join(texts)}
        | ({"acl": acl} if acl else {})
        | fields
    )
    record_id = new_id("rec")
    version = Version(
        id=new_id("ver"), record_id=record_id, number=1, content=content,
        content_hash=content.content_hash(), created_at=T0, created_by="tester",
    )  # fmt: skip
    record = Record(
        id=record_id, kind=content.kind, scope=content.scope, status=Status.ACTIVE,
        current_version_id=version.id, current_version=1, created_at=T0, updated_at=T0,
        status_changed_at=T0, created_by="tester", content=content,
    )  # fmt: skip
    store.commit(
        [
            ChangeSet(
                audit=_audit(record.id),
                writes=(PutRecord(record), PutVersion(version, chunks=_chunks(*texts))),
                expects=(ExpectRecord(record.id, None),),
            )
        ]
    )
    return record, version


def _bump(store: Store, record: Record, *texts: str) -> tuple[Record, Version]:
    content = record.content.model_copy(update={"body": " ".join(texts)})
    version = Version(
        id=new_id("ver"), record_id=record.id, number=record.current_version + 1,
        content=content, content_hash=content.content_hash(), created_at=T0 + timedelta(days=1),
        created_by="tester",
    )  # fmt: skip
    updated = record.model_copy(
        update={"current_version_id": version.id, "current_version": version.number,
                "content": content}
    )  # fmt: skip
    store.commit(
        [
            ChangeSet(
                audit=_audit(record.id),
                writes=(PutRecord(updated), PutVersion(version, chunks=_chunks(*texts))),
                expects=(ExpectRecord(record.id, record.current_version_id),),
            )
        ]
    )
    return updated, version


def _set_status(store: Store, record: Record, status: Status) -> Record:
    changed = record.model_copy(update={"status": status})
    store.commit([ChangeSet(audit=_audit(record.id), writes=(PutRecord(changed),))])
    return changed


def _everyone(store: Store, **kw: object) -> ChunkFilter:
    fields: dict[str, object] = {
        "acl_ids": frozenset(a.id for a in store.acls()),
        "statuses": frozenset({"active"}),
    }
    fields.update(kw)
    return ChunkFilter(**fields)  # type: ignore[arg-type]


def _terms(text: str) -> KeywordQuery:
    return KeywordQuery(select_terms(text))


def _chunk_holding(store: Store, word: str) -> int:
    """The id of the one chunk whose text holds ``word`` (read from the rows, not searched)."""
    rows = store.chunk_rows([m.id for m in store.chunk_changes(0)])
    (found,) = [chunk_id for chunk_id, row in rows.items() if word in row.text.split()]
    return found


def _search(store: Store, query: str, where: ChunkFilter, k: int = 10) -> list[int]:
    match = _terms(query)
    assert match.terms
    return [chunk_id for chunk_id, _ in store.keyword_search(match, where, k)]


def test_chunks_are_written_with_their_version_and_follow_the_record(store: Store) -> None:
    assert store.chunk_count() == 0 and store.chunk_changes(0) == []
    record, v1 = _create(store, "Deploy steps", "Deploys need a ticket.", "Then a reviewer.")
    first = store.chunk_changes(0)
    assert [c.version_id for c in first] == [v1.id, v1.id]
    assert all(c.is_head and c.status == "active" and not c.superseded for c in first)
    assert all(c.seq > 0 for c in first) and [c.seq for c in first] == sorted(c.seq for c in first)
    assert store.chunk_count() == 2
    assert store.scopes()[first[0].scope_id] == "acme/app"
    (acl,) = store.acls()
    assert (acl.id, acl.roles, acl.labels, acl.sensitivity) == (
        first[0].acl_id,
        (),
        ("internal",),
        0,
    )

    mark = max(c.seq for c in first)
    record, v2 = _bump(store, record, "Deploys need two tickets.")
    changed = store.chunk_changes(mark)
    # the old head's chunks lost is_head (a new seq each), the new version's chunk arrived
    assert {(c.version_id, c.is_head) for c in changed} == {(v1.id, False), (v2.id, True)}
    assert len(changed) == 3 and min(c.seq for c in changed) > mark
    assert [c.seq for c in changed] == sorted(c.seq for c in changed)
    assert store.chunk_count() == 3

    mark = max(c.seq for c in changed)
    _set_status(store, record, Status.ARCHIVED)
    archived = store.chunk_changes(mark)
    assert {c.id for c in archived} == {c.id for c in changed}
    assert all(c.status == "archived" for c in archived)
    # a state write that changes nothing about the chunks does not renumber them
    mark = max(c.seq for c in archived)
    _set_status(store, record.model_copy(update={"status": Status.ARCHIVED}), Status.ARCHIVED)
    assert store.chunk_changes(mark) == []
    assert store.chunk_changes(0, limit=2) == store.chunk_changes(0)[:2]


def test_chunk_rows_carry_text_title_and_span(store: Store) -> None:
    _, version = _create(store, "Runbook", "Restart the worker.")
    (meta,) = store.chunk_changes(0)
    row = store.chunk_rows([meta.id, meta.id, 999_999])[meta.id]
    assert (row.title, row.text, row.chunk_key, row.version_no) == (
        "Runbook", "Restart the worker.", "c0", 1
    )  # fmt: skip
    assert (row.start, row.end, row.heading) == (0, len("Restart the worker."), "")
    assert row.meta == meta and meta.record_id == version.record_id
    assert meta.text_hash == text_hash("Runbook", "", "Restart the worker.")
    assert meta.created_at == T0
    assert list(store.chunk_rows([meta.id, 999_999])) == [meta.id]


def test_chunk_metas_heads_readable_and_index_seq(store: Store) -> None:
    """What a search re-checks its results against, and how far a mirror must get."""
    assert store.index_seq() == 0 and store.chunk_metas([1, 2]) == {}
    public, _ = _create(store, "Public note", "Anyone may read this.", acl={"labels": ["public"]})
    record, v1 = _create(store, "Made secret", "Once public.", acl={"labels": ["public"]})
    changes = store.chunk_changes(0)
    assert store.index_seq() == max(c.seq for c in changes)
    assert store.chunk_metas([c.id for c in changes] + [999_999]) == {c.id: c for c in changes}
    secret = record.content.model_copy(update={"acl": record.content.acl.model_copy(
        update={"labels": ("secret",)})})  # fmt: skip
    updated = record.model_copy(update={"content": secret})
    _bump(store, updated, "Now secret.")
    assert store.index_seq() == max(c.seq for c in store.chunk_changes(0))
    acls = {a.labels: a.id for a in store.acls()}
    public_acl, secret_acl = acls[("public",)], acls[("secret",)]
    both = [public.id, record.id, "rec_none"]
    assert store.heads_readable(both, [public_acl]) == {public.id}
    assert store.heads_readable(both, [public_acl, secret_acl]) == {public.id, record.id}
    assert store.heads_readable([], [public_acl]) == set()
    assert store.heads_readable(both, []) == set()
    old = [m for m in store.chunk_metas([c.id for c in changes]).values() if m.version_id == v1.id]
    assert old and not any(m.is_head for m in old)  # metas are as stored now


def test_keyword_search_trims_before_it_ranks(store: Store) -> None:
    for n in range(12):
        _create(store, f"Password rotation {n}", "The database password rotation schedule.",
                acl={"labels": ["confidential"]})  # fmt: skip
    _, public = _create(store, "Team notes", "Passwords rotate sometimes.")
    public_acl = {a.id for a in store.acls() if a.labels == ("internal",)}
    where = _everyone(store, acl_ids=frozenset(public_acl))
    hits = store.keyword_search(_terms("database password rotation"), where, 1)
    assert len(hits) == 1
    assert store.chunk_rows([hits[0][0]])[hits[0][0]].meta.version_id == public.id
    everything = _search(store, "database password rotation", _everyone(store), k=50)
    assert len(everything) == 13
    assert _search(store, "rotation", _everyone(store, acl_ids=frozenset())) == []


def test_keyword_ranking_prefers_title_hits_and_stems(store: Store) -> None:
    _, in_body = _create(store, "Weekly notes", "The staging cluster is rebuilt.")
    _, in_title = _create(store, "Staging cluster", "It is rebuilt every week.")
    hits = store.keyword_search(_terms("staging"), _everyone(store), 10)
    rows = store.chunk_rows([h[0] for h in hits])
    assert [rows[h[0]].meta.version_id for h in hits] == [in_title.id, in_body.id]
    assert hits[0][1] > hits[1][1] > 0  # higher is better
    # stemming: "rebuilding" finds "rebuilt"? no, but "clusters" finds "cluster"
    assert len(_search(store, "clusters", _everyone(store))) == 2


def test_keyword_ranking_weighs_a_rare_term_over_a_common_one(store: Store) -> None:
    # "status" is in every chunk and fills one of them; "kestrel" is in one chunk only. BM25
    # (SQLite) weighs terms by rarity; PostgreSQL's ts_rank_cd does not, so its store sums
    # idf(term) * ts_rank_cd(term): without that the status-filled chunk comes first.
    for n in range(30):
        _create(store, f"Standup {n}", f"Status update number {n}.")
    _, filled = _create(store, "Status status", "Status of the status: status unchanged.")
    _, rare = _create(store, "Birds", "A kestrel status sighting.")
    hits = store.keyword_search(_terms("status kestrel"), _everyone(store), 3)
    rows = store.chunk_rows([h[0] for h in hits])
    ranked = [rows[h[0]].meta.version_id for h in hits]
    assert ranked[:2] == [rare.id, filled.id]


def test_keyword_filter_axes(store: Store) -> None:
    a, va = _create(store, "Alpha deploy", "deploy alpha", kind="decision")
    _, vb = _create(store, "Beta deploy", "deploy beta", scope="globex/app")
    a2, va2 = _bump(store, a, "deploy alpha again")

    def versions(**kw: object) -> set[str]:
        where = _everyone(store, **kw)
        return {
            r.meta.version_id for r in store.chunk_rows(_search(store, "deploy", where)).values()
        }

    assert versions() == {va2.id, vb.id}
    assert versions(head_only=False) == {va.id, va2.id, vb.id}
    assert versions(version_ids=frozenset({va.id})) == {va.id}
    assert versions(kinds=frozenset({"decision"})) == {va2.id}
    globex = {i for i, s in store.scopes().items() if s == "globex/app"}
    assert versions(scope_ids=frozenset(globex)) == {vb.id}
    assert versions(record_ids=frozenset({a.id})) == {va2.id}
    assert versions(statuses=frozenset({"draft"})) == set()
    _set_status(store, a2, Status.DRAFT)
    assert versions(statuses=frozenset({"draft"})) == {va2.id}
    assert versions(created_after=T0 + timedelta(hours=1)) == set()  # a2 is a draft now
    assert versions(created_before=T0 + timedelta(hours=1)) == {vb.id}


def test_chunks_carry_their_source_and_a_time_range_filters_them(store: Store) -> None:
    _create(store, "Old plan", "deploy on fridays", valid_from=T0 - timedelta(days=10))
    _, recent = _create(store, "New plan", "deploy on mondays")  # written at T0
    plus2 = timezone(timedelta(hours=2))
    metas = {m.version_id: m for m in store.chunk_changes(0)}
    assert {m.source_kind for m in metas.values()} == {"record"}
    assert metas[recent.id].source_time == T0  # no validity: when it was written

    def titles(**kw: object) -> set[str]:
        rows = store.chunk_rows(_search(store, "deploy", _everyone(store, **kw)))
        return {r.title for r in rows.values()}

    assert titles() == {"Old plan", "New plan"}
    assert titles(source_after=(T0 - timedelta(days=1)).astimezone(plus2)) == {"New plan"}
    assert titles(source_before=T0 - timedelta(days=1)) == {"Old plan"}
    assert titles(source_kinds=frozenset({"segment"})) == set()


def test_timestamps_compare_as_instants_whatever_the_offset(store: Store) -> None:
    until = T0 + timedelta(days=30)
    _create(store, "Freeze window", "No deploys during the freeze.",
                         valid_from=T0, valid_to=until)  # fmt: skip
    plus2 = timezone(timedelta(hours=2))

    def visible(at: datetime) -> bool:
        return bool(_search(store, "freeze", _everyone(store, valid_at=at)))

    assert visible((until - timedelta(minutes=30)).astimezone(plus2))
    assert not visible((until + timedelta(minutes=30)).astimezone(plus2))
    assert not visible((T0 - timedelta(minutes=1)).astimezone(plus2))
    assert visible(T0.replace(tzinfo=None))  # naive means UTC
    (meta,) = store.chunk_changes(0)
    assert (meta.valid_from, meta.valid_to) == (T0, until)
    assert meta.created_at.utcoffset() == timedelta(0)
    after = _everyone(store, created_after=T0.astimezone(plus2))
    assert _search(store, "freeze", after) == [meta.id]


def test_doc_freq_and_chunk_count(store: Store) -> None:
    _create(store, "One", "Each deploy needs a ticket.")
    _create(store, "Two", "A ticket for every change.", "Unrelated words.")
    assert store.chunk_count() == 3
    assert store.doc_freq("ticket") == 2
    assert store.doc_freq("tickets") == 2  # stemmed as the index stems
    assert store.doc_freq("zebra") == 0
    assert store.doc_freq("") == 0


def test_sqlite_doc_freq_counts_up_to_a_cap_in_the_text_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts past the cap tell keyword recall nothing more (it drops such terms), and
    counting them cost a walk of the term's whole posting list."""
    assert HOPELESS_POSTINGS < sqlite_module.DOC_FREQ_CAP
    monkeypatch.setattr(sqlite_module, "DOC_FREQ_CAP", 3)
    store = SqliteStore(tmp_path / "cairn.db")
    for n in range(5):
        _create(store, f"Note {n}", f"ticket number {n}")
    assert store.doc_freq("ticket") == 3
    assert store.doc_freq("number") == 3
    scope_token = sqlite_module._scope_token(next(iter(store.scopes())))
    assert store.doc_freq(scope_token) == 0  # each chunk's scope token is not its text
    store.close()


def test_vector_cache_is_keyed_by_content_hash(store: Store) -> None:
    model = "test-model:4"
    _create(store, "Same title", "Same text.")
    _create(store, "Same title", "Same text.")  # another record, same passage: one embedding
    _create(store, "Other", "Different text.")
    pending = store.pending_vectors(model, 10)
    assert len(pending) == 2 and store.vector_lag(model) == 2
    assert pending[0] == (text_hash("Same title", "", "Same text."), "Same title\nSame text.")
    assert store.pending_vectors(model, 1) == pending[:1]
    vectors = {h: np.arange(4, dtype=np.float32) + i for i, (h, _) in enumerate(pending)}
    store.put_vectors(model, 4, [(h, v.tobytes()) for h, v in vectors.items()])
    assert store.vector_lag(model) == 0 and store.pending_vectors(model, 10) == []
    assert store.vector_lag("another-model:4") == 2
    got = store.get_vectors(model, [*vectors, "unknown"])
    assert got == {h: v.tobytes() for h, v in vectors.items()}
    # a cached vector is kept: the cache is never rewritten
    first = pending[0][0]
    store.put_vectors(model, 4, [(first, np.ones(4, dtype=np.float32).tobytes())])
    assert store.get_vectors(model, [first])[first] == vectors[first].tobytes()
    store.put_vectors(model, 4, [])


def _reopened(store: Store) -> Store:
    """The same store as another process opens it."""
    if isinstance(store, SqliteStore):
        return SqliteStore(store.path)
    assert isinstance(store, PostgresStore)
    return PostgresStore(store.url)


def _commit_order(store: Store) -> dict[str, int]:
    """Each chunk text's place in the order the store's scan for waiting chunks follows:
    SQLite's chunk ids, PostgreSQL's change numbers."""
    column = "id" if isinstance(store, SqliteStore) else "seq"
    return {m.text_hash: getattr(m, column) for m in store.chunk_changes(0)}


def _embed(store: Store, model: str, pending: list[tuple[str, str]]) -> None:
    store.put_vectors(model, 4, [(h, np.ones(4, dtype=np.float32).tobytes()) for h, _ in pending])


def test_a_new_process_counts_and_scans_what_waits_from_the_kept_cursor(store: Store) -> None:
    """What waits for a vector is found from where the last scan found the first waiting
    chunk, kept in the store with the vectors: a status read in a new process counts the
    backlog, not the whole store, and every chunk before that point has its vector."""
    model = "test-model:4"
    assert store.vectors_from(model) == 0
    for i in range(6):
        _create(store, f"Note {i}", f"Text number {i}.")
    first = store.pending_vectors(model, 4)
    _embed(store, model, first)
    second = store.pending_vectors(model, 10)  # the last two
    assert len(second) == 2
    _embed(store, model, second[:1])
    _create(store, "Later", "Written after the scans.")
    order = _commit_order(store)
    other = _reopened(store)
    try:
        # where the second scan found its first waiting chunk: past the first four
        assert other.vectors_from(model) == order[second[0][0]]
        assert other.vectors_from(model) > max(order[h] for h, _ in first)
        assert other.vectors_from("another-model:4") == 0
        assert other.vector_lag(model) == 2 and store.vector_lag(model) == 2
        assert [h for h, _ in other.pending_vectors(model, 10)] == [
            second[1][0],
            text_hash("Later", "", "Written after the scans."),
        ]
        held = other.get_vectors(model, list(order))
        assert all(h in held for h, at in order.items() if at < other.vectors_from(model))
        # a process whose cursor is older than the kept one never moves it back
        stale = _reopened(store)
        try:
            stale.pending_vectors(model, 10)  # its cursor: the chunk of second[1]
            _embed(other, model, other.pending_vectors(model, 10))
            _create(store, "Latest", "Written last.")
            _embed(other, model, other.pending_vectors(model, 10))
            assert other.vector_lag(model) == 0
            kept = _reopened(store)
            moved = kept.vectors_from(model)
            kept.close()
            assert moved == max(_commit_order(store).values())
            _embed(stale, model, second[:1])  # already stored: only its old cursor is offered
            kept = _reopened(store)
            assert kept.vectors_from(model) == moved
            kept.close()
        finally:
            stale.close()
    finally:
        other.close()


def _as_before_the_cursor(store: Store) -> Store:
    """``store`` as a cairn from before the kept embedding cursor left it (the index on a
    chunk's text hash, no cursor), opened again: the migration runs as on an upgrade."""
    statements = (
        f"DELETE FROM index_meta WHERE key LIKE '{VECTORS_FROM}%'",
        "CREATE INDEX chunks_text_hash ON chunks (text_hash)",
    )
    if isinstance(store, SqliteStore):
        with store._write_txn() as conn:
            for statement in statements:
                conn.execute(statement)
            conn.execute(f"DELETE FROM schema_migrations WHERE version >= {len(SQLITE_MIGRATIONS)}")
        store.close()
        return SqliteStore(store.path)
    assert isinstance(store, PostgresStore)
    url = store.url
    store.close()
    step = [m.name for m in PG_MIGRATIONS].index("no_text_hash_index") + 1
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET search_path = cairn")
        for statement in statements:
            conn.execute(statement)
        conn.execute(f"DELETE FROM schema_migrations WHERE version >= {step}")
    return PostgresStore(url)


def test_an_upgraded_store_finds_its_embedding_cursor_once(store: Store) -> None:
    """A store with vectors from before gets each model's cursor from its migration: where
    the first chunk still waits, or past the last chunk when none does (else, with nothing
    left to embed, no write would ever keep one and every count would read every chunk)."""
    partly, wholly = "test-model:4", "other-model:4"
    for i in range(4):
        _create(store, f"Note {i}", f"Text number {i}.")
    pending = store.pending_vectors(partly, 10)
    _embed(store, partly, pending[:2])
    _embed(store, wholly, store.pending_vectors(wholly, 10))
    order = _commit_order(store)
    upgraded = _as_before_the_cursor(store)
    try:
        assert "text_hash" not in " ".join(_chunk_indexes(upgraded).values())
        assert upgraded.vectors_from(partly) == order[pending[2][0]]
        assert upgraded.vectors_from(wholly) == max(order.values()) + 1
        assert upgraded.vectors_from("unused-model:4") == 0
        assert upgraded.vector_lag(partly) == 2 and upgraded.vector_lag(wholly) == 0
        _create(upgraded, "Later", "Written after the upgrade.")  # past the cursor: counted
        assert upgraded.vector_lag(wholly) == 1 and upgraded.vector_lag(partly) == 3
    finally:
        upgraded.close()


def _chunk_indexes(store: Store) -> dict[str, str]:
    """Each index on ``chunks``: its name and what it keys (a definition, or column names)."""
    if isinstance(store, SqliteStore):
        with closing(sqlite3.connect(store.path)) as conn:
            names = [row[1] for row in conn.execute("PRAGMA index_list(chunks)")]
            return {
                name: " ".join(str(row[2]) for row in conn.execute(f"PRAGMA index_info({name})"))
                for name in names
            }
    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.url) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE schemaname = 'cairn' AND tablename = 'chunks'"
        ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def test_no_index_keys_a_chunks_text_hash(store: Store) -> None:
    """Nothing looks chunks up by their text's hash, and an index on it cost every batch of
    writes a scattered page per chunk (docs/benchmarks.md): it is gone, the others stay."""
    _create(store, "Note", "Some text.")
    indexes = _chunk_indexes(store)
    assert any("seq" in keyed for keyed in indexes.values())
    assert not [name for name, keyed in indexes.items() if "text_hash" in keyed]


def test_chunk_vectors_reads_each_chunks_vector_by_its_text(store: Store) -> None:
    model = "test-model:4"
    _create(store, "Same title", "Same text.")
    _create(store, "Same title", "Same text.")  # two chunks, one text: one stored vector
    _create(store, "Other", "Different text.")
    same_a, same_b, other = (m.id for m in store.chunk_changes(0))
    (same_hash, _), (other_hash, _) = store.pending_vectors(model, 10)
    vector = np.arange(4, dtype=np.float32)
    store.put_vectors(model, 4, [(same_hash, vector.tobytes())])
    unknown = max(same_a, same_b, other) + 100
    assert store.chunk_vectors(model, [same_a, same_b, other, unknown]) == {
        same_a: vector.tobytes(),
        same_b: vector.tobytes(),
    }  # the chunk with no vector yet and the unknown id are left out
    assert store.chunk_vectors("another-model:4", [same_a]) == {}
    store.put_vectors(model, 4, [(other_hash, (vector + 1).tobytes())])
    assert store.chunk_vectors(model, [other]) == {other: (vector + 1).tobytes()}
    # a search's finalists: many ids (read in parts, several statements each), repeats
    many = [unknown + i for i in range(2100)] + [other, same_b, same_a, other]
    assert store.chunk_vectors(model, many) == {
        same_a: vector.tobytes(),
        same_b: vector.tobytes(),
        other: (vector + 1).tobytes(),
    }


def test_import_rebuilds_the_keyword_index(
    store: Store, tmp_path: Path, curator: Principal
) -> None:
    source = SqliteStore(tmp_path / "source.db")
    memory = Memory(source, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
    body = "Roll back with the release tool."
    memory.remember(Content(kind="fact", scope="acme/app", title="Rollbacks", body=body),
                    principal=curator)  # fmt: skip
    out = io.StringIO()
    export_store(source, out)
    source.close()
    import_store(store, io.StringIO(out.getvalue()))
    assert store.chunk_count() == 1
    assert len(_search(store, "release tool", _everyone(store))) == 1
    (meta,) = store.chunk_changes(0)
    assert meta.seq > 0 and meta.is_head


@pytest.fixture(scope="module")
def pg_store(pg_cluster: PgCluster) -> Iterator[PostgresStore]:
    """One PostgreSQL store for the whole module (hypothesis runs many examples on it)."""
    url = pg_cluster.new_database()
    with PostgresStore(url) as made:
        _create(made, "a b c", "or not near", "deploy the staging cluster")
        yield made
    pg_cluster.drop_database(url)


@pytest.mark.parametrize(
    "term",
    ['"unterminated', '"a""b" OR "c"', "NEAR(a b)", "*", ":*", "!&|", "'", "((", "NOT", "",
     '""', "x\x00y", "\ud800", "a" * 3000, 'OR OR "OR"', "-", "<->", '"staging" OR "x"',
     "alph*", "alph:*", "alpha:*B", "-staging", "!staging"],
)  # fmt: skip
def test_no_term_is_read_as_query_syntax(store: Store, term: str) -> None:
    """Terms cross the store interface as plain words: on both stores no text a caller
    typed is read as an operator, so none can break, narrow or widen the query."""
    _create(store, "Cluster", "deploy the staging cluster")
    _create(store, "Greek", "alpha beta gamma")  # no term holds a word of it but "alpha:*B"
    staging = _chunk_holding(store, "staging")
    # With "staging" beside it, a term can neither hide the staging chunk (as a NOT or a
    # phrase swallowing it would) nor bring in the Greek one (as a prefix "alph*" would).
    hits = store.keyword_search(KeywordQuery((term, "staging")), _everyone(store), 5)
    assert [chunk_id for chunk_id, _ in hits] == [staging]
    alone = store.keyword_search(KeywordQuery((term,)), _everyone(store), 5)
    assert {chunk_id for chunk_id, _ in alone} <= {staging}
    assert store.keyword_search(KeywordQuery(("NOT",)), _everyone(store), 5) == []
    if "staging" not in term and "alpha" not in term:
        assert store.doc_freq(term) == 0


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_is_a_safe_term_on_postgres(pg_store: PostgresStore, text: str) -> None:
    hits = pg_store.keyword_search(KeywordQuery((text,)), _everyone(pg_store), 5)
    assert all(score > 0 for _, score in hits)
    pg_store.doc_freq(text)
    # Beside any text, "staging" still finds the one chunk that holds it.
    staging = _chunk_holding(pg_store, "staging")
    beside = pg_store.keyword_search(KeywordQuery((text, "staging")), _everyone(pg_store), 5)
    assert staging in [chunk_id for chunk_id, _ in beside]


def test_doc_freq_estimates_common_terms_from_postgres_statistics(pg_cluster: PgCluster) -> None:
    """Past ANALYZE, a lexeme PostgreSQL lists as most common is estimated from its sampled
    share (no count over thousands of heap rows); a rarer one is still counted exactly."""
    url = pg_cluster.new_database()
    try:
        with PostgresStore(url) as store:
            texts = [f"shared words, item {n}" + (" rare" if n < 3 else "") for n in range(400)]
            _create(store, "Catalogue", *texts)
            assert store.doc_freq("shared") == 400  # no statistics yet: counted
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE cairn.chunks")
                row = conn.execute(
                    "SELECT most_common_elems::text::text[] FROM pg_stats "
                    "WHERE tablename = 'chunks' AND attname = 'tsv'"
                ).fetchone()
            assert row is not None and "share" in row[0]
        with PostgresStore(url) as store:  # a fresh process reads the new statistics
            assert store._common_lexemes()["share"] == pytest.approx(1.0)
            assert store.doc_freq("sharing") == 400  # stems to the same lexeme
            assert store.doc_freq("rare") == 3
            assert store.doc_freq("the") == 0  # a stopword matches nothing
    finally:
        pg_cluster.drop_database(url)
