"""A read never waits behind a write: while a commit of the same store is stuck waiting for
the database's write lock (held by another connection), reads of that store still answer.

With one connection per store behind a process lock, the waiting commit held the lock and
every read queued behind it (about 2 s per write under load); readers now have connections
of their own (SQLite: WAL readers; PostgreSQL: a pool)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.store.base import Store
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from tests.conftest import content
from tests.factories import CURATOR
from tests.pg import PgCluster

WAIT_S = 20.0


@contextmanager
def _sqlite_lock_held(path: Path) -> Iterator[None]:
    other = sqlite3.connect(path, isolation_level=None, timeout=1)
    other.execute("BEGIN IMMEDIATE")  # the database's one write lock, taken elsewhere
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@contextmanager
def _postgres_lock_held(url: str) -> Iterator[None]:
    other = psycopg.connect(url)
    other.execute("LOCK TABLE cairn.records IN EXCLUSIVE MODE")  # writers wait, readers not
    try:
        yield
    finally:
        other.rollback()
        other.close()


def _reads_while_a_commit_waits(store: Store, hold: Callable[[], object]) -> None:
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), embedder=None)
    first = memory.remember(content("Before the lock"), principal=CURATOR).record
    assert first is not None
    with hold():  # type: ignore[attr-defined]
        writing = threading.Thread(
            target=lambda: memory.remember(content("Waits for the lock"), principal=CURATOR)
        )
        writing.start()
        read: list[object] = []
        reader = threading.Thread(
            target=lambda: read.extend(
                [
                    memory.get(first.id, principal=CURATOR).record.id,
                    memory.search("before lock", principal=CURATOR, mode="keyword").hits,
                ]
            )
        )
        reader.start()
        reader.join(WAIT_S)
        assert not reader.is_alive(), "a read waited behind a commit"
        assert read[0] == first.id and read[1]
        assert writing.is_alive(), "the commit should still be waiting for the lock"
    writing.join(WAIT_S)
    assert not writing.is_alive()
    assert memory.status(principal=CURATOR)["records"] == 2


def test_sqlite_reads_do_not_wait_behind_a_commit(tmp_path: Path) -> None:
    path = tmp_path / "cairn.db"
    store = SqliteStore(path)
    try:
        _reads_while_a_commit_waits(store, lambda: _sqlite_lock_held(path))
    finally:
        store.close()


@pytest.mark.usefixtures("pg_cluster")
def test_postgres_reads_do_not_wait_behind_a_commit(pg_cluster: PgCluster) -> None:
    url = pg_cluster.new_database()
    store = PostgresStore(url)
    try:
        _reads_while_a_commit_waits(store, lambda: _postgres_lock_held(url))
    finally:
        store.close()
        pg_cluster.drop_database(url)
