"""Put a store's tables back the way an older cairn left them, to test upgrades."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg

TIMELINE = ("grips", "toc_latest", "toc_nodes")


def rewind_edges_sqlite(conn: sqlite3.Connection) -> None:
    """The store as it was before edges became a domain type: edges as (src, dst, type,
    created_at), and none of what later steps add (agent tasks, the event log, chunk
    sources, the timeline)."""
    for table in ("agent_tasks", "event_outbox", "outbox_cursors", "events", *TIMELINE):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("DROP INDEX IF EXISTS chunks_source_time")
    for column in ("source_kind", "source_time"):
        conn.execute(f"ALTER TABLE chunks DROP COLUMN {column}")
    conn.execute(
        "CREATE TABLE edges_old (src TEXT NOT NULL, dst TEXT NOT NULL, type TEXT NOT NULL, "
        "created_at TEXT NOT NULL, PRIMARY KEY (src, dst, type))"
    )
    conn.execute("INSERT INTO edges_old SELECT src, dst, type, created_at FROM edges")
    conn.execute("DROP TABLE edges")
    conn.execute("ALTER TABLE edges_old RENAME TO edges")
    conn.execute("CREATE INDEX edges_dst ON edges(dst)")


def rewind_edges_postgres(conn: psycopg.Connection[Any]) -> None:
    for table in ("agent_tasks", "event_outbox", "outbox_cursors", "events", *TIMELINE):
        conn.execute(f"DROP TABLE IF EXISTS cairn.{table}")
    # before the timeline, chunks referenced the records and versions they index
    conn.execute(
        "ALTER TABLE cairn.chunks ADD CONSTRAINT chunks_record_id_fkey FOREIGN KEY (record_id) "
        "REFERENCES cairn.records (id), ADD CONSTRAINT chunks_version_id_fkey FOREIGN KEY "
        "(version_id) REFERENCES cairn.versions (id)"
    )
    conn.execute("ALTER TABLE cairn.chunks DROP COLUMN source_kind, DROP COLUMN source_time")
    conn.execute(
        'CREATE TABLE cairn.edges_old (src text COLLATE "C" NOT NULL, '
        'dst text COLLATE "C" NOT NULL, type text COLLATE "C" NOT NULL, '
        "created_at timestamptz NOT NULL, ord bigint GENERATED ALWAYS AS IDENTITY, "
        "PRIMARY KEY (src, dst, type))"
    )
    conn.execute(
        "INSERT INTO cairn.edges_old (src, dst, type, created_at) "
        "SELECT src, dst, type, created_at FROM cairn.edges"
    )
    conn.execute("DROP TABLE cairn.edges")
    conn.execute("ALTER TABLE cairn.edges_old RENAME TO edges")
    conn.execute("ALTER TABLE cairn.edges OWNER TO cairn_owner")
    conn.execute("CREATE INDEX edges_dst ON cairn.edges (dst)")


def rewind_events_by_id_sqlite(conn: sqlite3.Connection) -> None:
    """The event log as it was when an event was identified by its id alone."""
    from cairn.store.sql import schema

    conn.execute("ALTER TABLE events RENAME TO events_by_scope")
    conn.execute("DROP INDEX events_scope_time")
    conn.execute("DROP INDEX events_session_time")
    conn.execute(schema.create_table("events", schema.EVENTS, "sqlite"))
    conn.execute("INSERT INTO events SELECT * FROM events_by_scope")
    conn.execute("DROP TABLE events_by_scope")
    conn.execute("CREATE INDEX events_scope_time ON events (scope_id, ts, event_id)")
    conn.execute("CREATE INDEX events_session_time ON events (session_id, ts, event_id)")
    for op in ("UPDATE", "DELETE"):
        conn.execute(
            f"CREATE TRIGGER events_no_{op.lower()} BEFORE {op} ON events "
            "BEGIN SELECT RAISE(ABORT, 'events are append-only'); END"
        )


def rewind_events_by_id_postgres(conn: psycopg.Connection[Any]) -> None:
    conn.execute("ALTER TABLE cairn.events DROP CONSTRAINT events_scope_event")
    conn.execute("ALTER TABLE cairn.events ADD CONSTRAINT events_event_id_key UNIQUE (event_id)")
