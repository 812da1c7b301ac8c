"""Zero bypass on PostgreSQL, enforced by the database: the serving role can read memory
tables and call ``cairn_commit``, and nothing else writes them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from psycopg import errors as pg_errors

from cairn.errors import InvalidInput, StoreError
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import AuditQuery, Content, EventDraft, EventRole, Principal
from cairn.store.pg_migrations import PG_INDEX_TABLES, PG_MEMORY_TABLES, SERVING_ROLE
from cairn.store.postgres import PostgresStore
from cairn.store.transfer import export_store, import_store
from tests.pg import PgCluster

LOGIN = "cairn_app_test"


@pytest.fixture
def db(pg_cluster: PgCluster) -> Iterator[str]:
    url = pg_cluster.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        # The serving login an operator would create: a member of cairn_serving, no more.
        conn.execute(
            f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{LOGIN}') "
            f"THEN CREATE ROLE {LOGIN} LOGIN; END IF; END $$"
        )
        conn.execute(f"GRANT {SERVING_ROLE} TO {LOGIN}")
    yield url
    pg_cluster.drop_database(url)


def _seeded(url: str, curator: Principal, *, timeline: bool = False) -> str:
    """A record; with ``timeline``, events and the timeline built from them too, so that
    every memory table has rows."""
    with Memory(PostgresStore(url), parse_policy(DEFAULT_POLICY_YAML)) as memory:
        outcome = memory.remember(
            Content(kind="fact", scope="acme/app", title="seed", body="seed"), principal=curator
        )
        assert outcome.record is not None
        if not timeline:
            return outcome.record.id
        memory.append_events(
            [
                EventDraft(
                    event_id=f"e{n}", ts=datetime(2026, 3, 2, 9, n, tzinfo=UTC),
                    session_id="s", scope="acme/app", role=EventRole.USER, kind="note",
                    text=f"Turn {n} said this.",
                )
                for n in range(4)
            ],
            principal=curator,
        )  # fmt: skip
        memory.rollup(principal=curator)
        return outcome.record.id


_ATTEMPTS = {
    "records": (
        "INSERT INTO cairn.records SELECT * FROM cairn.records",
        "UPDATE cairn.records SET status = 'archived'",
        "DELETE FROM cairn.records",
    ),
    "audit": (
        "INSERT INTO cairn.audit SELECT seq + 1000, id || 'x', at, actor, actor_roles, action, "
        "subject_id, proposal_id, rule, reason, from_status, to_status, details FROM cairn.audit",
        "UPDATE cairn.audit SET reason = 'rewritten'",
        "DELETE FROM cairn.audit",
    ),
    "edges": (
        "INSERT INTO cairn.edges (src, dst, type, created_at) VALUES ('a', 'b', 'T', now())",
        "UPDATE cairn.edges SET type = 'x'",
        "DELETE FROM cairn.edges",
    ),
}


@pytest.mark.parametrize("table", PG_MEMORY_TABLES)
def test_serving_login_cannot_write_any_memory_table(
    db: str, pg_cluster: PgCluster, curator: Principal, table: str
) -> None:
    _seeded(db, curator, timeline=True)
    statements = _ATTEMPTS.get(
        table,
        (
            f"INSERT INTO cairn.{table} SELECT * FROM cairn.{table}",
            f"UPDATE cairn.{table} SET {'scope' if table != 'edges' else 'type'} = 'x'"
            if table in ("published", "baselines", "edges")
            else f"DELETE FROM cairn.{table} WHERE false",
            f"DELETE FROM cairn.{table}",
        ),
    )
    with psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn:
        conn.execute(f"SELECT count(*) FROM cairn.{table}")  # reading is allowed
        for statement in (*statements, f"TRUNCATE cairn.{table} CASCADE"):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(statement)


def test_serving_login_commits_through_the_gate_function(
    db: str, pg_cluster: PgCluster, curator: Principal
) -> None:
    _seeded(db, curator)  # migrations ran as the superuser
    serving_url = pg_cluster.login_url(db, LOGIN)
    with Memory(PostgresStore(serving_url), parse_policy(DEFAULT_POLICY_YAML)) as memory:
        outcome = memory.remember(
            Content(kind="fact", scope="acme/app", title="via serving", body="b"),
            principal=curator,
        )
        assert outcome.record is not None
        assert memory.audit(AuditQuery(subject_id=outcome.record.id), principal=curator)


def test_serving_login_cannot_import(db: str, pg_cluster: PgCluster, curator: Principal) -> None:
    _seeded(db, curator)
    dump = io.StringIO()
    with PostgresStore(db) as source:
        export_store(source, dump)
    fresh = pg_cluster.new_database()
    try:
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute(f"GRANT {SERVING_ROLE} TO {LOGIN}")
        with PostgresStore(pg_cluster.login_url(fresh, LOGIN)) as target:
            with pytest.raises(StoreError, match="cairn_owner"):
                import_store(target, io.StringIO(dump.getvalue()))
            assert target.counts()["records"] == 0
    finally:
        pg_cluster.drop_database(fresh)


def test_a_superuser_url_still_serves_as_the_serving_role(db: str, curator: Principal) -> None:
    _seeded(db, curator)
    store = PostgresStore(db)
    try:
        # every connection of the pool, as cairn's own code gets it (code in the process
        # could RESET ROLE: a superuser URL is no boundary, docs/operations.md says so)
        with store._pool.connection() as conn:
            assert conn.execute("SELECT current_user AS u").fetchone() == {"u": SERVING_ROLE}
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("UPDATE records SET status = 'archived'")
    finally:
        store.close()


def test_commit_function_demands_an_audit_entry(
    db: str, pg_cluster: PgCluster, curator: Principal
) -> None:
    _seeded(db, curator)
    with psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn:
        with pytest.raises(pg_errors.InvalidParameterValue, match="audit"):
            conn.execute("SELECT cairn.cairn_commit(%s::jsonb)", ('[{"writes": []}]',))
        before = conn.execute("SELECT count(*) FROM cairn.audit").fetchone()
        conn.execute(
            "SELECT cairn.cairn_commit(%s::jsonb)",
            ('[{"audit": {"id": "aud_x", "at": "2025-01-01T00:00:00Z", "actor": "a", '
             '"actor_roles": [], "action": "note", "details": {}}}]',),
        )  # fmt: skip
        after = conn.execute("SELECT count(*) FROM cairn.audit").fetchone()
        assert before is not None and after is not None and after[0] == before[0] + 1


def test_a_timeline_node_cannot_take_a_records_id(
    db: str, pg_cluster: PgCluster, curator: Principal
) -> None:
    """A serving login writing a timeline node under a record's id would have taken the
    record's chunks out of search for everyone: refused, and the record stays found."""
    record_id = _seeded(db, curator)
    at = "2026-01-01T00:00:00+00:00"
    node = {"node_id": record_id, "version": 1, "level": "day", "node_key": "k",
            "partition_key": "p", "scope": "acme/app",
            "acl": {"roles": [], "labels": [], "sensitivity": "low"}, "agent": None,
            "parent_id": None, "starts_at": at, "ends_at": at, "first_ts": at, "last_ts": at,
            "event_count": 0, "body": {"title": "x"}, "digest": "d", "retired": False,
            "built_at": at}  # fmt: skip
    change = [{"audit": {"id": "aud_node", "at": at, "actor": "a", "actor_roles": [],
                         "action": "note", "details": {}},
               "writes": [{"t": "toc_node", "row": node, "chunks": []}]}]  # fmt: skip
    with (
        psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn,
        pytest.raises(pg_errors.InvalidParameterValue, match="id of a record"),
    ):
        conn.execute("SELECT cairn.cairn_commit(%s::jsonb)", (json.dumps(change),))
    with Memory(PostgresStore(db), parse_policy(DEFAULT_POLICY_YAML)) as memory:
        hits = memory.search("seed", principal=curator, mode="keyword").hits
        assert [hit.record_id for hit in hits] == [record_id]


