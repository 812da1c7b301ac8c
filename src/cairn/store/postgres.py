"""The server store: PostgreSQL (psycopg 3), for many stateless cairn processes on one database.

Same protocol and semantics as ``SqliteStore``; what differs is who enforces them:

- **Zero bypass, enforced by the database.** The store acts as ``cairn_serving``
  (``SET ROLE`` right after connecting, when the login is a superuser or was granted it),
  which may only ``SELECT`` memory tables and change them through ``cairn_commit(jsonb)``,
  a ``SECURITY DEFINER`` function that applies change sets with their audit entries (see
  ``pg_migrations``).
- **Concurrency.** ``commit`` is one call of ``cairn_commit`` in one transaction. Preconditions
  are checked there under ``SELECT … FOR UPDATE`` (per-scope advisory lock for a published
  pointer that may not exist yet), so of two curators accepting conflicting proposals exactly
  one passes and the other gets ``Conflict``. Deadlocks and serialization failures roll the
  whole transaction back and are retried here: safe, since the retry re-checks every
  precondition.
- **Durability.** A commit is acknowledged once PostgreSQL has flushed its WAL
  (``synchronous_commit`` is forced ``on`` for the session). If the connection drops while a
  commit is in flight, the store takes a fresh connection and looks its audit ids up:
  present means it committed (return their seqs), absent means it did not (retry), so a
  commit is never applied twice and never reported lost when it was kept.

A pool of connections (``psycopg_pool``) in autocommit mode: each read borrows one and is
one statement (one snapshot), like the SQLite store's reads, so a read never waits behind a
commit in flight. A connection the server dropped is checked out of the pool and replaced.
"""

from __future__ import annotations

import json
import math
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from cairn.errors import Conflict, CopiedMeanwhile, InvalidInput, StoreError
from cairn.model import (
    AuditEntry,
    Baseline,
    Edge,
    Event,
    PathLink,
    Proposal,
    Record,
    Version,
)
from cairn.store import base
from cairn.store.factory import redact
from cairn.store.filters import to_sql
from cairn.store.pg_migrations import (
    AUDIT_LOCK,
    CONFLICT_SQLSTATE,
    OWNER_ROLE,
    PG_MEMORY_TABLES,
    SCHEMA,
    SERVING_ROLE,
    current_version,
    functions_current,
    latest_version,
    migrate,
)
from cairn.store.sql import rows
from cairn.store.sql.dialect import Dialect
from cairn.store.sql.events import SqlEvents
from cairn.store.sql.graph import SqlGraph
from cairn.store.sql.reads import SqlReads
from cairn.store.sql.tasks import SqlTasks
from cairn.store.sql.timeline import SqlTimeline

__all__ = [
    "COMMON_LEXEMES_TTL_S",
    "CONNECT_TIMEOUT_S",
    "DIALECT",
    "DOC_FREQ_CACHE_SIZE",
    "DOC_FREQ_CAP",
    "IMPORT_BATCH",
    "POOL_SIZE",
    "RANK_NORMALIZATION",
    "RANK_WEIGHTS",
    "RECONNECT_SECONDS",
    "RETRY_ATTEMPTS",
    "Conn",
    "PostgresDialect",
    "PostgresStore",
    "Row",
    "T",
    "glob_to_like",
]

T = TypeVar("T")
Row = Mapping[str, Any]
Conn = psycopg.Connection[DictRow]

RECONNECT_SECONDS = 30.0
# Connections a store keeps: a read borrows one, so this many run at once (a server's
# request threads share one store).
POOL_SIZE = 8
RETRY_ATTEMPTS = 20  # deadlock / serialization-failure retries per commit
CONNECT_TIMEOUT_S = 10
IMPORT_BATCH = 500

