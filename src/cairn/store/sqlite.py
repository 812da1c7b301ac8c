"""The embedded store: one SQLite file in WAL mode.

Reads run on connections of their own (one per thread), so a read never waits behind a
write: WAL lets readers see the last committed state while the writer works. Writes take
one writer connection, serialised by a lock in this process and by ``BEGIN IMMEDIATE``
across processes (with a long busy timeout and a retry loop, so "database is locked" never
reaches a user); a commit is acknowledged only once SQLite has made it durable
(``synchronous=FULL``). The statements both SQL stores share live in ``store.sql``; this
module holds what only SQLite says: FTS5 keyword search, the Python side of a commit, and
the migrations runner.
"""

from __future__ import annotations

import contextvars
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from cairn.errors import Conflict, CopiedMeanwhile, InvalidInput, StoreError
from cairn.model import (
    Acl,
    AuditEntry,
    Baseline,
    Edge,
    Event,
    Proposal,
    Record,
    Version,
)
from cairn.private_files import create_private_file
from cairn.search.fts import match_expression, quote_term
from cairn.store.base import (
    NOT_COPIES,
    VECTORS_FROM,
    ChangeSet,
    ChunkDraft,
    Chunker,
    ChunkFilter,
    Dumped,
    ExpectNoCopies,
    ExpectProposal,
    ExpectRecord,
    KeywordQuery,
    Precondition,
    PublishedRow,
    PutBaseline,
    PutBatch,
    PutEdge,
    PutEvents,
    PutPathLink,
    PutProposal,
    PutRecord,
    PutTocNode,
    PutVersion,
    SetPublished,
    Write,
    plain_term,
    scoped_reach,
    text_hash,
)
from cairn.store.filters import to_sql
from cairn.store.migrations import MEMORY_TABLES, SQLITE_MIGRATIONS
from cairn.store.sql import rows
from cairn.store.sql.dialect import Dialect
from cairn.store.sql.events import SqlEvents
from cairn.store.sql.graph import SqlGraph
from cairn.store.sql.reads import SqlReads
from cairn.store.sql.tasks import SqlTasks
from cairn.store.sql.timeline import SqlTimeline

__all__ = ["DOC_FREQ_CAP", "SqliteDialect", "SqliteStore"]

T = TypeVar("T")
Row = Mapping[str, Any]

BUSY_TIMEOUT_MS = 60_000
LOCK_RETRY_SECONDS = 120.0
# Best FTS matches taken before the permission filter, per result wanted (see
# keyword_search): a reader who may see 37% of the store keeps ~75 of 200 for the usual 50
# recall candidates; one who sees less than a quarter mostly takes the one-step query. A
# deeper cut costs more than it saves (CPU p50 at 100k: depth 200 4.0 ms, 1000 6.6 ms,
# one-step 6.2 ms).
_KEYWORD_DEPTH_PER_RESULT = 4
_KEYWORD_DEPTH_MIN = 100
# From this many chunks a keyword search is cut into chunk-id ranges ranked side by side, one
# per core (at most _READ_THREADS), each on its own read connection: SQLite lets go of
# the GIL while it ranks. BM25 scores every match, ~1.2 us each, so a word in 40k chunks
# costs ~50 ms in one piece; at 1M chunks two ranges cut the keyword stage's p95 from 51.5
# to 41.1 ms with the same answers (FTS5 takes a term's document count from the whole
# index, not the range, so scores do not change).
_KEYWORD_SLICED_FROM = 200_000
# The store's read threads (``_side_by_side``): keyword ranges and the parts of a finalists'
# vector read. Those parts wait on the disk more than they use a core, so a read is cut into
# as many parts as there are threads, whatever the number of cores (cold page cache, 1M
# store, 150 rows: 161 ms in one read, 87 ms in four parts; ``bench/vector_reads.py``).
_READ_THREADS = 4
_OPEN_END = 2**62  # above any chunk id: the last range's end
# ``doc_freq`` counts at most this many chunks: keyword recall drops a term found in more
# than 50,000 (retrieval.recall.HOPELESS_POSTINGS), so larger counts change nothing.
DOC_FREQ_CAP = 50_001
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


def _keyword_slices() -> int:
    return max(1, min(_READ_THREADS, os.cpu_count() or 1))


