"""Versioned schema migrations for the SQLite store. Append new steps; never edit old ones."""

from __future__ import annotations

from cairn.store.sql import schema

__all__ = [
    "MEMORY_TABLES",
    "SQLITE_MIGRATIONS",
]


def _utc_repair(table: str, column: str, paths: tuple[str, ...]) -> str:
    """UPDATEs that add a UTC zone to date-times stored without one at the JSON ``paths``
    of ``table.column`` (cairn accepted such times before it required a zone)."""
    statements = []
    for path in paths:
        value = f"json_extract({column}, '{path}')"
        statements.append(
            f"UPDATE {table} SET {column} = json_set({column}, '{path}', {value} || 'Z') "
            f"WHERE json_type({column}, '{path}') = 'text' "
            f"AND {value} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][T ]*' "
            f"AND NOT {value} GLOB '*[Zz+]*' AND NOT {value} GLOB '*[T ]*-*';"
        )
    return "\n".join(statements)


_TIMES = ("$.valid_from", "$.valid_to")

# A step keeps the statements it shipped with (a table spelled from ``schema``'s specs renders
# the same ones), laid out as they were: its text ends in a line break and the indent of the
# next line, as its last triple-quoted block did.
_STEP_END = "\n    "


def _refuse(table: str, refusal: str, verbs: tuple[str, ...] = ("UPDATE", "DELETE")) -> str:
    """Triggers that make ``table`` append-only: an UPDATE or DELETE (``verbs``) of one of
    its rows aborts with ``refusal``. Each starts on its own indented line."""
    return "".join(
        f"\n    CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}"
        f"\n        BEGIN SELECT RAISE(ABORT, '{refusal}'); END;"
        for verb in verbs
    )


