"""Versioned schema migrations for the PostgreSQL store. Append new steps; never edit old ones.

Zero bypass is enforced by the database itself, with two roles (both ``NOLOGIN`` groups that
login roles are made members of):

``cairn_owner``
    owns the ``cairn`` schema, every table and the functions of ``pg_functions.sql``.
    Migrations and ``cairn import`` act as this role (``SET ROLE cairn_owner``).
``cairn_serving``
    what serving processes act as: ``SELECT`` on the tables, ``EXECUTE`` on ``cairn_commit``
    and ``cairn_put_vectors``, and writes to two tables that hold no memory (A2A tasks, the
    event outbox's read positions). ``cairn_commit`` is ``SECURITY DEFINER``: it runs with
    the owner's rights, applies a batch of change sets in the caller's transaction, checks
    their preconditions under row locks and writes each change set's audit entry, so a
    serving process can change memory only in audited, precondition-checked units, and a
    plain ``INSERT``/``UPDATE``/``DELETE`` on a memory table fails with
    ``insufficient_privilege``. ``cairn_put_vectors`` only adds to the embedding cache.

Versions, the audit log and events are append-only for every role's statements, the owner's
included (triggers); the owner, who owns the triggers, could disable them, so the owner login
stays out of serving processes (docs/operations.md).

A step is SQL run as ``cairn_owner`` plus optional ``admin_sql`` run first as the connecting
login (for what only a superuser may do, such as ``CREATE EXTENSION vector``). Steps hold
schema only: the functions are defined once in ``pg_functions.sql``, applied after the steps
whenever its digest differs from the one recorded in ``installed_functions``.

Steps: 1 ``kernel`` (memory tables); 2 ``retrieval`` (the derived index: chunks with a
weighted ``tsvector`` under GIN, interned ACLs and scopes, the embedding cache with a pgvector
column and per-dimension HNSW indexes); 3 ``scope_reach`` (a btree on the chunks' scope and a
per-scope chunk count kept by a trigger, so keyword search of a few small scopes keeps every
query word: ``PostgresStore.keyword_reach``); 4 ``utc_times`` (a one-time repair: validity
times stored without a time zone are given UTC's); 5 ``functions`` (the table recording which
``pg_functions.sql`` is installed); 6 ``edges`` (edges as a domain type); 7 ``agent_tasks``;
8 ``events`` (the event log and its outbox); 9 ``chunk_sources`` (each chunk's source kind
and time).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from cairn.errors import StoreError
from cairn.store.factory import redact
from cairn.store.sql import schema

__all__ = [
    "AUDIT_LOCK",
    "CONFLICT_SQLSTATE",
    "FUNCTIONS_FILE",
    "LOCK_CLASS",
    "MIGRATION_LOCK",
    "OWNER_ROLE",
    "PG_INDEX_TABLES",
    "PG_MEMORY_TABLES",
    "PG_MIGRATIONS",
    "PUBLISHED_LOCK_CLASS",
    "SCHEMA",
    "SERVING_ROLE",
    "VECTOR_SEARCH_PATH",
    "Migration",
    "MigrationResult",
    "current_version",
    "functions_current",
    "functions_digest",
    "functions_sql",
    "latest_version",
    "migrate",
]

SCHEMA = "cairn"
OWNER_ROLE = "cairn_owner"
SERVING_ROLE = "cairn_serving"

# pg_advisory_xact_lock keys (two int4 form). Advisory locks are per database.
LOCK_CLASS = 0x6361_6972  # "cair"
MIGRATION_LOCK = (LOCK_CLASS, 1)
AUDIT_LOCK = (LOCK_CLASS, 2)
PUBLISHED_LOCK_CLASS = LOCK_CLASS + 1  # second key: hashtext(scope)

# SQLSTATE raised by cairn_commit when a precondition no longer holds (mapped to Conflict).
CONFLICT_SQLSTATE = "CR409"


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str  # run as cairn_owner, inside the migration transaction
    admin_sql: str = ""  # run first as the connecting login (needs superuser for extensions)


# seq is assigned by cairn_commit under a lock held until commit, so it is gapless and in
# commit order: a reader tailing the log by seq never misses an entry committed later.
# The pgvector extension may live in any schema (a superuser installed it, or admin_sql did,
# in public): this resolves its types and operator classes for the statements after it.
VECTOR_SEARCH_PATH = r"""
DO $do$
DECLARE
    ext_schema text;