_RECORDS_JOIN = "FROM records r JOIN versions v ON v.id = r.current_version_id"
_RECORD_COLUMNS = (
    "r.id, r.kind, r.scope, r.status, r.current_version_id, r.current_version, "
    "r.superseded_by, r.created_at, r.updated_at, r.status_changed_at, r.created_by, "
    "v.content::text AS content"
)
_VERSION_COLUMNS = (
    "id, record_id, number, content::text AS content, content_hash, created_at, created_by, "
    "proposal_id"
)
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _opt_utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value else None


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def glob_to_like(pattern: str) -> tuple[str, str]:
    """Translate a SQLite ``GLOB`` pattern into (operator, PostgreSQL pattern) that matches
    exactly what SQLite's would.

    ``*``/``?`` become ``LIKE``'s ``%``/``_`` (so an index on a ``COLLATE "C"`` column can
    serve a prefix glob); a pattern with a ``[...]`` class needs a regular expression.
    """
    if "[" not in pattern:
        escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return "LIKE", escaped.replace("*", "%").replace("?", "_")
    out = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            negated = pattern[i + 1 : i + 2] == "^"
            first = i + 2 if negated else i + 1
            # a "]" right after "[" or "[^" is a member, as in SQLite
            end = pattern.find("]", first + 1 if pattern[first : first + 1] == "]" else first)
            if end == -1:
                return "~", _NEVER  # SQLite: an unclosed class matches nothing
            out.append(_glob_class(pattern[first:end], negated))
            i = end
        else:
            out.append(_regex_char(ch))
        i += 1
    out.append("$")
    return "~", "".join(out)


# Written by hand: no library translates SQLite's GLOB to PostgreSQL, whose bracket
# expressions give meaning to text SQLite takes literally ("[:alpha:]", "[.x.]", "[=a=]",
# backslashes) and refuse what SQLite just never matches (a reversed range, "[^]").
# Every character is spelled as a code point escape, so nothing in a class is special.

_NEVER = "^(?!)"  # a regular expression no text matches


def _regex_char(ch: str) -> str:
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


def _glob_class(members: str, negated: bool) -> str:
    """A SQLite GLOB class's members (single characters and ``a-z`` ranges) as a regular
    expression matching one character, as SQLite would."""
    parts: list[str] = []
    j = 0
    if members.startswith("]"):  # a "]" first is a member, and never a range's low end
        parts.append(_regex_char("]"))
        j = 1
    while j < len(members):
        if j + 2 < len(members) and members[j + 1] == "-":
            low, high = members[j], members[j + 2]
            # SQLite takes the first character as a member before it sees the range, so a
            # reversed range holds that character alone
            high = max(low, high)
            parts.append(f"{_regex_char(low)}-{_regex_char(high)}")
            j += 3
        else:
            parts.append(_regex_char(members[j]))
            j += 1
    return f"[{'^' if negated else ''}{''.join(parts)}]"


class PostgresDialect(Dialect):
    """How PostgreSQL spells the shared statements (``store.sql.dialect``)."""

    id_param = '? COLLATE "C"'  # id columns compare byte-wise (schema.py)

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        if len(values) == 1:
            # one value is an equality, which the planner matches to an index prefix and
            # then walks in the index's order (an ``= ANY`` array it only filters by)
            return f"{column} = ?", [values[0]]
        return f"{column} = ANY(?)", [list(values)]

    def flag(self, column: str, value: bool) -> str:
        return column if value else f"NOT {column}"

    def time(self, value: datetime) -> Any:
        return _as_utc(value)

    def json_array_has(self, column: str, key: str) -> str:
        # jsonb_exists, not the ? operator, which would read as a parameter
        return f"jsonb_exists({column} -> '{key}', ?)"

    def null_id(self) -> str:
        return 'CAST(NULL AS text) COLLATE "C"'

    def json_text(self, column: str) -> str:
        return f"{column}::text"

    def json_field(self, column: str, key: str) -> str:
        return f"{column} ->> '{key}'"

    def glob(self, column: str, pattern: str) -> tuple[str, list[Any]]:
        op, translated = glob_to_like(pattern)
        return f"{column} {op} ?", [translated]

    def json_equals(self, column: str, path: Sequence[str], value: Any) -> tuple[str, list[Any]]:
        return f"({column} #> ?) = ?::jsonb", [list(path), json.dumps(value)]

    def graph_key(self, column: str) -> str:
        return f"({column} -> 'metadata' ->> 'graph_id')"


DIALECT = PostgresDialect()


def _filter_sql(where: base.ChunkFilter) -> tuple[str, list[Any]]:
    """``where`` as SQL over ``chunks c``; timestamps compare as UTC instants."""
    return to_sql(where, DIALECT)


def _configure(conn: Conn) -> None:
    """Every pooled connection: cairn's schema, UTC, durable commits, the serving role."""
    conn.execute(f"SET search_path = {SCHEMA}, public")
    conn.execute("SET TimeZone = 'UTC'")
    # A commit is acknowledged only once its WAL is flushed, whatever the server default.
    conn.execute("SET synchronous_commit = on")
    # Drop to the serving role when the login may (superusers and members of it), so even
    # a cairn started with an owner or superuser URL cannot write memory tables except
    # through cairn_commit.
    row = conn.execute(
        "SELECT pg_has_role(session_user, %s, 'MEMBER') AS ok", (SERVING_ROLE,)
    ).fetchone()
    if row and row["ok"]:
        conn.execute(f"SET ROLE {SERVING_ROLE}")