def _id_ranges(chunks: int, slices: int) -> list[tuple[int, int]]:
    """Chunk ids ``[1, chunks]`` (chunk ids are dense) as ``slices`` half-open ranges of
    equal width, or one range below ``_KEYWORD_SLICED_FROM`` chunks; the last range is
    open-ended, so a chunk committed meanwhile is not lost to a gap."""
    if chunks < _KEYWORD_SLICED_FROM or slices <= 1:
        return [(0, _OPEN_END)]
    step = chunks // slices + 1
    bounds = [1 + i * step for i in range(slices)] + [_OPEN_END]
    return [(0 if i == 0 else bounds[i], bounds[i + 1]) for i in range(slices)]


class SqliteDialect(Dialect):
    """SQLite's spelling is the shared statements' own (``store.sql.dialect``)."""


DIALECT = SqliteDialect()


def _utc(value: datetime | None) -> str | None:
    """Index timestamps are UTC ISO strings so that SQL compares them correctly as text."""
    return None if value is None else DIALECT.time(value)


def _next_seq(conn: sqlite3.Connection) -> int:
    row = conn.execute(
        "UPDATE index_meta SET value = value + 1 WHERE key = 'seq' RETURNING value"
    ).fetchone()
    return int(row[0])


_INTERNED: contextvars.ContextVar[dict[tuple[Any, ...], int] | None] = contextvars.ContextVar(
    "interned", default=None
)


def _intern(
    conn: sqlite3.Connection, table: str, columns: tuple[str, ...], values: tuple[Any, ...]
) -> int:
    cache = _INTERNED.get()
    key = (table, *values)
    if cache is not None and key in cache:
        return cache[key]
    found = _intern_row(conn, table, columns, values)
    if cache is not None:
        cache[key] = found
    return found


def _intern_row(
    conn: sqlite3.Connection, table: str, columns: tuple[str, ...], values: tuple[Any, ...]
) -> int:
    where = " AND ".join(f"{c} = ?" for c in columns)
    row = conn.execute(f"SELECT id FROM {table} WHERE {where}", values).fetchone()
    if row is not None:
        return int(row[0])
    marks = ",".join("?" * len(columns))
    cursor = conn.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)
    return int(cursor.lastrowid or 0)


def _acl_id(conn: sqlite3.Connection, acl: Acl) -> int:
    cache = _INTERNED.get()
    # spares the two dumps below (a tuple key: hashing and comparing the model costs more)
    key = ("acl", acl.roles, acl.labels, acl.sensitivity)
    if cache is not None and key in cache:
        return cache[key]
    values = (rows.dumps(sorted(acl.roles)), rows.dumps(sorted(acl.labels)), acl.sensitivity.rank)
    found = _intern(conn, "acls", ("roles", "labels", "sensitivity"), values)
    if cache is not None:
        cache[key] = found
    return found


@dataclass(frozen=True)
class _Chunks:
    """Chunks of one indexed thing (a record version, a timeline node): the ``fixed``
    columns they share, the title their keyword rows carry, and the title their text hash
    covers (the text they are embedded with)."""

    chunks: Sequence[ChunkDraft]
    title: str
    hashed_title: str
    scope_id: int
    fixed: dict[str, Any]


def _version_chunks(
    conn: sqlite3.Connection, write: PutVersion, state: Mapping[str, Any]
) -> _Chunks:
    """A version's chunks, filtered by its record's ``state`` (status, current_version_id,
    superseded_by)."""
    version = write.version
    content = version.content
    return _Chunks(
        write.chunks,
        title=content.title,
        hashed_title=content.title,
        scope_id=_intern(conn, "scopes", ("scope",), (content.scope,)),
        fixed={
            "record_id": version.record_id, "version_id": version.id,
            "version_no": version.number, "kind": content.kind,
            "acl_id": _acl_id(conn, content.acl), "status": state["status"],
            "is_head": int(state["current_version_id"] == version.id),
            "superseded": int(state["superseded_by"] is not None),
            "valid_from": _utc(content.valid_from), "valid_to": _utc(content.valid_to),
            "created_at": _utc(version.created_at), "source_kind": "record",
            "source_time": _utc(content.valid_from or version.created_at),
        },
    )  # fmt: skip


def _index_version(conn: sqlite3.Connection, write: PutVersion) -> None:
    state = conn.execute(
        "SELECT status, current_version_id, superseded_by FROM records WHERE id = ?",
        (write.version.record_id,),
    ).fetchone()
    _add_chunks(conn, [_version_chunks(conn, write, state)])


