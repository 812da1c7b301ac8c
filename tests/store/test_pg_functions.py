"""PostgreSQL functions are defined once (pg_functions.sql) and applied idempotently; the
migrations hold only schema changes."""

from __future__ import annotations

import re

import psycopg

from cairn.store import pg_migrations
from cairn.store.pg_migrations import PG_MIGRATIONS, functions_digest, functions_sql, migrate
from cairn.store.postgres import PostgresStore
from tests.pg import PgCluster

KERNEL_FUNCTIONS = (
    "cairn_commit", "cairn_refuse_stored", "cairn_put_records",
    "cairn_put_rows", "cairn_index_versions", "cairn_put_edges",
    "cairn_stamp_chunks", "cairn_put_vectors", "cairn_vectors_from",
)  # fmt: skip


def test_each_function_is_defined_once_and_only_in_the_functions_file() -> None:
    text = functions_sql()
    for name in KERNEL_FUNCTIONS:
        assert len(re.findall(rf"CREATE OR REPLACE FUNCTION {name}\(", text)) == 1, name
        for step in PG_MIGRATIONS:
            assert f"FUNCTION {name}(" not in step.sql, (name, step.name)
    # every statement that defines something can run again
    assert "CREATE FUNCTION" not in text


def _digest(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT digest FROM cairn.installed_functions").fetchone()
    assert row is not None
    return str(row[0])


def test_functions_are_reapplied_when_they_change(pg_cluster: PgCluster) -> None:
    url = pg_cluster.new_database()
    try:
        assert _digest(url) == functions_digest()
        again = migrate(url)
        assert again.applied == 0 and _digest(url) == functions_digest()
        # A database whose functions are older than this cairn's (here: one is gone and the
        # digest is another) gets them back when a store opens it.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP FUNCTION cairn.cairn_put_vectors(text, integer, text[], bytea[], "
                         "real[])")  # fmt: skip
            conn.execute("UPDATE cairn.installed_functions SET digest = 'older'")
        with PostgresStore(url) as store:
            store.put_vectors("m", 2, [("h", b"\x00" * 8)])
            assert store.get_vectors("m", ["h"]) == {"h": b"\x00" * 8}
        assert _digest(url) == functions_digest()
    finally:
        pg_cluster.drop_database(url)


def test_the_functions_file_ships_with_the_package() -> None:
    assert pg_migrations.FUNCTIONS_FILE.is_file()
    assert pg_migrations.FUNCTIONS_FILE.parent == pg_migrations.Path(pg_migrations.__file__).parent