class PostgresStore(SqlReads, SqlGraph, SqlTasks, SqlEvents, SqlTimeline):
    dialect: Dialect = DIALECT

    def __init__(self, url: str, *, auto_migrate: bool = True) -> None:
        """Connect to ``url`` and make sure its schema is current.

        With ``auto_migrate`` (the default) a database behind this cairn's schema is migrated
        first, which needs an owner login; a serving-only login gets a ``StoreError`` that
        says to run ``cairn migrate`` with one.
        """
        self.url = url
        self._common: tuple[float, dict[str, float]] | None = None
        # (chunk count they were counted at, term -> chunks holding it): see doc_freq
        self._doc_freqs: tuple[int, dict[str, int]] = (-1, {})
        # model -> the seq of the first chunk still waiting for a vector: see pending_vectors
        self._pending_cursor: dict[str, int] = {}
        self._check_schema(auto_migrate)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": CONNECT_TIMEOUT_S,
            },
            configure=_configure,
            # A connection the server dropped (a restart) is replaced before it is lent.
            check=ConnectionPool.check_connection,
            timeout=RECONNECT_SECONDS,
            name="cairn",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to PostgreSQL: {redact(str(exc))}") from None

    def _check_schema(self, auto_migrate: bool) -> None:
        try:
            with psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
                version = current_version(conn)
                functions = version == latest_version() and functions_current(conn)
        except psycopg.Error as exc:  # unreachable, refused, or an address psycopg cannot read
            # the driver's message may quote the address, password included
            raise StoreError(f"cannot connect to PostgreSQL: {redact(str(exc))}") from None
        if version > latest_version():
            raise StoreError(
                f"database schema version {version} is newer than this cairn "
                f"({latest_version()}): upgrade cairn"
            )
        if version < latest_version() or not functions:
            if not auto_migrate:
                raise StoreError(
                    f"database schema is at version {version}, this cairn needs "
                    f"{latest_version()}: run 'cairn migrate'"
                )
            migrate(self.url)

    # ---- plumbing --------------------------------------------------------------------

    def _run(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` on a pooled connection; a connection dropped under it is replaced and
        ``fn`` run once more (reads are safe to repeat). Readers never queue behind a
        writer: each borrows its own connection."""
        for attempt in range(2):
            try:
                with self._pool.connection() as conn:
                    return fn(conn)
            except PoolTimeout as exc:
                raise StoreError(
                    f"no PostgreSQL connection within {RECONNECT_SECONDS:.0f}s: {exc}"
                ) from exc
            except psycopg.OperationalError as exc:
                if attempt == 1:
                    raise StoreError(f"PostgreSQL read failed: {exc}") from exc
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL read failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _write_one(self, query: str, params: Sequence[Any]) -> None:
        sql = self.dialect.sql(query).encode()
        self._run(lambda conn: conn.execute(sql, params))

    def _read(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        sql = self.dialect.sql(query).encode()
        found: list[Row] = list(self._run(lambda conn: conn.execute(sql, params).fetchall()))
        return found

    @property
    def schema_version(self) -> int:
        return self._run(current_version)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the one write method --------------------------------------------------------

    def commit(self, changesets: Sequence[base.ChangeSet]) -> list[int]:
        if not changesets:
            return []
        payload = _json([_changeset_json(cs) for cs in changesets])
        audit_ids = [cs.audit.id for cs in changesets]
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._pool.connection() as conn:
                    row = conn.execute(
                        "SELECT cairn_commit(%s::jsonb) AS seqs", (payload,)
                    ).fetchone()
                assert row is not None
                return [int(s) for s in row["seqs"]]
            except PoolTimeout as exc:
                raise StoreError(
                    f"no PostgreSQL connection within {RECONNECT_SECONDS:.0f}s: {exc}"
                ) from exc
            except pg_errors.Error as exc:
                if exc.sqlstate == CONFLICT_SQLSTATE:
                    detail = json.loads(exc.diag.message_detail or "{}")
                    refusal = CopiedMeanwhile if detail.pop("copied", False) else Conflict
                    raise refusal(exc.diag.message_primary or str(exc), **detail) from exc
                if isinstance(exc, pg_errors.IntegrityError):
                    # the constraint's words only: PostgreSQL's detail quotes the stored
                    # row's key, which need not be the caller's to read
                    said = exc.diag.message_primary or "a constraint refused it"
                    raise Conflict(f"the change conflicts with stored data: {said}") from exc
                if isinstance(exc, pg_errors.UntranslatableCharacter | pg_errors.DataError):
                    raise InvalidInput(f"PostgreSQL cannot store this value: {exc}") from exc
                if isinstance(exc, _RETRYABLE) and attempt < RETRY_ATTEMPTS:
                    time.sleep(min(0.002 * 2**attempt, 0.2))  # back-off before the retry
                    continue
                if isinstance(exc, psycopg.OperationalError):
                    # The connection dropped mid-commit: did the commit land?
                    seqs = self._committed_seqs(audit_ids)
                    if seqs is not None:
                        return seqs
                    if attempt < RETRY_ATTEMPTS:
                        continue
                raise StoreError(f"PostgreSQL commit failed: {exc}") from exc

    def _committed_seqs(self, audit_ids: list[str]) -> list[int] | None:
        """After a dropped connection: the seqs if the commit landed, ``None`` if it did not.

        A commit is atomic and every change set carries a unique audit id, so its audit ids
        are either all stored or none are.
        """
        landed = self._read("SELECT id, seq FROM audit WHERE id = ANY(?)", (audit_ids,))
        if not landed:
            return None
        found = {r["id"]: int(r["seq"]) for r in landed}
        if len(found) != len(audit_ids):  # pragma: no cover - atomic commits prevent this
            raise StoreError("a commit was partly applied; the database is inconsistent")
        return [found[i] for i in audit_ids]

    # ---- what only PostgreSQL says ------------------------------------------------------

    def keyword_search(
        self, query: base.KeywordQuery, where: base.ChunkFilter, limit: int
    ) -> list[tuple[int, float]]:
        """Chunks matching any term of ``match``, best first (higher is better), among those
        ``where`` admits: the filter is part of the query, so chunks a reader may not see
        are never ranked (docs/operations.md: how it differs from BM25).

        A chunk scores the sum over the query's terms of the term's BM25 inverse document
        frequency times its ``ts_rank_cd``. ``ts_rank_cd`` alone weighs every term alike, so
        a word in half the store counted as much as the one that singles out a chunk. On
        LoCoMo, keyword turn recall@10 on PostgreSQL went from 66.5% to 73.5% (SQLite's BM25:
        75.4%; docs/benchmarks.md). Terms matching nothing are left out.
        """
        # each term is a plainto_tsquery parameter, which reads any text as plain words
        terms = [t for t in dict.fromkeys(_plain(term) for term in query.terms) if t]
        if not terms or limit <= 0:
            return []
        total = self.chunk_count()
        weighted = [(term, _idf(df, total)) for term in terms if (df := self.doc_freq(term)) > 0]
        if not weighted:
            return []
        clause, params = _filter_sql(where)
        rank = " + ".join(
            [f"%s * ts_rank_cd(%s::real[], c.tsv, plainto_tsquery('english', %s), "
             f"{RANK_NORMALIZATION})"] * len(weighted)
        )  # fmt: skip
        match_any = " || ".join(["plainto_tsquery('english', %s)"] * len(weighted))
        rank_params: list[Any] = []
        for term, idf in weighted:
            rank_params += [idf, list(RANK_WEIGHTS), term]
        found = self._read(
            f"SELECT c.id, ({rank}) AS score FROM chunks c "
            f"WHERE c.tsv @@ ({match_any}) AND {clause} "
            "ORDER BY score DESC, c.id LIMIT %s",
            [*rank_params, *(term for term, _ in weighted), *params, limit],
        )
        return [(int(r["id"]), float(r["score"])) for r in found]

    def doc_freq(self, term: str) -> int:
        """About how many chunks contain ``term`` (after 'english' stemming).

        Keyword recall asks it of every query term (to drop the most common ones) and
        keyword search again (to weigh them), so answers are kept until the store next
        gains chunks. An exact count of a common term is slow (a heap visit per match:
        ~20 ms for a term in 10% of 100k chunks). So a term among the most common lexemes in
        PostgreSQL's own statistics of the ``tsv`` column (``pg_stats.most_common_elems``,
        kept by ANALYZE/autovacuum) is estimated from its sampled frequency; any other term
        is rarer than all of those and is counted exactly through the GIN index (capped at
        ``DOC_FREQ_CAP``), which is cheap. Before the first ANALYZE every term is counted.
        """
        total = self.chunk_count()
        known = self._doc_freqs
        if known[0] != total or len(known[1]) >= DOC_FREQ_CACHE_SIZE:
            known = self._doc_freqs = (total, {})
        found = known[1].get(term)
        if found is None:
            found = known[1][term] = self._count_doc_freq(term, total)
        return found

    def _count_doc_freq(self, term: str, total: int) -> int:
        words = _plain(term).split()
        if not words:
            return 0
        found = self._read(
            "SELECT tsvector_to_array(to_tsvector('english', %s)) AS lexemes", (" ".join(words),)
        )
        lexemes: list[str] = found[0]["lexemes"]
        if not lexemes:
            return 0  # only stopwords: they match nothing
        common = self._common_lexemes()
        if all(lexeme in common for lexeme in lexemes):
            return round(min(common[lexeme] for lexeme in lexemes) * total)
        return self._count(
            "SELECT count(*) AS n FROM (SELECT 1 FROM chunks "
            "WHERE tsv @@ plainto_tsquery('english', %s) LIMIT %s) s",
            (" ".join(words), DOC_FREQ_CAP),
        )

    def _common_lexemes(self) -> dict[str, float]:
        """Lexeme -> share of chunks, for the most common lexemes ANALYZE found (cached for
        ``COMMON_LEXEMES_TTL_S``; empty before the table was first analysed)."""
        now = time.monotonic()
        cached = self._common
        if cached is not None and now - cached[0] < COMMON_LEXEMES_TTL_S:
            return cached[1]
        found = self._read(
            "SELECT most_common_elems::text::text[] AS elems, "
            "most_common_elem_freqs AS freqs FROM pg_stats "
            "WHERE schemaname = %s AND tablename = 'chunks' AND attname = 'tsv'",
            (SCHEMA,),
        )
        common: dict[str, float] = {}
        if found and found[0]["elems"] and found[0]["freqs"]:
            # freqs holds one frequency per element, then min, max and null frequency
            common = dict(zip(found[0]["elems"], found[0]["freqs"], strict=False))
        self._common = (now, common)
        return common

    def keyword_reach(self, where: base.ChunkFilter) -> int | None:
        # With the scope btree the planner can answer a few small scopes from their own rows
        # (or intersect them with the GIN match); for many or large scopes it scans the GIN
        # match of the whole table and filters after, so there is no bound to give.
        within = base.scoped_reach(where.scope_ids, self._scope_chunks, self.chunk_count)
        return within[1] if within else None

    def _scope_chunks(self, scopes: list[int]) -> int:
        return self._count(
            "SELECT COALESCE(SUM(chunks), 0) AS n FROM scope_chunks WHERE scope_id = ANY(%s)",
            (scopes,),
        )

    def chunk_count(self) -> int:
        found = self._read("SELECT value FROM index_meta WHERE key = 'chunks'")
        return int(found[0]["value"]) if found else 0

    def compact(self) -> dict[str, int | str]:
        # PostgreSQL's autovacuum reclaims space and keeps statistics; the serving login
        # does not own the tables and may not vacuum them.
        return {"skipped": "PostgreSQL compacts itself (autovacuum)"}

    def put_vectors(self, model: str, dim: int, items: Sequence[tuple[str, bytes]]) -> None:
        """Cache embeddings through ``cairn_put_vectors`` (the serving role cannot write
        tables): derived data, so no audit entry. Each blob is ``dim`` float32 values."""
        if not items:
            return
        hashes = [h for h, _ in items]
        blobs = [bytes(blob) for _, blob in items]
        floats = [_floats(blob, dim) for blob in blobs]
        cursor = self._pending_cursor.get(model)
        try:
            with self._pool.connection() as conn, conn.transaction():
                conn.execute(
                    "SELECT cairn_put_vectors(%s, %s, %s::text[], %s::bytea[], %s::real[])",
                    (model, dim, hashes, blobs, floats),
                )
                if cursor is not None:
                    # kept for the next process (``vectors_from``)
                    conn.execute("SELECT cairn_vectors_from(%s, %s)", (model, cursor))
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(f"PostgreSQL could not store vectors: {exc}") from exc

    # ---- whole-store dump and load (cairn.store.transfer only) --------------------------

    def iter_all(self) -> Iterator[base.Dumped]:
        """Every stored row, in load order, from one consistent snapshot."""
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

            def run(sql: str) -> Iterator[DictRow]:
                # A named (server-side) cursor streams big tables instead of loading them.
                with conn.cursor(name="cairn_dump", row_factory=dict_row) as cur:
                    cur.itersize = 1000
                    cur.execute(self.dialect.sql(sql).encode())
                    yield from cur

            yield from self._dump(run)

    def import_rows(
        self, dumped: Iterable[base.Dumped], *, chunker: base.Chunker | None = None
    ) -> int:
        """Load a dump into this store, which must be empty; return the rows loaded.

        Not a gate bypass: it replays a history the gate already audited (audit entries with
        their original seqs) and refuses a store holding anything. It acts as
        ``cairn_owner`` (``SET LOCAL ROLE``), so only an owner/superuser login may import;
        the serving role gets ``StoreError``. With ``chunker`` every version is indexed
        again, by the same ``cairn_index_versions`` a commit uses.
        """
        loaded = 0
        with self._pool.connection() as conn:
            try:
                with conn.transaction():
                    conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
                    tables = ", ".join(PG_MEMORY_TABLES)
                    # No commit may slip in between the emptiness check and the load.
                    conn.execute(f"LOCK TABLE {tables} IN EXCLUSIVE MODE".encode())
                    for table in PG_MEMORY_TABLES:
                        if conn.execute(f"SELECT 1 FROM {table} LIMIT 1".encode()).fetchone():
                            raise Conflict(
                                f"cannot import into a store that is not empty ({table} has rows)"
                            )
                    batch: list[base.Dumped] = []
                    for row in dumped:
                        if batch and type(row) is not type(batch[0]):
                            loaded += _load_batch(conn, batch, chunker)
                            batch = []
                        batch.append(row)
                        if len(batch) >= IMPORT_BATCH:
                            loaded += _load_batch(conn, batch, chunker)
                            batch = []
                    if batch:
                        loaded += _load_batch(conn, batch, chunker)
                    _stamp_imported_chunks(conn)
            except pg_errors.InsufficientPrivilege as exc:
                raise StoreError(
                    f"import needs a login that may act as {OWNER_ROLE}: {exc.diag.message_primary}"
                ) from exc
            except pg_errors.IntegrityError as exc:
                raise InvalidInput(f"the dump is inconsistent: {exc}") from exc
        # SET LOCAL ROLE ended with the transaction: the connection is serving again.
        return loaded


# ---- retrieval index (private) -----------------------------------------------------------

# ts_rank_cd weights for {D, C, B, A}: text (C) : heading (B) : title (A) = 1 : 1.5 : 3, the
# column weights SQLite's bm25() uses. Normalization 1 divides by 1 + log(length in words).
RANK_WEIGHTS = (0.1, 1 / 3, 0.5, 1.0)
RANK_NORMALIZATION = 1
DOC_FREQ_CAP = 10_000
DOC_FREQ_CACHE_SIZE = 50_000
COMMON_LEXEMES_TTL_S = 300.0


def _plain(text: str) -> str:
    """Text PostgreSQL accepts as a parameter: no NUL, no lone surrogate, no quote."""
    cleaned = text.encode("utf-8", "ignore").decode("utf-8")
    return " ".join(cleaned.replace("\x00", " ").replace('"', " ").split())


def _idf(doc_freq: int, total: int) -> float:
    """BM25's inverse document frequency (the Robertson-Sparck Jones weight, kept positive)."""
    return math.log(1 + (max(total, doc_freq) - doc_freq + 0.5) / (doc_freq + 0.5))


def _floats(blob: bytes, dim: int) -> list[float]:
    """A cached vector (float32, native byte order as numpy wrote it) as Python floats."""
    values = array("f")
    values.frombytes(blob)
    if sys.byteorder != "little":  # pragma: no cover - cairn writes little-endian blobs
        values.byteswap()
    if len(values) != dim:
        raise InvalidInput(f"a vector of {len(values)} floats given for dimension {dim}")
    return values.tolist()


def _as_utc(value: datetime) -> datetime:
    """Naive datetimes are UTC, as in the SQLite index."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# ---- change sets to the JSON cairn_commit takes (private) --------------------------------


def _expect_json(expect: base.Precondition) -> dict[str, Any]:
    if isinstance(expect, base.ExpectRecord):
        return {
            "t": "record",
            "record_id": expect.record_id,
            "version_id": expect.version_id,
            "status": expect.status.value if expect.status else None,
            "unsuperseded": expect.unsuperseded,
        }
    if isinstance(expect, base.ExpectProposal):
        return {"t": "proposal", "proposal_id": expect.proposal_id, "status": expect.status.value}
    if isinstance(expect, base.ExpectNoCopies):
        return {
            "t": "copies",
            "scope": expect.scope,
            "hashes": sorted(expect.content_hashes),
            "holders": sorted(expect.holders),
            "not_copies": [status.value for status in base.NOT_COPIES],
        }
    return {"t": "published", "scope": expect.scope, "baseline_id": expect.baseline_id}


def _write_json(write: base.Write) -> dict[str, Any]:
    if isinstance(write, base.PutRecord):
        return {"t": "record", "row": rows.record_row(write.record)}
    if isinstance(write, base.PutVersion):
        return {
            "t": "version",
            "row": rows.version_row(write.version),
            "chunks": _chunks_json(write.version, write.chunks),
        }
    if isinstance(write, base.PutProposal):
        return {"t": "proposal", "row": rows.proposal_row(write.proposal)}
    if isinstance(write, base.PutBatch):
        hashes = {w.version.record_id: w.version.content_hash for w in write.versions}
        return {
            "t": "batch",
            "proposals": [rows.proposal_row(p) for p in write.proposals],
            "records": [rows.record_row(r, hashes.get(r.id)) for r in write.records],
            "versions": [rows.version_row(w.version) for w in write.versions],
            "chunks": [c for w in write.versions for c in _chunks_json(w.version, w.chunks)],
            "edges": [rows.edge_row(e) for e in write.edges],
            "path_links": [rows.path_link_row(link) for link in write.links],
        }
    if isinstance(write, base.PutBaseline):
        b = write.baseline
        return {"t": "baseline", "row": rows.baseline_row(b), "pins": dict(sorted(b.pins.items()))}
    if isinstance(write, base.SetPublished):
        now = datetime.now(UTC).isoformat()
        return {
            "t": "published",
            "row": {"scope": write.scope, "baseline_id": write.baseline_id, "updated_at": now},
        }
    if isinstance(write, base.PutEdge):
        return {"t": "edge", "row": rows.edge_row(write.edge)}
    if isinstance(write, base.PutEvents):
        ordered = sorted(write.events, key=lambda e: (e.ts, e.event_id))
        return {"t": "events", "rows": [rows.event_row(e) for e in ordered]}
    if isinstance(write, base.PutTocNode):
        return {
            "t": "toc_node",
            "row": rows.toc_node_row(write.node),
            "grips": [rows.grip_row(g) for g in write.node.grips],
            "chunks": [
                {
                    "chunk_key": c.chunk_key,
                    "heading": c.heading,
                    "start": c.start,
                    "end": c.end,
                    "text": c.text,
                    "text_hash": base.text_hash("", c.heading, c.text),
                }
                for c in write.chunks
            ],
        }
    if isinstance(write, base.PutPathLink):
        return {"t": "path_link", "row": rows.path_link_row(write.link)}
    raise StoreError(f"unknown write {write!r}")  # pragma: no cover - exhaustive over base.Write


def _chunks_json(version: Version, chunks: Sequence[base.ChunkDraft]) -> list[dict[str, Any]]:
    """A version's chunks as ``cairn_index_versions`` takes them (it reads the rest from the
    stored version and record)."""
    title = version.content.title
    return [
        {
            "version_id": version.id,
            "chunk_key": c.chunk_key,
            "heading": c.heading,
            "start": c.start,
            "end": c.end,
            "text": c.text,
            "text_hash": base.text_hash(title, c.heading, c.text),
        }
        for c in chunks
    ]


def _changeset_json(cs: base.ChangeSet) -> dict[str, Any]:
    return {
        "audit": rows.audit_row(cs.audit),
        "expects": [_expect_json(e) for e in cs.expects],
        "writes": [_write_json(w) for w in cs.writes],
    }


# ---- import (private) --------------------------------------------------------------------


def _insert_json(cur: psycopg.Cursor[DictRow], table: str, items: list[dict[str, Any]]) -> None:
    """Insert new JSON rows with one statement, through the ``cairn_put_rows`` a commit
    writes with: the rows name their columns, so tables may grow columns (e.g. generated
    search columns) in later migrations."""
    if items:
        cur.execute("SELECT cairn_put_rows(%s, %s::jsonb, p_update => '{}')", (table, _json(items)))


def _index_imported(
    cur: psycopg.Cursor[DictRow], versions: list[Version], chunker: base.Chunker
) -> None:
    """Index freshly imported versions (their records are loaded already) in one round trip;
    the new chunks are numbered once the whole import is in (``_stamp_imported_chunks``)."""
    payload = [c for v in versions for c in _chunks_json(v, chunker(v.content))]
    cur.execute("SELECT cairn_index_versions(%s::jsonb)", (_json(payload),))


def _stamp_imported_chunks(conn: Conn) -> None:
    """Give every chunk the import added a seq, in id order, and count them. The store was
    empty and its memory tables are locked, so every chunk is the import's; the audit lock
    keeps the numbering in line with a commit that follows."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", AUDIT_LOCK)
    conn.execute(
        "WITH base AS (SELECT value FROM index_meta WHERE key = 'seq'), "
        "numbered AS (SELECT c.id, row_number() OVER (ORDER BY c.id) AS n FROM chunks c "
        "WHERE c.seq = 0) "
        "UPDATE chunks c SET seq = base.value + numbered.n FROM base, numbered "
        "WHERE c.id = numbered.id"
    )
    conn.execute(
        "UPDATE index_meta SET value = CASE key "
        "WHEN 'seq' THEN (SELECT coalesce(max(seq), 0) FROM chunks) "
        "ELSE (SELECT count(*) FROM chunks) END WHERE key IN ('seq', 'chunks')"
    )


def _load_batch(conn: Conn, batch: list[base.Dumped], chunker: base.Chunker | None = None) -> int:
    """Insert rows of one type as the owner; they keep their ids, seqs and timestamps."""
    with conn.cursor() as cur:
        for item in batch:
            if isinstance(item, AuditEntry) and item.seq is None:
                raise InvalidInput(f"audit entry {item.id} has no seq")
        _insert_json(cur, "records", [rows.record_row(r) for r in batch if isinstance(r, Record)])
        versions = [v for v in batch if isinstance(v, Version)]
        _insert_json(cur, "versions", [rows.version_row(v) for v in versions])
        if versions and chunker is not None:
            _index_imported(cur, versions, chunker)
        proposals = [rows.proposal_row(p) for p in batch if isinstance(p, Proposal)]
        _insert_json(cur, "proposals", proposals)
        _insert_json(
            cur,
            "audit",
            [{"seq": a.seq, **rows.audit_row(a)} for a in batch if isinstance(a, AuditEntry)],
        )
        baselines = [b for b in batch if isinstance(b, Baseline)]
        _insert_json(
            cur,
            "baselines",
            [rows.baseline_row(b) for b in baselines],
        )
        _insert_json(
            cur,
            "baseline_pins",
            [
                {"baseline_id": b.id, "record_id": rid, "version_id": vid}
                for b in baselines
                for rid, vid in sorted(b.pins.items())
            ],
        )
        _insert_json(
            cur,
            "published",
            [
                {"scope": p.scope, "baseline_id": p.baseline_id, "updated_at": _ts(p.updated_at)}
                for p in batch
                if isinstance(p, base.PublishedRow)
            ],
        )
        events = [rows.event_row(e) for e in batch if isinstance(e, Event)]
        if events:
            # the same interning as cairn_commit, and an outbox row each, in log order
            cols = ", ".join(c for c in events[0] if c not in ("scope_id", "acl_id"))
            cur.executemany(
                f"WITH added AS (INSERT INTO events ({cols}, scope_id, acl_id) "
                f"SELECT {cols}, cairn_scope_id(scope), cairn_acl_id(acl) "
                "FROM jsonb_populate_record(NULL::events, %s::jsonb) RETURNING seq) "
                "INSERT INTO event_outbox (position, event_seq) SELECT (SELECT "
                "coalesce(max(position), 0) FROM event_outbox) + 1, seq FROM added".encode(),
                [(_json(row),) for row in events],
            )
        edges = [rows.edge_row(e) for e in batch if isinstance(e, Edge)]
        if edges:
            # through the same interning as cairn_commit, so imported edges filter alike
            cur.execute("SELECT cairn_put_edges(%s::jsonb)", (_json(edges),))
        links = [rows.path_link_row(link) for link in batch if isinstance(link, PathLink)]
        _insert_json(cur, "path_links", links)
    return len(batch)