def test_history_is_append_only_even_for_the_owner(db: str, curator: Principal) -> None:
    _seeded(db, curator, timeline=True)
    with psycopg.connect(db, autocommit=True) as conn:  # superuser
        for statement in (
            "UPDATE cairn.versions SET created_by = 'x'",
            "DELETE FROM cairn.versions",
            "TRUNCATE cairn.versions CASCADE",
            "UPDATE cairn.audit SET reason = 'x'",
            "DELETE FROM cairn.audit",
            "TRUNCATE cairn.audit",
            "UPDATE cairn.events SET text = 'x'",
            "DELETE FROM cairn.events",
            "TRUNCATE cairn.events CASCADE",
            "UPDATE cairn.toc_nodes SET node_key = 'x'",
            "DELETE FROM cairn.toc_nodes",
            "TRUNCATE cairn.toc_nodes CASCADE",
            "UPDATE cairn.grips SET event_id_end = event_id_start",
            "DELETE FROM cairn.grips",
            "TRUNCATE cairn.grips CASCADE",
        ):
            with pytest.raises(psycopg.DatabaseError, match="append-only") as info:
                conn.execute(statement)
            assert info.value.sqlstate == "CR423"


def test_other_logins_cannot_even_read(db: str, pg_cluster: PgCluster) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stranger') "
            "THEN CREATE ROLE stranger LOGIN; END IF; END $$"
        )
    with psycopg.connect(pg_cluster.login_url(db, "stranger"), autocommit=True) as conn:
        with pytest.raises(pg_errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM cairn.records")
        with pytest.raises(pg_errors.InsufficientPrivilege):
            conn.execute("SELECT cairn.cairn_commit('[]')")


# ---- the retrieval index: derived tables, written only by the two functions ---------------


@pytest.mark.parametrize("table", PG_INDEX_TABLES)
def test_serving_login_cannot_write_index_tables(
    db: str, pg_cluster: PgCluster, curator: Principal, table: str
) -> None:
    _seeded(db, curator, timeline=True)
    with psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn:
        assert conn.execute(f"SELECT count(*) FROM cairn.{table}").fetchone()  # may read
        for statement in (
            f"INSERT INTO cairn.{table} SELECT * FROM cairn.{table}",
            f"DELETE FROM cairn.{table}",
            f"TRUNCATE cairn.{table} CASCADE",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(statement)
        for helper in (
            "cairn.cairn_index_versions('[]')",
            "cairn.cairn_put_records('[]')",
            "cairn.cairn_refuse_stored('records', '[]')",
            "cairn.cairn_put_rows('versions', '[]')",
            "cairn.cairn_put_edges('[]')",
            "cairn.cairn_stamp_chunks('{1}', 1)",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(f"SELECT {helper}")


def test_serving_login_caches_vectors_through_the_function(
    db: str, pg_cluster: PgCluster, curator: Principal
) -> None:
    """put_vectors is the one index write a serving process makes: no audit entry (derived
    data), the bytes and the pgvector column hold the same vector, and HNSW can serve it."""
    _seeded(db, curator)
    model = "static-test:384"
    with PostgresStore(pg_cluster.login_url(db, LOGIN)) as store:
        audit_before = store.count_audit()
        ((digest, _),) = store.pending_vectors(model, 10)
        vector = np.linspace(-1, 1, 384, dtype=np.float32)
        store.put_vectors(model, 384, [(digest, vector.tobytes())])
        assert store.get_vectors(model, [digest]) == {digest: vector.tobytes()}
        assert store.vector_lag(model) == 0 and store.count_audit() == audit_before
        with pytest.raises(InvalidInput):
            store.put_vectors(model, 384, [(digest, vector[:10].tobytes())])
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(
            "SELECT embedding::real[] AS e, dim FROM cairn.vectors WHERE text_hash = %s",
            (digest,),
        ).fetchone()
        assert row is not None and row[1] == 384
        assert np.array_equal(np.array(row[0], dtype=np.float32), vector)
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN SELECT text_hash FROM cairn.vectors WHERE dim = 384 AND model = %s "
            "ORDER BY embedding::vector(384) <=> %s::real[]::vector(384) LIMIT 5",
            (model, vector.tolist()),
        ).fetchall()
        assert "vectors_hnsw_384" in "\n".join(str(r[0]) for r in plan)


def test_the_function_checks_its_arguments(db: str, pg_cluster: PgCluster) -> None:
    with psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn:
        with pytest.raises(pg_errors.InvalidParameterValue):
            conn.execute(
                "SELECT cairn.cairn_put_vectors('m', 2, %s::text[], %s::bytea[], %s::real[])",
                (["h"], [b"\0" * 8], [[1.0, 2.0, 3.0]]),
            )
        with pytest.raises(pg_errors.CheckViolation):  # blob and dimension disagree
            conn.execute(
                "SELECT cairn.cairn_put_vectors('m', 2, %s::text[], %s::bytea[], %s::real[])",
                (["h"], [b"\0" * 4], [[1.0, 2.0]]),
            )


def test_the_embedding_cursor_moves_only_forward_and_never_past_the_last_change(
    db: str, pg_cluster: PgCluster, curator: Principal
) -> None:
    """The serving role keeps where the scan for waiting chunks starts: never past the
    chunk changes made so far (so every later chunk is embedded), nor back."""
    _seeded(db, curator)
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute("SELECT value FROM cairn.index_meta WHERE key = 'seq'").fetchone()
    assert row is not None and row[0] > 0
    last = int(row[0])
    with psycopg.connect(pg_cluster.login_url(db, LOGIN), autocommit=True) as conn:
        for offered in (2, 10**12, 1):
            conn.execute("SELECT cairn.cairn_vectors_from('m', %s)", (offered,))
    with PostgresStore(db) as store:
        assert store.vectors_from("m") == last + 1
        assert store.vectors_from("other") == 0
