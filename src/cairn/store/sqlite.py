"""The embedded store: one SQLite file in WAL mode.

One connection per ``SqliteStore``, guarded by a lock: writes run inside ``BEGIN IMMEDIATE``
so two processes serialise on SQLite's own lock (with a long busy timeout and a retry loop,
so "database is locked" never reaches a user), and a commit is acknowledged only once SQLite
has made it durable (``synchronous=FULL``).
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from cairn.errors import Conflict, InvalidInput, StoreError
from cairn.limits import STORED
from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    Content,
    PathLink,
    Proposal,
    ProposalStatus,
    Record,
    RecordQuery,
    Status,
    Version,
)
from cairn.private_files import create_private_file
from cairn.store.base import (
    AclRow,
    ChangeSet,
    Chunker,
    ChunkFilter,
    ChunkMeta,
    ChunkRow,
    Dumped,
    EdgeRow,
    ExpectProposal,
    ExpectRecord,
    Precondition,
    PublishedRow,
    PutBaseline,
    PutEdge,
    PutPathLink,
    PutProposal,
    PutRecord,
    PutVersion,
    SetPublished,
    Write,
    embed_input,
    scoped_reach,
    text_hash,
)
from cairn.store.filters import to_sql
from cairn.store.migrations import MEMORY_TABLES, SQLITE_MIGRATIONS

T = TypeVar("T")

BUSY_TIMEOUT_MS = 60_000
LOCK_RETRY_SECONDS = 120.0
# Best FTS matches taken before the permission filter, per result wanted (see
# keyword_search): a reader who may see 37% of the store keeps ~75 of 200 for the usual 50
# recall candidates; one who sees less than a quarter mostly takes the one-step query. A
# deeper cut costs more than it saves (CPU p50 at 100k: depth 200 4.0 ms, 1000 6.6 ms,
# one-step 6.2 ms).
_KEYWORD_DEPTH_PER_RESULT = 4
_KEYWORD_DEPTH_MIN = 100
# A read limited to a few scopes holding a small part of the store (base.scoped_reach)
# is limited inside the FTS query (each chunk's scope is a token of the `scope` column):
# FTS5 answers the AND by seeking, so the query costs what those scopes hold. A broad
# reader is filtered after the match as before: an AND with most of the index would make
# every match seek through the OR of its scope tokens, for nothing.
# The query's own terms search these columns only: a user typing "zs12" matches no scope.
_TEXT_COLUMNS = "{title heading text}"
# bm25() weights per column: a title hit counts three times a body hit; the scope column
# (one token per chunk) is a filter, never evidence.
_BM25 = "bm25(chunks_fts, 3.0, 1.5, 1.0, 0.0)"


def _scope_token(scope_id: int) -> str:
    return f"zs{scope_id}"


def _fts_match(match: str, scopes: Sequence[int] | None) -> str:
    """``match`` on the text columns, within ``scopes`` when given."""
    text = f"{_TEXT_COLUMNS} : ({match})"
    if scopes is None:
        return text
    tokens = " OR ".join(f'"{_scope_token(i)}"' for i in scopes)
    return f"scope : ({tokens}) AND {text}"


_RECORDS_JOIN = "FROM records r JOIN versions v ON v.id = r.current_version_id"
_RECORD_COLUMNS = (
    "r.id, r.kind, r.scope, r.status, r.current_version_id, r.current_version, "
    "r.superseded_by, r.created_at, r.updated_at, r.status_changed_at, r.created_by, v.content"
)


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


# ---- retrieval index (private) -----------------------------------------------------------


def _utc(value: datetime | None) -> str | None:
    """Index timestamps are UTC ISO strings so that SQL compares them correctly as text."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def _next_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "UPDATE index_meta SET value = value + 1 WHERE key = 'seq' RETURNING value"
    ).fetchone()
    return int(row[0])


def _intern(
    conn: sqlite3.Connection, table: str, columns: tuple[str, ...], values: tuple[Any, ...]
) -> int:
    where = " AND ".join(f"{c} = ?" for c in columns)
    row = conn.execute(f"SELECT id FROM {table} WHERE {where}", values).fetchone()
    if row is not None:
        return int(row[0])
    marks = ",".join("?" * len(columns))
    cursor = conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)
    return int(cursor.lastrowid or 0)


def _acl_id(conn: sqlite3.Connection, content: Content) -> int:
    acl = content.acl
    values = (_json(sorted(acl.roles)), _json(sorted(acl.labels)), acl.sensitivity.rank)
    return _intern(conn, "acls", ("roles", "labels", "sensitivity"), values)