def _add_chunks(conn: sqlite3.Connection, indexed: Sequence[_Chunks]) -> None:
    """Index the chunks of each indexed thing under a seq of its own (consecutive, taken
    at once): their rows, their keyword rows, and their scopes' counts, one statement each.
    Chunk ids are given here, after the largest stored one (what SQLite would choose: the
    writer's lock is held), so that keyword rows can name them without a round trip each."""
    indexed = [group for group in indexed if group.chunks]
    if not indexed:
        return
    last = conn.execute(
        "UPDATE index_meta SET value = value + ? WHERE key = 'seq' RETURNING value",
        (len(indexed),),
    ).fetchone()[0]
    next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM chunks").fetchone()[0]
    fixed = tuple(indexed[0].fixed)
    columns = (*fixed, "chunk_key", "heading", "span_start", "span_end", "text", "text_hash",
               "scope_id", "seq", "id")  # fmt: skip
    values: list[tuple[Any, ...]] = []
    keyword: list[tuple[Any, ...]] = []
    per_scope: dict[int, int] = {}
    for seq, group in enumerate(indexed, start=int(last) - len(indexed) + 1):
        shared = tuple(group.fixed[name] for name in fixed)
        token = _scope_token(group.scope_id)
        for chunk in group.chunks:
            values.append(
                (
                    *shared, chunk.chunk_key, chunk.heading, chunk.start, chunk.end, chunk.text,
                    text_hash(group.hashed_title, chunk.heading, chunk.text), group.scope_id,
                    seq, next_id,
                )
            )  # fmt: skip
            keyword.append((next_id, group.title, chunk.heading, chunk.text, token))
            next_id += 1
        per_scope[group.scope_id] = per_scope.get(group.scope_id, 0) + len(group.chunks)
    conn.executemany(_insert_sql("chunks", columns), values)
    conn.executemany(
        "INSERT INTO chunks_fts (rowid, title, heading, text, scope) VALUES (?,?,?,?,?)", keyword
    )
    conn.executemany(
        "INSERT INTO scope_chunks (scope_id, chunks) VALUES (?, ?) ON CONFLICT (scope_id) "
        "DO UPDATE SET chunks = chunks + excluded.chunks",
        list(per_scope.items()),
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


class SqliteStore(SqlReads, SqlGraph, SqlTasks, SqlEvents, SqlTimeline):
    dialect: Dialect = DIALECT
    # Every commit takes the one write lock before it inserts chunks, so rowids already
    # follow commit order, and the rowid is the cheapest column to walk.
    _pending_order = "id"
    vector_read_parts = _READ_THREADS  # read side by side on the read threads (_read_each)

    def __init__(self, path: Path | str, *, synchronous: str = "FULL") -> None:
        self.path = str(path)
        self._synchronous = synchronous
        # Created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the
        # database file's mode, so the store stays private to its owner.
        if self.path != ":memory:":
            try:
                create_private_file(Path(self.path))
            except OSError as exc:
                raise StoreError(f"cannot create store {self.path}: {exc.strerror}") from exc
        self._write_lock = threading.RLock()
        self._writer = self._connect()
        try:
            self._retrying(lambda: self._writer.execute("PRAGMA journal_mode = WAL"))
        except sqlite3.DatabaseError as exc:  # another kind of file, or a damaged one
            self._writer.close()
            raise StoreError(_NOT_A_DATABASE.format(path=self.path, why=exc)) from None
        self._readers = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._slicer: ThreadPoolExecutor | None = None  # see _side_by_side
        self._closed = False
        self._opened_lock = threading.Lock()
        self._df_cache: dict[str, int] = {}
        self._df_cache_size = 0
        self._pending_cursor: dict[str, int] = {}
        self._migrate()

    # ---- plumbing --------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:  # another kind of file, or a damaged one
            conn.close()
            raise StoreError(_NOT_A_DATABASE.format(path=self.path, why=exc)) from None
        return conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection: readers never queue behind each other or the
        writer (WAL serves each statement the last committed state)."""
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
            self._readers.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

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
        with self._write_lock:
            conn = self._writer
            self._retrying(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                self._retrying(lambda: conn.execute("COMMIT"))

    def _write_one(self, sql: str, params: Sequence[Any]) -> None:
        with self._write_txn() as conn:
            self._retrying(lambda: conn.execute(sql, params))

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        conn = self._reader()
        found: list[Row] = self._retrying(lambda: conn.execute(sql, params).fetchall())
        return found

    def _read_each(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        if len(statements) < 2:
            return super()._read_each(statements)
        # Each of the pool's threads reads on its own connection; SQLite lets go of the GIL
        # while it waits on the disk or walks a b-tree.
        return [part.result() for part in self._side_by_side(self._read, statements)]

    def _side_by_side(
        self, read: Callable[..., T], calls: Sequence[Sequence[Any]]
    ) -> list[Future[T]]:
        """``read(*args)`` for each of ``calls`` on the store's read threads (made the first
        time a read is cut into parts), submitted while the store cannot be closed."""
        with self._opened_lock:
            if self._closed:
                raise StoreError(f"store {self.path} is closed")
            if self._slicer is None:
                self._slicer = ThreadPoolExecutor(_READ_THREADS, "cairn-read")
            return [self._slicer.submit(read, *args) for args in calls]

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
        return int(self._read("SELECT MAX(version) AS v FROM schema_migrations")[0]["v"])

    def close(self) -> None:
        with self._opened_lock:
            self._closed = True
            slicer, self._slicer = self._slicer, None
        if slicer is not None:
            slicer.shutdown(wait=True, cancel_futures=True)
        with self._write_lock:
            self._writer.close()
        with self._opened_lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()

    def integrity_check(self) -> str:
        return str(self._read("PRAGMA integrity_check")[0]["integrity_check"])

    # ---- the one write method --------------------------------------------------------

    def commit(self, changesets: Sequence[ChangeSet]) -> list[int]:
        seqs: list[int] = []
        # Records the commit creates (their precondition: not there yet) have no chunks to
        # bring in line when their state row is written.
        created = frozenset(
            e.record_id
            for cs in changesets
            for e in cs.expects
            if isinstance(e, ExpectRecord) and e.version_id is None
        )
        # Scopes and ACLs interned in this transaction, looked up once each.
        interned = _INTERNED.set({})
        try:
            with self._write_txn() as conn:
                for changeset in changesets:
                    for expect in changeset.expects:
                        _check(conn, expect)
                    for write in changeset.writes:
                        _apply(conn, write, created)
                    seqs.append(_insert_audit(conn, changeset.audit))
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"the change conflicts with stored data: {exc}") from exc
        finally:
            _INTERNED.reset(interned)
        return seqs

    # ---- what only SQLite says -------------------------------------------------------

    def keyword_search(
        self, query: KeywordQuery, where: ChunkFilter, limit: int
    ) -> list[tuple[int, float]]:
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

        In a large store this is done for each of a few chunk-id ranges side by side, and
        the best of their answers kept (see ``_KEYWORD_SLICED_FROM``).
        """
        if limit <= 0 or not query.terms:
            return []
        clause, params = to_sql(where, DIALECT)
        within = self._scope_reach(where)
        # Every term a quoted string literal: nothing a caller typed is read as FTS5 syntax.
        match = _fts_match(match_expression(query.terms), within[0] if within else None)
        ranges = _id_ranges(self.chunk_count(), _keyword_slices())
        if len(ranges) == 1:
            return self._ranked(match, clause, params, limit, ranges[0])
        parts = self._side_by_side(
            self._ranked, [(match, clause, params, limit, ids) for ids in ranges]
        )
        # Each range's filtered top ``limit`` is exact, so the best ``limit`` of their union
        # is the whole store's (every chunk id lies in one range).
        found = [hit for part in parts for hit in part.result()]
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:limit]

    def _ranked(
        self,
        match: str,
        clause: str,
        params: Sequence[Any],
        limit: int,
        ids: tuple[int, int],
    ) -> list[tuple[int, float]]:
        """The ``limit`` best chunks with ids in ``[ids[0], ids[1])`` that match and pass
        ``clause``, in two steps (see keyword_search)."""
        # bm25() is "lower is better"; negate so every recall signal reads "higher is better".
        depth = max(_KEYWORD_DEPTH_MIN, _KEYWORD_DEPTH_PER_RESULT * limit)
        found = self._read(
            f"SELECT f.id, f.score FROM (SELECT rowid AS id, -{_BM25} AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? AND rowid >= ? AND rowid < ? "
            "ORDER BY score DESC, rowid LIMIT ?) AS f "
            f"JOIN chunks c ON c.id = f.id WHERE {clause} ORDER BY f.score DESC, f.id LIMIT ?",
            [match, *ids, depth, *params, limit],
        )
        if len(found) < limit:
            found = self._read(
                f"SELECT c.id, -{_BM25} AS score "
                "FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
                "WHERE chunks_fts MATCH ? AND chunks_fts.rowid >= ? AND chunks_fts.rowid < ? "
                f"AND {clause} ORDER BY score DESC, c.id LIMIT ?",
                [match, *ids, *params, limit],
            )
        return [(int(r["id"]), float(r["score"])) for r in found]

    def doc_freq(self, term: str) -> int:
        # Frequencies only steer which query terms are worth searching for, so a cached
        # value is good enough until the index has grown by a tenth.
        size = self.chunk_count()
        cache = self._df_cache
        if size > self._df_cache_size * 1.1 or len(cache) > 100_000:
            cache.clear()
            self._df_cache_size = size
        found = cache.get(term)
        if found is None:
            plain = plain_term(term).strip()  # no indexed word holds what it drops
            # Counted through the index, up to a cap: fts5vocab counts a term's chunks by
            # walking its whole posting list (~80 ms for a word in most of a 1M-chunk
            # store), where the callers only tell apart counts up to the cap.
            hits = self._read(
                "SELECT count(*) AS n FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? "
                "LIMIT ?)",
                (f"{_TEXT_COLUMNS} : {quote_term(plain)}", DOC_FREQ_CAP),
            ) if plain else []  # fmt: skip
            found = cache[term] = int(hits[0]["n"]) if hits else 0
        return found

    def keyword_reach(self, where: ChunkFilter) -> int | None:
        within = self._scope_reach(where)
        return within[1] if within else None

    def _scope_reach(self, where: ChunkFilter) -> tuple[list[int], int] | None:
        return scoped_reach(where.scope_ids, self._scope_chunks, self.chunk_count)

    def _scope_chunks(self, scopes: list[int]) -> int:
        # A kept count, not the vocabulary: fts5vocab counts a term's documents by walking
        # its whole posting list, 500k entries for a reader of half of a 1M-chunk store.
        return self._count(
            "SELECT COALESCE(SUM(chunks), 0) AS n FROM scope_chunks "
            f"WHERE scope_id IN ({','.join('?' * len(scopes))})",
            scopes,
        )

    def chunk_count(self) -> int:
        # Chunks are never deleted, so the largest rowid is the count, read in O(log n).
        return self._count("SELECT COALESCE(MAX(id), 0) AS n FROM chunks")

    def compact(self) -> dict[str, int | str]:
        before = self._file_bytes()
        with self._write_txn() as conn:
            # merges the keyword index's b-tree segments into one
            conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")
        with self._write_lock:
            # VACUUM cannot run inside a transaction; it takes the write lock itself
            self._retrying(lambda: self._writer.execute("VACUUM"))
            self._retrying(lambda: self._writer.execute("PRAGMA optimize"))
        return {"bytes_before": before, "bytes_after": self._file_bytes()}

    def _file_bytes(self) -> int:
        path = Path(self.path)
        return path.stat().st_size if path.exists() else 0

    def put_vectors(self, model: str, dim: int, items: Sequence[tuple[str, bytes]]) -> None:
        cursor = self._pending_cursor.get(model)
        with self._write_txn() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO vectors (text_hash, model, dim, vector) VALUES (?,?,?,?)",
                [(h, model, dim, blob) for h, blob in items],
            )
            if cursor is not None:
                # Kept for the next process (``vectors_from``); it only ever moves forward.
                conn.execute(
                    "INSERT INTO index_meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
                    "DO UPDATE SET value = max(value, excluded.value)",
                    (VECTORS_FROM + model, cursor),
                )

    # ---- whole-store dump and load (cairn.store.transfer only) --------------------------

    def iter_all(self) -> Iterator[Dumped]:
        """Every stored row, in load order, from one read transaction (one snapshot)."""
        conn = self._connect()
        try:
            self._retrying(lambda: conn.execute("BEGIN"))

            def run(sql: str) -> Iterator[Row]:
                yield from conn.execute(sql)

            yield from self._dump(run)
            conn.execute("COMMIT")
        finally:
            conn.close()

    def import_rows(self, rows_: Iterable[Dumped], *, chunker: Chunker | None = None) -> int:
        """Load a dump into this store, which must be empty (see ``Store.import_rows``)."""
        loaded = 0
        try:
            with self._write_txn() as conn:
                for table in MEMORY_TABLES:
                    if conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                        raise Conflict(
                            f"cannot import into a store that is not empty ({table} has rows)"
                        )
                for row in rows_:
                    _import_row(conn, row, chunker)
                    loaded += 1
        except sqlite3.IntegrityError as exc:
            raise InvalidInput(f"the dump is inconsistent: {exc}") from exc
        return loaded