BEGIN
    SELECT n.nspname INTO ext_schema
        FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'vector';
    IF ext_schema IS NULL THEN
        RAISE EXCEPTION 'the pgvector extension is not installed (CREATE EXTENSION vector)'
            USING ERRCODE = '42704';
    END IF;
    PERFORM set_config('search_path', format('cairn, %I, public', ext_schema), true);
END
$do$;
"""


def _forbid_rewrite(
    table: str, *, rows: bool = True, truncate: bool = True, indent: str = ""
) -> str:
    """Triggers that make ``table`` append-only for every role's statements: one refusing
    to update or delete a row (``rows``), one refusing to empty it (``truncate``). Each is
    laid out at ``indent``, as the step that shipped it was: a step's SQL stays byte for
    byte what stores in the field have run."""
    triggers = []
    if rows:
        triggers.append((f"{table}_append_only BEFORE UPDATE OR DELETE ON {table}", "ROW"))
    if truncate:
        triggers.append((f"{table}_no_truncate BEFORE TRUNCATE ON {table}", "STATEMENT"))
    return "".join(
        f"{indent}CREATE TRIGGER {head}\n"
        f"{indent}    FOR EACH {each} EXECUTE FUNCTION forbid_rewrite();\n"
        for head, each in triggers
    )


_STEP_INDENT = " " * 8  # the steps written inside PG_MIGRATIONS' entries

_KERNEL = (
    schema.kernel_tables("postgres")
    + r"""
CREATE TABLE edges (
    src text COLLATE "C" NOT NULL,
    dst text COLLATE "C" NOT NULL,
    type text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    ord bigint GENERATED ALWAYS AS IDENTITY,  -- insertion order, to break created_at ties
    PRIMARY KEY (src, dst, type)
);
CREATE INDEX edges_dst ON edges (dst);

"""
    + schema.create_table("path_links", schema.PATH_LINKS, "postgres")
    + r"""
-- Append-only by construction: history can be added to, never rewritten, by anyone.
CREATE FUNCTION forbid_rewrite() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'CR423';
END
$fn$;
"""
    + _forbid_rewrite("versions")
    + _forbid_rewrite("audit")
    + r"""
GRANT USAGE ON SCHEMA cairn TO cairn_serving;
GRANT SELECT ON ALL TABLES IN SCHEMA cairn TO cairn_serving;
-- Tables added by later steps are readable by the serving role without another GRANT;
-- functions are not executable by PUBLIC unless a step grants it explicitly.
ALTER DEFAULT PRIVILEGES FOR ROLE cairn_owner IN SCHEMA cairn
    GRANT SELECT ON TABLES TO cairn_serving;
ALTER DEFAULT PRIVILEGES FOR ROLE cairn_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
"""
)

_RETRIEVAL = (
    VECTOR_SEARCH_PATH
    + r"""

-- Retrieval indexes. Chunks are derived from versions (never edited, never deleted); their
-- filter columns (status, head, superseded) follow the record's state so that permission
-- and lifecycle trimming happen inside the index, before ranking. Only cairn_commit (and
-- import, as the owner) writes them; the serving role reads them.
CREATE TABLE acls (
    id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    roles jsonb NOT NULL,
    labels jsonb NOT NULL,
    sensitivity smallint NOT NULL,
    UNIQUE (roles, labels, sensitivity)
);
CREATE TABLE scopes (
    id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    scope text COLLATE "C" NOT NULL UNIQUE
);
-- 'seq': the last chunk change number; 'chunks': how many chunks exist (chunk_count).
CREATE TABLE index_meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO index_meta (key, value) VALUES ('seq', 0), ('chunks', 0);

"""
    + schema.create_table("chunks", schema.PG_CHUNKS, "postgres")
    + r"""-- The keyword index: each chunk's words, weighted title 'A', heading 'B', text 'C';