def _index_version(conn: sqlite3.Connection, write: PutVersion) -> None:
    version = write.version
    content = version.content
    state = conn.execute(
        "SELECT status, current_version_id, superseded_by FROM records WHERE id = ?",
        (version.record_id,),
    ).fetchone()
    seq = _next_seq(conn)
    scope_id = _intern(conn, "scopes", ("scope",), (content.scope,))
    acl_id = _acl_id(conn, content)
    for chunk in write.chunks:
        cursor = conn.execute(
            "INSERT INTO chunks (record_id, version_id, version_no, chunk_key, heading, "
            "span_start, span_end, text, text_hash, kind, scope_id, acl_id, status, is_head, "
            "superseded, valid_from, valid_to, created_at, seq) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                version.record_id, version.id, version.number, chunk.chunk_key, chunk.heading,
                chunk.start, chunk.end, chunk.text,
                text_hash(content.title, chunk.heading, chunk.text), content.kind, scope_id,
                acl_id, state["status"], int(state["current_version_id"] == version.id),
                int(state["superseded_by"] is not None), _utc(content.valid_from),
                _utc(content.valid_to), _utc(version.created_at), seq,
            ),
        )  # fmt: skip
        conn.execute(
            "INSERT INTO chunks_fts (rowid, title, heading, text, scope) VALUES (?,?,?,?,?)",
            (cursor.lastrowid, content.title, chunk.heading, chunk.text, _scope_token(scope_id)),
        )
    if write.chunks:
        conn.execute(
            "INSERT INTO scope_chunks (scope_id, chunks) VALUES (?, ?) ON CONFLICT (scope_id) "
            "DO UPDATE SET chunks = chunks + excluded.chunks",
            (scope_id, len(write.chunks)),
        )


def _reflect_record_state(conn: sqlite3.Connection, record: Record) -> None:
    conn.execute(
        "UPDATE chunks SET status = ?, is_head = (version_id = ?), superseded = ?, seq = ? "
        "WHERE record_id = ? AND (status != ? OR is_head != (version_id = ?) OR superseded != ?)",
        (
            record.status.value, record.current_version_id, int(record.superseded_by is not None),
            _next_seq(conn), record.id, record.status.value, record.current_version_id,
            int(record.superseded_by is not None),
        ),
    )  # fmt: skip


class SqliteDialect:
    """How SQLite spells what ``filters.to_sql`` needs."""

    placeholder = "?"

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def flag(self, column: str, value: bool) -> str:
        return f"{column} = {int(value)}"

    def time(self, value: datetime) -> Any:
        return _utc(value)


DIALECT = SqliteDialect()


def _filter_sql(where: ChunkFilter) -> tuple[str, list[Any]]:
    return to_sql(where, DIALECT)


_META_COLUMNS = (
    "c.id, c.record_id, c.version_id, c.text_hash, c.kind, c.scope_id, c.acl_id, c.status, "
    "c.is_head, c.superseded, c.valid_from, c.valid_to, c.created_at, c.seq"
)


def _meta(row: sqlite3.Row) -> ChunkMeta:
    return ChunkMeta(
        id=row["id"],
        record_id=row["record_id"],
        version_id=row["version_id"],
        text_hash=row["text_hash"],
        kind=row["kind"],
        scope_id=row["scope_id"],
        acl_id=row["acl_id"],
        status=row["status"],
        is_head=bool(row["is_head"]),
        superseded=bool(row["superseded"]),
        valid_from=_dt(row["valid_from"]),
        valid_to=_dt(row["valid_to"]),
        created_at=datetime.fromisoformat(row["created_at"]),
        seq=row["seq"],
    )


_STEMMER = threading.local()