# ---- writes (private) -------------------------------------------------------------------


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


def _insert_sql(table: str, columns: Iterable[str], conflict: str = "") -> str:
    names = tuple(columns)
    return (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({','.join('?' * len(names))}) {conflict}"
    )


_AS_JSON = (dict, list)  # a tuple: ``dict | list`` would be built again for every cell


def _cells(row: Mapping[str, Any]) -> list[Any]:
    """A row's column values as SQLite stores them (lists and dicts as JSON text)."""
    return [rows.dumps(v) if isinstance(v, _AS_JSON) else v for v in row.values()]


def _insert(
    conn: sqlite3.Connection, table: str, row: Mapping[str, Any], conflict: str = ""
) -> sqlite3.Cursor:
    """``INSERT`` one row of column values."""
    return conn.execute(_insert_sql(table, row, conflict), _cells(row))


def _insert_many(conn: sqlite3.Connection, table: str, rows_: Sequence[Mapping[str, Any]]) -> None:
    """``INSERT`` rows that all have the same columns, in one statement."""
    if not rows_:
        return
    # The columns that hold JSON are the same in every row of a table: a batch of thousands
    # tests only those (a row with a list or dict elsewhere fails the insert, never quietly).
    first = rows_[0]
    json_at = [i for i, value in enumerate(first.values()) if isinstance(value, _AS_JSON)]
    cells = [list(row.values()) for row in rows_]
    for at in json_at:
        for row_cells in cells:
            if isinstance(value := row_cells[at], _AS_JSON):
                row_cells[at] = rows.dumps(value)
    conn.executemany(_insert_sql(table, first), cells)