-- 'english' stems and drops stopwords. (SQLite keeps its keyword index in an FTS5 table.)
ALTER TABLE chunks ADD COLUMN tsv tsvector NOT NULL;
CREATE INDEX chunks_record ON chunks (record_id);
CREATE INDEX chunks_seq ON chunks (seq);
CREATE INDEX chunks_text_hash ON chunks (text_hash);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);

-- The embedding cache, keyed by content hash: "vector" (float32 little-endian bytes) is what
-- the kernel's in-memory catalog loads; "embedding" is the same vector as a pgvector value
-- for server-side search. Models differ in dimension, so the column is untyped and each
-- common dimension has its own partial HNSW index over a typed cast; a query uses one with
--   WHERE dim = 384 AND model = $1 ORDER BY embedding::vector(384) <=> $2 LIMIT k
CREATE TABLE vectors (
    text_hash text COLLATE "C" NOT NULL,
    model text COLLATE "C" NOT NULL,
    dim integer NOT NULL CHECK (dim > 0),
    vector bytea NOT NULL CHECK (octet_length(vector) = 4 * dim),
    embedding vector NOT NULL CHECK (vector_dims(embedding) = dim),
    PRIMARY KEY (text_hash, model)
);
CREATE INDEX vectors_hnsw_384 ON vectors USING hnsw ((embedding::vector(384)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 384;
CREATE INDEX vectors_hnsw_768 ON vectors USING hnsw ((embedding::vector(768)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 768;
CREATE INDEX vectors_hnsw_1536 ON vectors
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops)
    WITH (m = 16, ef_construction = 64) WHERE dim = 1536;

"""
)

# Keyword search confined to the reader's scopes: a btree on the scope lets the planner
# intersect (BitmapAnd) or replace the GIN match with the scope's rows, so a small scope's
# search costs what the scope holds whatever its words' frequency in the store; and a kept
# count per scope tells keyword recall how small the scope is (PostgresStore.keyword_reach)
# without counting rows at read time. A statement trigger keeps the count, so every way
# chunks are written (cairn_commit, import as the owner) keeps it in the same transaction.
_SCOPE_REACH = r"""
CREATE INDEX chunks_scope ON chunks (scope_id);

CREATE TABLE scope_chunks (
    scope_id integer PRIMARY KEY REFERENCES scopes (id),
    chunks bigint NOT NULL
);
INSERT INTO scope_chunks (scope_id, chunks)
SELECT scope_id, count(*) FROM chunks GROUP BY scope_id;

CREATE FUNCTION cairn_count_scope_chunks() RETURNS trigger
LANGUAGE plpgsql
SET search_path = cairn, pg_temp
AS $fn$
BEGIN
    INSERT INTO scope_chunks AS s (scope_id, chunks)
    SELECT scope_id, count(*) FROM new_chunks GROUP BY scope_id
    ON CONFLICT (scope_id) DO UPDATE SET chunks = s.chunks + excluded.chunks;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION cairn_count_scope_chunks() FROM PUBLIC;
CREATE TRIGGER chunks_count_scopes AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION cairn_count_scope_chunks();
"""


def _utc_repair(table: str, column: str, paths: tuple[tuple[str, ...], ...]) -> str:
    """UPDATEs that add a UTC zone to date-times stored without one at the JSON ``paths``
    of ``table.column`` (cairn accepted such times before it required a zone)."""
    statements = []
    for path in paths:
        at = "{" + ",".join(path) + "}"
        statements.append(
            f"UPDATE {table} SET {column} = jsonb_set({column}, '{at}', "
            f"to_jsonb(({column} #>> '{at}') || 'Z')) "
            f"WHERE {column} #>> '{at}' ~ '^\\d{{4}}-\\d{{2}}-\\d{{2}}[T ][0-9:.]+$';"
        )
    return "\n".join(statements)


_TIMES = (("valid_from",), ("valid_to",))

# A one-time repair. Validity times given without a time zone were accepted once and broke
# later reads; they are read as UTC, the rule the index's timestamptz casts applied to them
# (the server's time zone is UTC by default). The repair rewrites how those versions spell
# the same instants, nothing else, so the append-only trigger steps aside for it.
_UTC_TIMES = (
    "ALTER TABLE versions DISABLE TRIGGER versions_append_only;\n"
    + _utc_repair("versions", "content", _TIMES)
    + "\n"
    + _utc_repair(
        "proposals",
        "change",
        tuple((part, *path) for part in ("content", "patch") for path in _TIMES),
    )
    + "\nALTER TABLE versions ENABLE TRIGGER versions_append_only;\n"
)

# Edges become a domain type: an id, a scope and an ACL (interned like a chunk's, so a walk
# filters edges as the index filters chunks), metadata, validity, who made it and how it
# ended. The kernel's older bookkeeping links move over as system edges, read under the ACL
# of the record they concern (or by curators only, for a publish).
_EDGES = (
    r"""
ALTER TABLE edges RENAME TO edges_legacy;
DROP INDEX edges_dst;
"""
    + schema.create_table("edges", schema.EDGES, "postgres")
    + r"""
CREATE INDEX edges_src ON edges (src, type);
CREATE INDEX edges_dst ON edges (dst, type);
INSERT INTO edges (id, type, src, dst, scope, scope_id, acl, acl_id, origin, created_at,
                   created_by)
SELECT 'edg_' || upper(substr(md5(g.src || '|' || g.dst || '|' || g.type), 1, 26)),
       g.type, g.src, g.dst, coalesce(r.scope, p.scope, v.content ->> 'scope', ''),
       h.scope_id,
       coalesce(v.content -> 'acl', '{"labels": [], "roles": ["curator"], "sensitivity": "high"}'),
       h.acl_id, 'system', g.created_at, 'system'
FROM edges_legacy g
LEFT JOIN proposals p ON p.id = g.src
LEFT JOIN records r ON r.id = (CASE WHEN g.type = 'SUPERSEDES' THEN g.src ELSE p.record_id END)
LEFT JOIN versions v ON v.id = (CASE WHEN g.type = 'ACCEPTED_AS' THEN g.dst
                                     ELSE r.current_version_id END)
LEFT JOIN LATERAL (SELECT c.scope_id, c.acl_id FROM chunks c WHERE c.version_id = v.id LIMIT 1) h
    ON true;
DROP TABLE edges_legacy;
"""
)

PG_MIGRATIONS: tuple[Migration, ...] = (
    Migration("kernel", _KERNEL),
    # pgvector is not a trusted extension: creating it needs a superuser (or a DBA did it).
    Migration(
        "retrieval", _RETRIEVAL, admin_sql="CREATE EXTENSION IF NOT EXISTS vector SCHEMA public"
    ),
    Migration("scope_reach", _SCOPE_REACH),
    Migration("utc_times", _UTC_TIMES),
    # The digest of pg_functions.sql as last applied: migrate re-applies the file when it
    # differs, so a new cairn brings its functions even without a schema change.
    Migration(
        "functions", "CREATE TABLE IF NOT EXISTS installed_functions (digest text NOT NULL);"
    ),
    Migration("edges", _EDGES),
    # Agent-protocol (A2A) tasks in the store, so that every server on this database answers
    # for the same tasks. Door state, not memory: the serving role writes it directly.
    Migration(
        "agent_tasks",
        schema.create_table("agent_tasks", schema.AGENT_TASKS, "postgres")
        + """
        CREATE INDEX agent_tasks_owner ON agent_tasks (owner, updated_at);
        GRANT INSERT, UPDATE, DELETE ON agent_tasks TO cairn_serving;
        """,
    ),
    # The event log: append-only events (written only by cairn_commit) with an outbox that
    # indexers follow; their cursors are bookkeeping the serving role keeps itself.
    Migration(
        "events",
        schema.EVENT_LOG.sql("postgres")
        + "\n"
        + _forbid_rewrite("events", indent=_STEP_INDENT)
        + """\
        GRANT INSERT, UPDATE ON outbox_cursors TO cairn_serving;
        """,
    ),
    # Each chunk says what its text comes from and when that happened at the source, so a
    # search can be limited to a time range (a record's: its validity start, else when it
    # was written).
    Migration(
        "chunk_sources",
        """
        ALTER TABLE chunks ADD COLUMN source_kind text NOT NULL DEFAULT 'record',
            ADD COLUMN source_time timestamptz;
        UPDATE chunks SET source_time = coalesce(valid_from, created_at);
        CREATE INDEX chunks_source_time ON chunks (source_time);
        """,
    ),
    # The timeline: versioned nodes of the time hierarchy over events, and their grips,
    # written only by cairn_commit.
    Migration(
        "timeline",
        schema.TIMELINE.sql("postgres")
        + "\n"
        + _forbid_rewrite("toc_nodes", truncate=False, indent=_STEP_INDENT)
        + """\
        -- The index also holds timeline nodes' chunks, whose record_id and version_id name a
        -- node and its version (as on SQLite, where chunks never referenced records).
        ALTER TABLE chunks DROP CONSTRAINT IF EXISTS chunks_record_id_fkey,
            DROP CONSTRAINT IF EXISTS chunks_version_id_fkey;
        """,
    ),
    # A grip says which events a bullet quotes: written once, never changed; and neither
    # grips nor node versions may be emptied wholesale, as events and versions may not.
    Migration(
        "timeline_append_only",
        "\n"
        + _forbid_rewrite("grips", indent=_STEP_INDENT)
        + _forbid_rewrite("toc_nodes", rows=False, indent=_STEP_INDENT)
        + _STEP_INDENT,
    ),
    # An event is identified by its scope and id, no longer by its id alone (an id taken in
    # a scope its producer could not read refused its event, and so told it existed).
    Migration(
        "events_by_scope",
        """
        ALTER TABLE events DROP CONSTRAINT events_event_id_key;
        ALTER TABLE events ADD CONSTRAINT events_scope_event UNIQUE (scope_id, event_id);
        """,
    ),
    # Decisions and events are found by their graph key (cairn why KEY) with one probe.
    Migration(
        "graph_key",
        "CREATE INDEX IF NOT EXISTS versions_graph_key "
        "ON versions ((content -> 'metadata' ->> 'graph_id'));",
    ),
    # No index on a chunk's text hash: only the count of texts waiting for a vector read it,
    # and that count now starts at the embedding cursor the store keeps (cairn_vectors_from).
    # A database that has vectors gets each model's cursor here, once (see SQLite's step 13).
    Migration(
        "no_text_hash_index",
        schema.keep_vectors_from("postgres")
        + """
        DROP INDEX IF EXISTS chunks_text_hash;
        """,
    ),
)

FUNCTIONS_FILE = Path(__file__).with_name("pg_functions.sql")


def functions_sql() -> str:
    """The functions file, after resolving pgvector's schema for its bodies."""
    return VECTOR_SEARCH_PATH + FUNCTIONS_FILE.read_text(encoding="utf-8")


def functions_digest() -> str:
    return hashlib.sha256(functions_sql().encode()).hexdigest()


def functions_current(conn: psycopg.Connection[Any]) -> bool:
    """Whether the database runs this cairn's functions (false before they were installed)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.installed_functions",))
        exists = cur.fetchone()
        if not exists or not exists[0]:
            return False
        cur.execute(f"SELECT digest FROM {SCHEMA}.installed_functions")
        found = cur.fetchone()
        return found is not None and found[0] == functions_digest()


# Tables holding memory: the serving role has SELECT only (tests/store/test_pg_bypass.py).
PG_MEMORY_TABLES = schema.MEMORY_TABLES

# Retrieval index tables, derived from memory: written only by cairn_commit (chunks, with the
# versions they index) and cairn_put_vectors (the vector cache); SELECT only for serving.
PG_INDEX_TABLES: tuple[str, ...] = ("acls", "scopes", "index_meta", "chunks", "vectors")

_BOOTSTRAP_ROLES = f"""
DO $do$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
        CREATE ROLE {OWNER_ROLE} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{SERVING_ROLE}') THEN
        CREATE ROLE {SERVING_ROLE} NOLOGIN;
    END IF;
END
$do$
"""


@dataclass(frozen=True)
class MigrationResult:
    before: int
    after: int
    latest: int

    @property
    def applied(self) -> int:
        return self.after - self.before


def latest_version() -> int:
    return len(PG_MIGRATIONS)


def current_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version of the database ``conn`` points at (0: never migrated)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_migrations",))
        exists = cur.fetchone()
        if not exists or not exists[0]:
            return 0
        cur.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_migrations")
        found = cur.fetchone()
        return int(found[0]) if found else 0


def _bootstrap(conn: psycopg.Connection[Any]) -> None:
    """Roles, schema and the migrations table; each created only when missing, so a login
    without CREATEROLE can migrate once a DBA has created the roles (docs/operations.md)."""
    for attempt in range(3):
        try:
            with conn.transaction():
                conn.execute(_BOOTSTRAP_ROLES)
            break
        except (pg_errors.UniqueViolation, pg_errors.DuplicateObject):
            # Another process created the roles between our check and CREATE ROLE.
            if attempt == 2:
                raise
    with conn.transaction():
        row = conn.execute(
            "SELECT rolsuper OR pg_has_role(current_user, %s, 'MEMBER') "
            "FROM pg_roles WHERE rolname = current_user",
            (OWNER_ROLE,),
        ).fetchone()
        if not row or not row[0]:
            conn.execute(f"GRANT {OWNER_ROLE} TO current_user")
    with conn.transaction():
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION {OWNER_ROLE}")
        conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_migrations ("
            "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
        )
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {SERVING_ROLE}")
        conn.execute(f"GRANT SELECT ON {SCHEMA}.schema_migrations TO {SERVING_ROLE}")


def _install_functions(conn: psycopg.Connection[Any]) -> None:
    """Apply pg_functions.sql as the owner and record its digest (same transaction)."""
    conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
    conn.execute(f"SET LOCAL search_path = {SCHEMA}, public")
    conn.execute(functions_sql().encode())
    conn.execute(f"DELETE FROM {SCHEMA}.installed_functions")
    conn.execute(
        f"INSERT INTO {SCHEMA}.installed_functions (digest) VALUES (%s)", (functions_digest(),)
    )
    conn.execute("RESET ROLE")


def migrate(url: str, *, target: int | None = None) -> MigrationResult:
    """Bring the database at ``url`` to ``target`` (default: the latest version).

    ``url`` must log in as a superuser or as a member of ``cairn_owner`` (the first run also
    needs CREATEROLE, unless the roles exist). Safe to run from many processes at once: an
    advisory lock serialises them and the later ones find nothing to do.
    """
    goal = latest_version() if target is None else target
    if not 0 <= goal <= latest_version():
        raise StoreError(f"no schema version {goal}; this cairn knows 0..{latest_version()}")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            _bootstrap(conn)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", MIGRATION_LOCK)
                before = current_version(conn)
                if before > latest_version():
                    raise StoreError(
                        f"database schema version {before} is newer than this cairn "
                        f"({latest_version()}): upgrade cairn"
                    )
                for number in range(before + 1, goal + 1):
                    step = PG_MIGRATIONS[number - 1]
                    if step.admin_sql:
                        conn.execute(step.admin_sql.encode())
                    conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}")
                    conn.execute(f"SET LOCAL search_path = {SCHEMA}, public")
                    conn.execute(step.sql.encode())
                    conn.execute(
                        f"INSERT INTO {SCHEMA}.schema_migrations (version, name, applied_at) "
                        "VALUES (%s, %s, %s)",
                        (number, step.name, datetime.now(UTC)),
                    )
                    conn.execute("RESET ROLE")
                after = max(before, goal)
                if after == latest_version() and not functions_current(conn):
                    _install_functions(conn)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"cannot migrate the cairn schema as this login: {exc.diag.message_primary}. "
            f"Run 'cairn migrate' with a superuser or a member of {OWNER_ROLE} "
            "(see docs/operations.md)"
        ) from exc
    # (a driver's message may quote the address, password included: redacted)
    except psycopg.OperationalError as exc:
        raise StoreError(f"cannot connect to PostgreSQL to migrate: {redact(str(exc))}") from None
    except psycopg.Error as exc:  # e.g. pgvector missing from the server (UndefinedFile)
        said = redact(exc.diag.message_primary or str(exc))
        raise StoreError(f"migrating the cairn schema failed: {said}") from None
    return MigrationResult(before=before, after=after, latest=latest_version())