@functools.lru_cache(maxsize=65_536)
def _stem(term: str) -> str:
    """The form the index stores a query term under. The FTS table stems with porter, so
    the vocabulary holds stems; SQLite's own tokenizer says what a term becomes (a
    hand-written stemmer could disagree with it)."""
    conn: sqlite3.Connection | None = getattr(_STEMMER, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:")
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row')")
        _STEMMER.conn = conn
    conn.execute("INSERT INTO t (rowid, x) VALUES (1, ?)", (term,))
    row = conn.execute("SELECT term FROM v LIMIT 1").fetchone()
    conn.execute("DELETE FROM t")
    return str(row[0]) if row else term


class _IndexReads:
    """Retrieval-index reads of ``SqliteStore`` (mixed in; kept apart for readability)."""

    _read: Callable[..., list[sqlite3.Row]]
    _write_txn: Callable[[], Any]

    def acls(self) -> list[AclRow]:
        return [
            AclRow(
                id=r["id"],
                roles=tuple(json.loads(r["roles"])),
                labels=tuple(json.loads(r["labels"])),
                sensitivity=r["sensitivity"],
            )
            for r in self._read("SELECT * FROM acls ORDER BY id")
        ]

    def scopes(self) -> dict[int, str]:
        return {r["id"]: r["scope"] for r in self._read("SELECT id, scope FROM scopes")}

    def keyword_search(self, match: str, where: ChunkFilter, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` best chunks ``where`` admits, by BM25, ties by chunk id.

        Ranked in two steps. Joining every FTS match to ``chunks`` to test the filter costs
        a row lookup per match, about half the query at 1M chunks (CPU p50 42 ms one-step,
        20 ms two-step, same results); instead the best ``depth`` matches of the whole
        index are taken first (an FTS-only scan: rowid and score), and only those are
        joined and filtered. When at least ``limit`` of them pass, they are exactly the filtered top
        ``limit``: every match outside the first ``depth`` ranks below all of them in the
        same (score, id) order. Otherwise the filter is selective for this query (or there
        are few matches, which is cheap), and the one-step query answers, so a reader never
        gets a short list because others' chunks filled the first ``depth``.
        """
        if limit <= 0:
            return []
        clause, params = _filter_sql(where)
        within = self._scope_reach(where)
        match = _fts_match(match, within[0] if within else None)
        # bm25() is "lower is better"; negate so every recall signal reads "higher is better".
        depth = max(_KEYWORD_DEPTH_MIN, _KEYWORD_DEPTH_PER_RESULT * limit)
        rows = self._read(
            f"SELECT f.id, f.score FROM (SELECT rowid AS id, -{_BM25} AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY score DESC, rowid LIMIT ?) AS f "
            f"JOIN chunks c ON c.id = f.id WHERE {clause} ORDER BY f.score DESC, f.id LIMIT ?",
            [match, depth, *params, limit],
        )
        if len(rows) < limit:
            rows = self._read(
                f"SELECT c.id, -{_BM25} AS score "
                "FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
                f"WHERE chunks_fts MATCH ? AND {clause} ORDER BY score DESC, c.id LIMIT ?",
                [match, *params, limit],
            )
        return [(int(r[0]), float(r[1])) for r in rows]

    def doc_freq(self, term: str) -> int:
        # Frequencies only steer which query terms are worth searching for, so a cached
        # value is good enough until the index has grown by a tenth.
        size = self.chunk_count()
        cache: dict[str, int] = self.__dict__.setdefault("_df_cache", {})
        if size > self.__dict__.get("_df_cache_size", 0) * 1.1 or len(cache) > 100_000:
            cache.clear()
            self.__dict__["_df_cache_size"] = size
        found = cache.get(term)
        if found is None:
            rows = self._read("SELECT doc FROM chunks_vocab WHERE term = ?", (_stem(term),))
            found = cache[term] = int(rows[0][0]) if rows else 0
        return found

    def keyword_reach(self, where: ChunkFilter) -> int | None:
        within = self._scope_reach(where)
        return within[1] if within else None

    def _scope_reach(self, where: ChunkFilter) -> tuple[list[int], int] | None:
        return scoped_reach(where.scope_ids, self._scope_chunks, self.chunk_count)

    def _scope_chunks(self, scopes: list[int]) -> int:
        # A kept count, not the vocabulary: fts5vocab counts a term's documents by walking
        # its whole posting list, 500k entries for a reader of half of a 1M-chunk store.
        rows = self._read(
            "SELECT COALESCE(SUM(chunks), 0) FROM scope_chunks "
            f"WHERE scope_id IN ({','.join('?' * len(scopes))})",
            scopes,
        )
        return int(rows[0][0])

    def record_ids(self, where: ChunkFilter, prefix: str, limit: int) -> list[str]:
        sql, params = _filter_sql(where)
        rows = self._read(
            "SELECT DISTINCT c.record_id AS id FROM chunks c "
            f"WHERE {sql} AND c.record_id >= ? ORDER BY c.record_id LIMIT ?",
            [*params, prefix, limit],
        )
        return [str(r["id"]) for r in rows if str(r["id"]).startswith(prefix)][:limit]

    def count_records(self, where: ChunkFilter) -> dict[str, int]:
        sql, params = _filter_sql(where)
        rows = self._read(
            "SELECT c.status AS status, COUNT(DISTINCT c.record_id) AS n FROM chunks c "
            f"WHERE {sql} GROUP BY c.status",
            params,
        )
        return {str(r["status"]): int(r["n"]) for r in rows}

    def chunk_count(self) -> int:
        # Chunks are never deleted, so the largest rowid is the count, read in O(log n).
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM chunks")[0][0])

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        found: dict[int, ChunkRow] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            rows = self._read(
                f"SELECT {_META_COLUMNS}, c.version_no, c.chunk_key, c.heading, c.span_start, "
                "c.span_end, c.text, json_extract(v.content, '$.title') AS title "
                "FROM chunks c JOIN versions v ON v.id = c.version_id "
                f"WHERE c.id IN ({','.join('?' * len(batch))})",
                batch,
            )
            for r in rows:
                found[int(r["id"])] = ChunkRow(
                    meta=_meta(r),
                    version_no=r["version_no"],
                    chunk_key=r["chunk_key"],
                    heading=r["heading"],
                    start=r["span_start"],
                    end=r["span_end"],
                    text=r["text"],
                    title=r["title"],
                )
        return found

    def chunk_changes(self, since_seq: int, limit: int = 50_000) -> list[ChunkMeta]:
        rows = self._read(
            f"SELECT {_META_COLUMNS} FROM chunks c WHERE c.seq > ? ORDER BY c.seq, c.id LIMIT ?",
            (since_seq, limit),
        )
        return [_meta(r) for r in rows]

    def pending_vectors(self, model: str, limit: int) -> list[tuple[str, str]]:
        # Scan forward from the first chunk that was still pending last time: everything
        # before it has a vector already, so catching up costs O(chunks), not O(chunks²).
        cursors: dict[str, int] = self.__dict__.setdefault("_pending_cursor", {})
        rows = self._read(
            "SELECT c.id, c.text_hash, c.heading, c.text, json_extract(v.content, '$.title') "
            "AS title FROM chunks c JOIN versions v ON v.id = c.version_id "
            "WHERE c.id >= ? AND NOT EXISTS (SELECT 1 FROM vectors x "
            "WHERE x.text_hash = c.text_hash AND x.model = ?) ORDER BY c.id LIMIT ?",
            (cursors.get(model, 0), model, limit),
        )
        if rows:
            cursors[model] = int(rows[0]["id"])
        found: dict[str, str] = {}
        for r in rows:
            found.setdefault(r["text_hash"], embed_input(r["title"], r["heading"], r["text"]))
        return list(found.items())

    def vector_lag(self, model: str) -> int:
        rows = self._read(
            "SELECT COUNT(DISTINCT c.text_hash) FROM chunks c WHERE NOT EXISTS "
            "(SELECT 1 FROM vectors x WHERE x.text_hash = c.text_hash AND x.model = ?)",
            (model,),
        )
        return int(rows[0][0])

    def put_vectors(self, model: str, dim: int, items: Sequence[tuple[str, bytes]]) -> None:
        with self._write_txn() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO vectors (text_hash, model, dim, vector) VALUES (?,?,?,?)",
                [(h, model, dim, blob) for h, blob in items],
            )

    def get_vectors(self, model: str, text_hashes: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        hashes = list(dict.fromkeys(text_hashes))
        for start in range(0, len(hashes), 500):
            batch = hashes[start : start + 500]
            rows = self._read(
                "SELECT text_hash, vector FROM vectors WHERE model = ? "
                f"AND text_hash IN ({','.join('?' * len(batch))})",
                [model, *batch],
            )
            found.update({r["text_hash"]: bytes(r["vector"]) for r in rows})
        return found


class SqliteStore(_IndexReads):
    def __init__(self, path: Path | str, *, synchronous: str = "FULL") -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        # Created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the
        # database file's mode, so the store stays private to its owner.
        if self.path != ":memory:":
            try:
                create_private_file(Path(self.path))
            except OSError as exc:
                raise StoreError(f"cannot create store {self.path}: {exc.strerror}") from exc
        try:
            self._conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._retrying(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
        self._conn.execute(f"PRAGMA synchronous = {synchronous}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    # ---- plumbing --------------------------------------------------------------------

    def _retrying(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying while another process holds the write lock.

        busy_timeout already waits inside SQLite; this loop covers the cases where SQLite
        returns SQLITE_BUSY at once (e.g. a WAL snapshot upgrade), so callers never see it.
        """
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if "locked" not in message and "busy" not in message:
                    raise
                if time.monotonic() > deadline:
                    raise StoreError(f"store stayed locked for {LOCK_RETRY_SECONDS:.0f}s") from exc
                time.sleep(delay)  # back-off between lock attempts, not synchronisation
                delay = min(delay * 2, 0.2)

    @contextmanager
    def _write_txn(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._retrying(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._retrying(lambda: self._conn.execute("COMMIT"))

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._retrying(lambda: self._conn.execute(sql, params).fetchall())

    def _migrate(self) -> None:
        with self._write_txn() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0])
            if current > len(SQLITE_MIGRATIONS):
                raise StoreError(
                    f"store schema version {current} is newer than this cairn "
                    f"({len(SQLITE_MIGRATIONS)}): upgrade cairn"
                )
            for number, script in enumerate(SQLITE_MIGRATIONS[current:], start=current + 1):
                for statement in _split_sql(script):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    (number, datetime.now().astimezone().isoformat()),
                )

    @property
    def schema_version(self) -> int:
        return int(self._read("SELECT MAX(version) FROM schema_migrations")[0][0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def integrity_check(self) -> str:
        return str(self._read("PRAGMA integrity_check")[0][0])

    # ---- the one write method --------------------------------------------------------

    def commit(self, changesets: Sequence[ChangeSet]) -> list[int]:
        seqs: list[int] = []
        try:
            with self._write_txn() as conn:
                for changeset in changesets:
                    for expect in changeset.expects:
                        _check(conn, expect)
                    for write in changeset.writes:
                        _apply(conn, write)
                    seqs.append(_insert_audit(conn, changeset.audit))
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"the change conflicts with stored data: {exc}") from exc
        return seqs

    # ---- reads -----------------------------------------------------------------------

    def get_record(self, record_id: str) -> Record | None:
        rows = self._read(
            f"SELECT {_RECORD_COLUMNS} FROM records r "
            "JOIN versions v ON v.id = r.current_version_id WHERE r.id = ?",
            (record_id,),
        )
        return _record(rows[0]) if rows else None

    def get_records(self, record_ids: Sequence[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        ids = list(dict.fromkeys(record_ids))
        for start in range(0, len(ids), 500):
            batch = ids[start : start + 500]
            marks = ",".join("?" * len(batch))
            rows = self._read(
                f"SELECT {_RECORD_COLUMNS} FROM records r "
                f"JOIN versions v ON v.id = r.current_version_id WHERE r.id IN ({marks})",
                batch,
            )
            for row in rows:
                found[row["id"]] = _record(row)
        return found

    def get_version(self, version_id: str) -> Version | None:
        rows = self._read("SELECT * FROM versions WHERE id = ?", (version_id,))
        return _version(rows[0]) if rows else None

    def get_version_by_number(self, record_id: str, number: int) -> Version | None:
        rows = self._read(
            "SELECT * FROM versions WHERE record_id = ? AND number = ?", (record_id, number)
        )
        return _version(rows[0]) if rows else None

    def list_versions(self, record_id: str) -> list[Version]:
        rows = self._read(
            "SELECT * FROM versions WHERE record_id = ? ORDER BY number", (record_id,)
        )
        return [_version(r) for r in rows]

    def query_records(self, query: RecordQuery, *, scope_globs: Sequence[str]) -> list[Record]:
        where: list[str] = []
        params: list[Any] = []
        if scope_globs:
            where.append("(" + " OR ".join("r.scope GLOB ?" for _ in scope_globs) + ")")
            params.extend(scope_globs)
        if query.scope:
            where.append("r.scope GLOB ?")
            params.append(query.scope)
        if query.kinds:
            where.append(f"r.kind IN ({','.join('?' * len(query.kinds))})")
            params.extend(query.kinds)
        if query.statuses:
            where.append(f"r.status IN ({','.join('?' * len(query.statuses))})")
            params.extend(s.value for s in query.statuses)
        if query.created_after:
            where.append("r.created_at >= ?")
            params.append(_ts(query.created_after))
        if query.created_before:
            where.append("r.created_at < ?")
            params.append(_ts(query.created_before))
        for key, value in query.metadata.items():
            where.append("(v.content -> ?) = json(?)")
            params.extend([f'$.metadata."{key}"', json.dumps(value)])
        sql = (
            f"SELECT {_RECORD_COLUMNS} {_RECORDS_JOIN}"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY r.id"
        )
        return [_record(r) for r in self._read(sql, params)]

    def find_by_hash(self, scope: str, content_hash: str) -> list[Record]:
        rows = self._read(
            f"SELECT {_RECORD_COLUMNS} {_RECORDS_JOIN} "
            "WHERE r.scope = ? AND r.content_hash = ? ORDER BY r.id",
            (scope, content_hash),
        )
        return [_record(r) for r in rows]

    def get_proposal(self, proposal_id: str) -> Proposal | None:
        rows = self._read("SELECT * FROM proposals WHERE id = ?", (proposal_id,))
        return _proposal(rows[0]) if rows else None

    def list_proposals(
        self, *, status: ProposalStatus | None = None, limit: int = 100, offset: int = 0
    ) -> list[Proposal]:
        if status is None:
            rows = self._read(
                "SELECT * FROM proposals ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
            )
        else:
            rows = self._read(
                "SELECT * FROM proposals WHERE status = ? ORDER BY id LIMIT ? OFFSET ?",
                (status.value, limit, offset),
            )
        return [_proposal(r) for r in rows]

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        where: list[str] = []
        params: list[Any] = []
        for column, value in (
            ("actor", query.actor),
            ("action", query.action),
            ("subject_id", query.subject_id),
            ("proposal_id", query.proposal_id),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if query.since:
            where.append("at >= ?")
            params.append(_ts(query.since))
        sql = (
            "SELECT * FROM audit"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY seq LIMIT ?"
        )
        return [_audit(r) for r in self._read(sql, [*params, query.limit])]

    def count_audit(self) -> int:
        return int(self._read("SELECT COUNT(*) FROM audit")[0][0])

    def get_baseline(self, baseline_id: str) -> Baseline | None:
        rows = self._read("SELECT * FROM baselines WHERE id = ?", (baseline_id,))
        return self._baseline(rows[0]) if rows else None

    def published_baseline_id(self, scope: str) -> str | None:
        rows = self._read("SELECT baseline_id FROM published WHERE scope = ?", (scope,))
        return str(rows[0][0]) if rows else None

    def list_baselines(self, scope: str | None = None) -> list[Baseline]:
        if scope is None:
            rows = self._read("SELECT * FROM baselines ORDER BY id")
        else:
            rows = self._read("SELECT * FROM baselines WHERE scope = ? ORDER BY id", (scope,))
        return [self._baseline(r) for r in rows]

    def _baseline(self, row: sqlite3.Row) -> Baseline:
        pins = self._read(
            "SELECT record_id, version_id FROM baseline_pins WHERE baseline_id = ?", (row["id"],)
        )
        return Baseline(
            id=row["id"],
            scope=row["scope"],
            name=row["name"],
            pins={p["record_id"]: p["version_id"] for p in pins},
            created_at=datetime.fromisoformat(row["created_at"]),
            created_by=row["created_by"],
            proposal_id=row["proposal_id"],
        )

    def list_path_links(self, record_id: str | None = None) -> list[PathLink]:
        if record_id is None:
            rows = self._read("SELECT * FROM path_links ORDER BY record_id, path")
        else:
            rows = self._read(
                "SELECT * FROM path_links WHERE record_id = ? ORDER BY path", (record_id,)
            )
        return [
            PathLink(
                record_id=r["record_id"],
                path=r["path"],
                content_hash=r["content_hash"],
                drifted=bool(r["drifted"]),
            )
            for r in rows
        ]

    def list_edges(self, node_id: str) -> list[tuple[str, str, str]]:
        rows = self._read(
            "SELECT src, dst, type FROM edges WHERE src = ? OR dst = ? ORDER BY created_at",
            (node_id, node_id),
        )
        return [(r["src"], r["dst"], r["type"]) for r in rows]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for table in ("records", "versions", "proposals", "audit", "baselines"):
            out[table] = int(self._read(f"SELECT COUNT(*) FROM {table}")[0][0])
        for row in self._read("SELECT status, COUNT(*) AS n FROM records GROUP BY status"):
            out[f"records.{row['status']}"] = int(row["n"])
        for row in self._read("SELECT status, COUNT(*) AS n FROM proposals GROUP BY status"):
            out[f"proposals.{row['status']}"] = int(row["n"])
        return out

    # ---- whole-store dump and load (cairn.store.transfer only) --------------------------

    def iter_all(self) -> Iterator[Dumped]:
        """Every stored row, in load order, from one read transaction (one snapshot)."""
        with self._lock:
            self._retrying(lambda: self._conn.execute("BEGIN"))
            try:
                for row in self._read(f"SELECT {_RECORD_COLUMNS} {_RECORDS_JOIN} ORDER BY r.id"):
                    yield _record(row)
                for row in self._read("SELECT * FROM versions ORDER BY record_id, number"):
                    yield _version(row)
                for row in self._read("SELECT * FROM proposals ORDER BY id"):
                    yield _proposal(row)
                for row in self._read("SELECT * FROM audit ORDER BY seq"):
                    yield _audit(row)
                for row in self._read("SELECT * FROM baselines ORDER BY id"):
                    yield self._baseline(row)
                for row in self._read("SELECT * FROM published ORDER BY scope"):
                    yield PublishedRow(
                        scope=row["scope"],
                        baseline_id=row["baseline_id"],
                        updated_at=datetime.fromisoformat(row["updated_at"]),
                    )
                for row in self._read("SELECT * FROM edges ORDER BY src, dst, type"):
                    yield EdgeRow(
                        src=row["src"],
                        dst=row["dst"],
                        type=row["type"],
                        created_at=datetime.fromisoformat(row["created_at"]),
                    )
                yield from self.list_path_links()
            finally:
                self._conn.execute("COMMIT")

    def import_rows(self, rows: Iterable[Dumped], *, chunker: Chunker | None = None) -> int:
        """Load a dump into this store, which must be empty (see ``Store.import_rows``)."""
        loaded = 0
        try:
            with self._write_txn() as conn:
                for table in MEMORY_TABLES:
                    if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                        raise Conflict(
                            f"cannot import into a store that is not empty ({table} has rows)"
                        )
                for row in rows:
                    _import_row(conn, row, chunker)
                    loaded += 1
        except sqlite3.IntegrityError as exc:
            raise InvalidInput(f"the dump is inconsistent: {exc}") from exc
        return loaded


# ---- row mapping (private) -------------------------------------------------------------


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements; trigger bodies hold ';' so split on 'END;' too."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        buffer += line + "\n"
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def _record(row: sqlite3.Row) -> Record:
    return Record(
        id=row["id"],
        kind=row["kind"],
        scope=row["scope"],
        status=Status(row["status"]),
        current_version_id=row["current_version_id"],
        current_version=row["current_version"],
        superseded_by=row["superseded_by"],
        created_at=datetime.fromisoformat(row["created_at"]),
        updated_at=datetime.fromisoformat(row["updated_at"]),
        status_changed_at=datetime.fromisoformat(row["status_changed_at"]),
        created_by=row["created_by"],
        content=Content.model_validate_json(row["content"], context=STORED),
    )


def _version(row: sqlite3.Row) -> Version:
    return Version(
        id=row["id"],
        record_id=row["record_id"],
        number=row["number"],
        content=Content.model_validate_json(row["content"], context=STORED),
        content_hash=row["content_hash"],
        created_at=datetime.fromisoformat(row["created_at"]),
        created_by=row["created_by"],
        proposal_id=row["proposal_id"],
    )


def _proposal(row: sqlite3.Row) -> Proposal:
    return Proposal.model_validate(
        {
            "id": row["id"],
            "change": json.loads(row["change"]),
            "scope": row["scope"],
            "record_id": row["record_id"],
            "base_version_id": row["base_version_id"],
            "base_baseline_id": row["base_baseline_id"],
            "principal_id": row["principal_id"],
            "principal_roles": json.loads(row["principal_roles"]),
            "status": row["status"],
            "created_at": row["created_at"],
            "reason": row["reason"],
            "rule": row["rule"],
            "decided_by": row["decided_by"],
            "decided_at": row["decided_at"],
            "rebased_from": row["rebased_from"],
            "rebased_to": row["rebased_to"],
            "result_record_id": row["result_record_id"],
            "result_version_id": row["result_version_id"],
        },
        context=STORED,
    )


def _audit(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(
        seq=row["seq"],
        id=row["id"],
        at=datetime.fromisoformat(row["at"]),
        actor=row["actor"],
        actor_roles=tuple(json.loads(row["actor_roles"])),
        action=row["action"],
        subject_id=row["subject_id"],
        proposal_id=row["proposal_id"],
        rule=row["rule"],
        reason=row["reason"],
        from_status=row["from_status"],
        to_status=row["to_status"],
        details=json.loads(row["details"]),
    )


def _check(conn: sqlite3.Connection, expect: Precondition) -> None:
    if isinstance(expect, ExpectRecord):
        row = conn.execute(
            "SELECT current_version_id, status FROM records WHERE id = ?", (expect.record_id,)
        ).fetchone()
        if expect.version_id is None:
            if row is not None:
                raise Conflict(f"record {expect.record_id} already exists")
            return
        if row is None or row["current_version_id"] != expect.version_id:
            raise Conflict(
                f"record {expect.record_id} changed since version {expect.version_id} was read",
                record_id=expect.record_id,
            )
        if expect.status is not None and row["status"] != expect.status.value:
            raise Conflict(f"record {expect.record_id} is now {row['status']}")
    elif isinstance(expect, ExpectProposal):
        row = conn.execute(
            "SELECT status FROM proposals WHERE id = ?", (expect.proposal_id,)
        ).fetchone()
        if row is None or row["status"] != expect.status.value:
            raise Conflict(f"proposal {expect.proposal_id} was decided by someone else meanwhile")
    else:
        row = conn.execute(
            "SELECT baseline_id FROM published WHERE scope = ?", (expect.scope,)
        ).fetchone()
        current = row["baseline_id"] if row else None
        if current != expect.baseline_id:
            raise Conflict(f"the published baseline of {expect.scope} changed meanwhile")


def _insert_version(conn: sqlite3.Connection, write: PutVersion) -> None:
    v = write.version
    conn.execute(
        "INSERT INTO versions (id, record_id, number, content, content_hash, created_at, "
        "created_by, proposal_id) VALUES (?,?,?,?,?,?,?,?)",
        (
            v.id,
            v.record_id,
            v.number,
            v.content.model_dump_json(),
            v.content_hash,
            _ts(v.created_at),
            v.created_by,
            v.proposal_id,
        ),
    )


def _apply(conn: sqlite3.Connection, write: Write) -> None:
    if isinstance(write, PutRecord):
        r = write.record
        conn.execute(
            "INSERT INTO records (id, kind, scope, status, current_version_id, current_version, "
            "content_hash, sensitivity, superseded_by, created_at, updated_at, status_changed_at, "
            "created_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
            "current_version_id = excluded.current_version_id, "
            "current_version = excluded.current_version, content_hash = excluded.content_hash, "
            "sensitivity = excluded.sensitivity, superseded_by = excluded.superseded_by, "
            "updated_at = excluded.updated_at, status_changed_at = excluded.status_changed_at",
            (
                r.id,
                r.kind,
                r.scope,
                r.status.value,
                r.current_version_id,
                r.current_version,
                r.content.content_hash(),
                r.content.acl.sensitivity.rank,
                r.superseded_by,
                _ts(r.created_at),
                _ts(r.updated_at),
                _ts(r.status_changed_at),
                r.created_by,
            ),
        )
        _reflect_record_state(conn, r)
    elif isinstance(write, PutVersion):
        _insert_version(conn, write)
        _index_version(conn, write)
    elif isinstance(write, PutProposal):
        p = write.proposal
        conn.execute(
            "INSERT OR REPLACE INTO proposals (id, op, scope, record_id, base_version_id, "
            "base_baseline_id, principal_id, principal_roles, status, change, created_at, reason, "
            "rule, decided_by, decided_at, rebased_from, rebased_to, result_record_id, "
            "result_version_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                p.id,
                p.change.op,
                p.scope,
                p.record_id,
                p.base_version_id,
                p.base_baseline_id,
                p.principal_id,
                _json(list(p.principal_roles)),
                p.status.value,
                p.change.model_dump_json(),
                _ts(p.created_at),
                p.reason,
                p.rule,
                p.decided_by,
                _ts(p.decided_at),
                p.rebased_from,
                p.rebased_to,
                p.result_record_id,
                p.result_version_id,
            ),
        )
    elif isinstance(write, PutBaseline):
        b = write.baseline
        conn.execute(
            "INSERT INTO baselines (id, scope, name, created_at, created_by, proposal_id) "
            "VALUES (?,?,?,?,?,?)",
            (b.id, b.scope, b.name, _ts(b.created_at), b.created_by, b.proposal_id),
        )
        conn.executemany(
            "INSERT INTO baseline_pins (baseline_id, record_id, version_id) VALUES (?,?,?)",
            [(b.id, rid, vid) for rid, vid in sorted(b.pins.items())],
        )
    elif isinstance(write, SetPublished):
        conn.execute(
            "INSERT INTO published (scope, baseline_id, updated_at) VALUES (?,?,?) "
            "ON CONFLICT (scope) DO UPDATE SET baseline_id = excluded.baseline_id, "
            "updated_at = excluded.updated_at",
            (write.scope, write.baseline_id, datetime.now().astimezone().isoformat()),
        )
    elif isinstance(write, PutEdge):
        conn.execute(
            "INSERT OR IGNORE INTO edges (src, dst, type, created_at) VALUES (?,?,?,?)",
            (write.src, write.dst, write.type, datetime.now().astimezone().isoformat()),
        )
    elif isinstance(write, PutPathLink):
        link = write.link
        conn.execute(
            "INSERT INTO path_links (record_id, path, content_hash, drifted) VALUES (?,?,?,?) "
            "ON CONFLICT (record_id, path) DO UPDATE SET content_hash = excluded.content_hash, "
            "drifted = excluded.drifted",
            (link.record_id, link.path, link.content_hash, int(link.drifted)),
        )
    else:  # pragma: no cover - exhaustive over Write
        raise StoreError(f"unknown write {write!r}")


def _import_row(conn: sqlite3.Connection, row: Dumped, chunker: Chunker | None = None) -> None:
    """One dumped row, keeping its ids, seq and timestamps (import into an empty store)."""
    if isinstance(row, Record):
        _apply(conn, PutRecord(row))
    elif isinstance(row, Version):
        _apply(conn, PutVersion(row, chunks=tuple(chunker(row.content)) if chunker else ()))
    elif isinstance(row, Proposal):
        _apply(conn, PutProposal(row))
    elif isinstance(row, AuditEntry):
        if row.seq is None:
            raise InvalidInput(f"audit entry {row.id} has no seq")
        seq = _insert_audit(conn, row, seq=row.seq)
        assert seq == row.seq
    elif isinstance(row, Baseline):
        _apply(conn, PutBaseline(row))
    elif isinstance(row, PublishedRow):
        conn.execute(
            "INSERT INTO published (scope, baseline_id, updated_at) VALUES (?,?,?)",
            (row.scope, row.baseline_id, _ts(row.updated_at)),
        )
    elif isinstance(row, EdgeRow):
        conn.execute(
            "INSERT INTO edges (src, dst, type, created_at) VALUES (?,?,?,?)",
            (row.src, row.dst, row.type, _ts(row.created_at)),
        )
    else:
        _apply(conn, PutPathLink(row))


def _insert_audit(conn: sqlite3.Connection, entry: AuditEntry, *, seq: int | None = None) -> int:
    cursor = conn.execute(
        "INSERT INTO audit (id, at, actor, actor_roles, action, subject_id, proposal_id, rule, "
        "reason, from_status, to_status, details) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            entry.id,
            _ts(entry.at),
            entry.actor,
            _json(list(entry.actor_roles)),
            entry.action,
            entry.subject_id,
            entry.proposal_id,
            entry.rule,
            entry.reason,
            entry.from_status,
            entry.to_status,
            _json(entry.details),
        ),
    )
    return int(cursor.lastrowid or 0)