def _upsert(
    conn: sqlite3.Connection,
    table: str,
    row: Mapping[str, Any],
    key: str,
    updated: Iterable[str],
) -> None:
    """``INSERT`` one row; where a row with the same ``key`` (its column list) is stored
    already, set that row's ``updated`` columns to this row's instead."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in updated)
    _insert(conn, table, row, f"ON CONFLICT ({key}) DO UPDATE SET {updates}")


_RECORD_STATE = (
    "status", "current_version_id", "current_version", "content_hash", "sensitivity",
    "superseded_by", "updated_at", "status_changed_at",
)  # fmt: skip


_NOT_A_DATABASE = "{path} is not a readable SQLite database ({why})"
_COPIED_MEANWHILE = (
    "the same content was stored in {scope} meanwhile: read again before proposing it"
)


def _check(conn: sqlite3.Connection, expect: Precondition) -> None:
    if isinstance(expect, ExpectRecord):
        row = conn.execute(
            "SELECT current_version_id, status, superseded_by FROM records WHERE id = ?",
            (expect.record_id,),
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
        if expect.unsuperseded and row["superseded_by"] is not None:
            raise Conflict(f"record {expect.record_id} was superseded meanwhile")
    elif isinstance(expect, ExpectNoCopies):
        holding, hashes = DIALECT.in_list("content_hash", sorted(expect.content_hashes))
        copies, statuses = DIALECT.in_list("status", [status.value for status in NOT_COPIES])
        found = conn.execute(
            f"SELECT id FROM records WHERE scope = ? AND {holding} AND NOT {copies}",
            (expect.scope, *hashes, *statuses),
        ).fetchall()
        if any(row["id"] not in expect.holders for row in found):
            raise CopiedMeanwhile(_COPIED_MEANWHILE.format(scope=expect.scope))
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


def _apply(conn: sqlite3.Connection, write: Write, created: frozenset[str] = frozenset()) -> None:
    if isinstance(write, PutRecord):
        _upsert(conn, "records", rows.record_row(write.record), "id", _RECORD_STATE)
        if write.record.id not in created:
            _reflect_record_state(conn, write.record)
    elif isinstance(write, PutVersion):
        _insert(conn, "versions", rows.version_row(write.version, encoded=True))
        _index_version(conn, write)
    elif isinstance(write, PutProposal):
        proposal = rows.proposal_row(write.proposal, encoded=True)
        _upsert(conn, "proposals", proposal, "id", rows.PROPOSAL_COLUMNS[1:])
    elif isinstance(write, PutBaseline):
        _insert_baseline(conn, write.baseline)
    elif isinstance(write, SetPublished):
        published = {"scope": write.scope, "baseline_id": write.baseline_id, "updated_at": _now()}
        _upsert(conn, "published", published, "scope", ("baseline_id", "updated_at"))
    elif isinstance(write, PutEdge):
        _upsert(conn, "edges", _edge_row(conn, write.edge), "id", rows.EDGE_STATE)
    elif isinstance(write, PutBatch):
        _put_batch(conn, write)
    elif isinstance(write, PutEvents):
        _append_events(conn, write.events)
    elif isinstance(write, PutTocNode):
        _put_toc_node(conn, write)
    elif isinstance(write, PutPathLink):
        link = rows.path_link_row(write.link)
        _upsert(conn, "path_links", link, "record_id, path", ("content_hash", "drifted"))
    else:  # pragma: no cover - exhaustive over Write
        raise StoreError(f"unknown write {write!r}")


def _put_batch(conn: sqlite3.Connection, write: PutBatch) -> None:
    """A batch's rows, one statement per table; plain inserts, so a stored id fails it."""
    _insert_many(conn, "proposals", [rows.proposal_row(p, encoded=True) for p in write.proposals])
    hashes = {w.version.record_id: w.version.content_hash for w in write.versions}
    _insert_many(conn, "records", [rows.record_row(r, hashes.get(r.id)) for r in write.records])
    _insert_many(
        conn, "versions", [rows.version_row(w.version, encoded=True) for w in write.versions]
    )
    states = {r.id: _state(r) for r in write.records}
    indexed = []
    for version in write.versions:
        state = states.get(version.version.record_id)
        if state is None:  # a new version of a record stored before
            state = conn.execute(
                "SELECT status, current_version_id, superseded_by FROM records WHERE id = ?",
                (version.version.record_id,),
            ).fetchone()
        indexed.append(_version_chunks(conn, version, state))
    _add_chunks(conn, indexed)
    _insert_many(conn, "edges", [_edge_row(conn, edge) for edge in write.edges])
    _insert_many(conn, "path_links", [rows.path_link_row(link) for link in write.links])