SQLITE_MIGRATIONS: tuple[str, ...] = (
    # 1: the kernel
    schema.kernel_tables("sqlite")
    + """
    CREATE TABLE edges (
        src TEXT NOT NULL,
        dst TEXT NOT NULL,
        type TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (src, dst, type)
    );
    CREATE INDEX edges_dst ON edges(dst);

    """
    + schema.create_table("path_links", schema.PATH_LINKS, "sqlite")
    + "\n    -- Append-only by construction: history can be added to, never rewritten."
    + _refuse("versions", "versions are append-only")
    + _refuse("audit", "the audit log is append-only")
    + _STEP_END,
    # 2: retrieval indexes. Chunks are derived from versions (never edited, never deleted);
    # their filter columns (status, head, superseded) follow the record's state so that
    # permission and lifecycle trimming happen inside the index, before ranking.
    """
    CREATE TABLE acls (
        id INTEGER PRIMARY KEY,
        roles TEXT NOT NULL,
        labels TEXT NOT NULL,
        sensitivity INTEGER NOT NULL,
        UNIQUE (roles, labels, sensitivity)
    );
    CREATE TABLE scopes (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL UNIQUE
    );
    CREATE TABLE index_meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    );
    INSERT INTO index_meta (key, value) VALUES ('seq', 0);
    """
    + schema.create_table("chunks", schema.CHUNKS, "sqlite")
    + """
    CREATE INDEX chunks_record ON chunks(record_id);
    CREATE INDEX chunks_seq ON chunks(seq);
    CREATE INDEX chunks_text_hash ON chunks(text_hash);
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        title, heading, text, content='', tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
    CREATE TABLE vectors (
        text_hash TEXT NOT NULL,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        PRIMARY KEY (text_hash, model)
    );
    """,
    # 3: each chunk's scope as a token in its own FTS column, so a keyword read limited to a
    # few scopes is limited inside the index (an AND the FTS engine answers by seeking) and
    # costs what those scopes hold, not what the whole store holds (docs/retrieval.md).
    """
    DROP TABLE chunks_vocab;
    DROP TABLE chunks_fts;
    CREATE VIRTUAL TABLE chunks_fts USING fts5(
        title, heading, text, scope, content='',
        tokenize='porter unicode61 remove_diacritics 2'
    );
    CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
    INSERT INTO chunks_fts (rowid, title, heading, text, scope)
        SELECT c.id, json_extract(v.content, '$.title'), c.heading, c.text, 'zs' || c.scope_id
        FROM chunks c JOIN versions v ON v.id = c.version_id ORDER BY c.id;
    -- how many chunks each scope holds (chunks are never deleted: counts only grow), read
    -- before a keyword search to decide whether to confine it inside the index
    CREATE TABLE scope_chunks (
        scope_id INTEGER PRIMARY KEY REFERENCES scopes(id),
        chunks INTEGER NOT NULL
    );
    INSERT INTO scope_chunks (scope_id, chunks)
        SELECT scope_id, COUNT(*) FROM chunks GROUP BY scope_id;
    """,
    # 4: a one-time repair. Validity times given without a time zone were accepted once and
    # broke later reads; they are read as UTC, the rule the index already applied to them.
    # The repair rewrites how those versions spell the same instants, nothing else, so the
    # append-only trigger steps aside for it.
    "DROP TRIGGER versions_no_update;\n"
    + _utc_repair("versions", "content", _TIMES)
    + "\n"
    + _utc_repair(
        "proposals",
        "change",
        tuple(f"$.{part}{path[1:]}" for part in ("content", "patch") for path in _TIMES),
    )
    + _refuse("versions", "versions are append-only", ("UPDATE",))
    + _STEP_END,
    # 5: edges become a domain type: an id, a scope and an ACL (interned like a chunk's, so a
    # walk filters edges as the index filters chunks), metadata, validity, who made it and
    # how it ended. The kernel's older bookkeeping links move over as system edges, read
    # under the ACL of the record they concern (or by curators only, for a publish).
    """
    ALTER TABLE edges RENAME TO edges_legacy;
    DROP INDEX edges_dst;
    """
    + schema.create_table("edges", schema.EDGES, "sqlite")
    + """
    CREATE INDEX edges_src ON edges(src, type);
    CREATE INDEX edges_dst ON edges(dst, type);
    INSERT INTO edges (id, type, src, dst, scope, scope_id, acl, acl_id, origin, created_at,
                       created_by)
    SELECT 'edg_' || upper(hex(randomblob(13))), g.type, g.src, g.dst,
           coalesce(r.scope, p.scope, json_extract(v.content, '$.scope'), ''),
           (SELECT c.scope_id FROM chunks c WHERE c.version_id = v.id LIMIT 1),
           coalesce(json_extract(v.content, '$.acl'),
                    '{"labels":[],"roles":["curator"],"sensitivity":"high"}'),
           (SELECT c.acl_id FROM chunks c WHERE c.version_id = v.id LIMIT 1),
           'system', g.created_at, 'system'
    FROM edges_legacy g
    LEFT JOIN proposals p ON p.id = g.src
    LEFT JOIN records r ON r.id = (CASE WHEN g.type = 'SUPERSEDES' THEN g.src
                                        ELSE p.record_id END)
    LEFT JOIN versions v ON v.id = (CASE WHEN g.type = 'ACCEPTED_AS' THEN g.dst
                                         ELSE r.current_version_id END);
    DROP TABLE edges_legacy;
    """,
    # 6: agent-protocol (A2A) tasks move into the store from a side file, so that every
    # server on a store answers for the same tasks. Door state, not memory: no audit.
    schema.create_table("agent_tasks", schema.AGENT_TASKS, "sqlite")
    + """
    CREATE INDEX agent_tasks_owner ON agent_tasks(owner, updated_at);
    """,
    # 7: the event log: append-only events with an outbox that indexers follow.
    schema.EVENT_LOG.sql("sqlite") + _refuse("events", "events are append-only") + _STEP_END,
    # 8: each chunk says what its text comes from and when that happened at the source, so
    # a search can be limited to a time range (a record's: its validity start, else when
    # it was written).
    """
    ALTER TABLE chunks ADD COLUMN source_kind TEXT NOT NULL DEFAULT 'record';
    ALTER TABLE chunks ADD COLUMN source_time TEXT;
    UPDATE chunks SET source_time = coalesce(valid_from, created_at);
    CREATE INDEX chunks_source_time ON chunks(source_time);
    """,
    # 9: the timeline: versioned nodes of the time hierarchy over events, and their grips.
    schema.TIMELINE.sql("sqlite")
    + _refuse("toc_nodes", "timeline nodes are versioned, never changed")
    + _STEP_END,
    # 10: a grip says which events a bullet quotes; it is written once, never changed.
    _refuse("grips", "grips are append-only") + _STEP_END,
    # 11: an event is identified by its scope and id, no longer by its id alone (an id taken
    # in a scope its producer could not read refused its event, and so told it existed).
    # SQLite drops a UNIQUE constraint only with its table: the log moves to a new one.
    """
    ALTER TABLE events RENAME TO events_by_id;
    DROP INDEX events_scope_time;
    DROP INDEX events_session_time;
    """
    + schema.create_table("events", schema.EVENTS_BY_SCOPE, "sqlite")
    + """
    INSERT INTO events SELECT * FROM events_by_id;
    DROP TABLE events_by_id;
    CREATE INDEX events_scope_time ON events (scope_id, ts, event_id);
    CREATE INDEX events_session_time ON events (session_id, ts, event_id);"""
    + _refuse("events", "events are append-only")
    + _STEP_END,
    # 12: decisions and events are found by their graph key (cairn why KEY) with one probe.
    """
    CREATE INDEX IF NOT EXISTS versions_graph_key
        ON versions (json_extract(content, '$.metadata.graph_id'));
    """,
    # 13: no index on a chunk's text hash. Only the count of texts waiting for a vector read
    # it, and that count now starts where the store keeps its embedding cursor; a new key
    # scattered over the index cost every write a page of its own (nearly a quarter of a
    # batch's time at 500,000 records, docs/benchmarks.md). A store that has vectors gets
    # each model's cursor here, once: else a store with nothing left to embed would never
    # write one, and every count would read the whole table.
    schema.keep_vectors_from("sqlite")
    + """
    DROP INDEX IF EXISTS chunks_text_hash;
    """,
)

# Tables holding memory (named here too, where callers have always looked for them).
MEMORY_TABLES = schema.MEMORY_TABLES