def _state(record: Record) -> dict[str, Any]:
    """The columns of a record's state row its chunks are filtered by."""
    return {
        "status": record.status.value,
        "current_version_id": record.current_version_id,
        "superseded_by": record.superseded_by,
    }


def _edge_row(conn: sqlite3.Connection, edge: Edge) -> dict[str, Any]:
    """An edge's row with its scope and ACL interned (walks filter on those)."""
    return {
        **rows.edge_row(edge, encoded=True),
        "scope_id": _intern(conn, "scopes", ("scope",), (edge.scope,)),
        "acl_id": _acl_id(conn, edge.acl),
    }


def _put_toc_node(conn: sqlite3.Connection, write: PutTocNode) -> None:
    """A node's new version, its latest pointer, its grips, and the chunks that index it
    (the earlier versions' chunks leave the head)."""
    node = write.node
    row = rows.toc_node_row(node)
    scope_id = _intern(conn, "scopes", ("scope",), (node.scope,))
    acl_id = _acl_id(conn, node.acl)
    row.update(
        scope_id=scope_id,
        acl_id=acl_id,
        acl=rows.dumps(row["acl"]),
        body=rows.dumps(row["body"]),
        retired=int(node.retired),
    )
    _insert(conn, "toc_nodes", row)
    latest = {
        key: row[key]
        for key in ("node_id", "version", "level", "partition_key", "parent_id", "starts_at")
    }
    latest.update(
        last_ts=row["last_ts"], scope_id=scope_id, acl_id=acl_id, retired=row["retired"],
        digest=row["digest"],
    )  # fmt: skip
    _upsert(conn, "toc_latest", latest, "node_id", [k for k in latest if k != "node_id"])
    conn.executemany(
        "INSERT INTO grips (grip_id, node_id, excerpt, event_id_start, event_id_end, event_id, "
        "ts, source, scope_id, acl_id) VALUES (?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT (grip_id) DO NOTHING",
        [
            (g["grip_id"], node.node_id, g["excerpt"], g["event_id_start"], g["event_id_end"],
             g["event_id"], g["ts"], g["source"], scope_id, acl_id)
            for g in map(rows.grip_row, node.grips)
        ],
    )  # fmt: skip
    # the node's earlier chunks leave the head (with a seq, so catalogs follow)
    conn.execute(
        "UPDATE chunks SET is_head = 0, seq = ? WHERE record_id = ? AND is_head = 1",
        (_next_seq(conn), node.node_id),
    )
    node_chunks = _Chunks(
        write.chunks,
        title=node.title,
        hashed_title="",  # a node's chunk carries its title in its heading
        scope_id=scope_id,
        fixed={
            "record_id": node.node_id, "version_id": f"{node.node_id}@{node.version}",
            "version_no": node.version, "kind": f"timeline_{node.level.value}",
            "acl_id": acl_id, "status": "active", "is_head": 1, "superseded": 0,
            "valid_from": None, "valid_to": None, "created_at": _utc(node.built_at),
            "source_kind": "timeline", "source_time": _utc(node.first_ts or node.starts_at),
        },
    )  # fmt: skip
    _add_chunks(conn, [node_chunks])


def _append_events(conn: sqlite3.Connection, events: Sequence[Event]) -> None:
    """Insert the events not stored yet (in source-time order), an outbox row for each, and
    refuse the commit when a stored event's id comes back with other content."""
    if not events:
        return
    interned: dict[tuple[str, str], tuple[int, int]] = {}
    values: list[tuple[Any, ...]] = []
    for event in sorted(events, key=lambda e: (e.ts, e.event_id)):
        row = rows.event_row(event)
        key = (event.scope, rows.dumps(row["acl"]))
        if key not in interned:
            scope_id = _intern(conn, "scopes", ("scope",), (event.scope,))
            interned[key] = (scope_id, _acl_id(conn, event.acl))
        scope_id, acl_id = interned[key]
        values.append(
            (
                row["event_id"], row["ts"], row["session_id"], row["scope"], scope_id,
                row["agent"], row["role"], row["kind"], row["text"], rows.dumps(row["metadata"]),
                rows.dumps(row["acl"]), acl_id, row["digest"], row["appended_at"],
                row["appended_by"],
            )
        )  # fmt: skip
    before = int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])
    conn.executemany(
        "INSERT INTO events (event_id, ts, session_id, scope, scope_id, agent, role, kind, "
        "text, metadata, acl, acl_id, digest, appended_at, appended_by) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (scope_id, event_id) DO NOTHING",
        values,
    )
    # One writer at a time: the rows past ``before`` are exactly this commit's, in order.
    conn.execute(
        "INSERT INTO event_outbox (position, event_seq) SELECT "
        "(SELECT coalesce(max(position), 0) FROM event_outbox) "
        "+ row_number() OVER (ORDER BY seq), seq FROM events WHERE seq > ?",
        (before,),
    )
    # An event is its scope's: an id is compared with the same id in the same scope only.
    sent: dict[int, dict[str, str]] = {}
    for v in values:
        sent.setdefault(v[4], {})[v[0]] = v[12]
    for scope_id, digests in sent.items():
        ids = list(digests)
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for event_id, digest in conn.execute(
                f"SELECT event_id, digest FROM events WHERE scope_id = ? AND event_id IN ({marks})",
                [scope_id, *part],
            ):
                if digest != digests[event_id]:
                    raise Conflict(
                        f"event {event_id} was appended before with other content; events "
                        "are never rewritten: send a correction as a new event",
                        field="event_id",
                    )


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _insert_baseline(conn: sqlite3.Connection, baseline: Baseline) -> None:
    _insert(conn, "baselines", rows.baseline_row(baseline))
    conn.executemany(
        "INSERT INTO baseline_pins (baseline_id, record_id, version_id) VALUES (?,?,?)",
        [(baseline.id, rid, vid) for rid, vid in sorted(baseline.pins.items())],
    )


def _insert_audit(conn: sqlite3.Connection, entry: AuditEntry, *, seq: int | None = None) -> int:
    row = rows.audit_row(entry)
    cursor = _insert(conn, "audit", row if seq is None else {"seq": seq, **row})
    return int(cursor.lastrowid or 0)


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
        _insert_baseline(conn, row)
    elif isinstance(row, PublishedRow):
        _insert(
            conn,
            "published",
            {"scope": row.scope, "baseline_id": row.baseline_id,
             "updated_at": row.updated_at.isoformat()},
        )  # fmt: skip
    elif isinstance(row, Edge):
        _apply(conn, PutEdge(row))
    elif isinstance(row, Event):
        _append_events(conn, (row,))
    else:
        _apply(conn, PutPathLink(row))
