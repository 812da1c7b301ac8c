"""Write throughput: records one at a time and batched, events batched, against a floor.

    python bench/ingest.py --records 100000 --json out.json
    python bench/ingest.py --quick --json out.json
    python bench/ingest.py --records 100000 --db postgresql://… --json out.json

The same synthetic rows (~300 characters each) go in four ways, in one run:

- ``one at a time``: ``Memory.remember`` per record (every record its own transaction);
- ``batched``: ``Memory.store_many`` in batches (``--batch``), each one transaction audited once;
- ``events batched``: ``Memory.append_events`` in batches of the same size;
- ``floor``: a bare SQLite FTS5 insert of the same rows, one transaction, no governance.

Every cairn path goes through the gate (policy, duplicate check, permission check, audit)
on a fresh SQLite store with embedding deferred (no embedder), as a server would run it.
With ``--db`` the cairn paths run on that PostgreSQL database instead (an empty one: each
path writes under scopes of its own); the floor stays SQLite's.
The floor is what SQLite itself costs; the ratios say how much of it governance adds.
Prints a table and writes JSON; never asserts. One-at-a-time runs a tenth of the rows (at
least 200): it is the slow path and its rate does not depend on the count.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Content, EventDraft, EventRole, Principal, PrincipalKind, Sensitivity
from cairn.store.base import Store
from cairn.store.factory import open_store
from cairn.store.sqlite import SqliteStore

WRITER = Principal(
    id="bench",
    kind=PrincipalKind.HUMAN,
    roles=("curator",),
    scopes=("*",),
    labels=("*",),
    sensitivity=Sensitivity.HIGH,
)
WORDS = (
    "database",
    "migration",
    "schema",
    "index",
    "replica",
    "backup",
    "restore",
    "postgres",
    "sqlite",
    "query",
    "deploy",
    "release",
    "rollback",
    "canary",
    "cluster",
    "node",
    "queue",
    "worker",
    "latency",
    "budget",
    "incident",
    "review",
    "decision",
    "owner",
    "team",
    "service",
    "gateway",
    "token",
    "secret",
    "rotate",
    "cache",
    "eviction",
    "shard",
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rows(n: int, seed: int = 7) -> list[tuple[str, str, str]]:
    """(scope, title, body) triples, deterministic, bodies of about 300 characters."""
    rng = random.Random(seed)
    made = []
    for i in range(n):
        title = f"Note {i}: " + " ".join(rng.sample(WORDS, 4))
        body = " ".join(rng.choice(WORDS) for _ in range(42))[:290] + f" #{i}"
        made.append((f"acme/team{i % 20}", title, body))
    return made


def _memory(folder: Path, db: str | None = None) -> Memory:
    store: Store = open_store(db, folder) if db else SqliteStore(folder / "cairn.db")
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=None)


def _contents(part: Sequence[tuple[str, str, str]], path: str = "acme") -> list[Content]:
    """``path``: the first segment of the scopes (each path its own on a shared database)."""
    return [
        Content(kind="fact", scope=s.replace("acme", path, 1), title=t, body=b) for s, t, b in part
    ]


def _timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def one_at_a_time(
    folder: Path, data: Sequence[tuple[str, str, str]], db: str | None = None
) -> float:
    memory = _memory(folder, db)
    contents = _contents(data, "one")

    def run() -> None:
        for content in contents:
            memory.remember(content, principal=WRITER)

    seconds = _timed(run)
    memory.close()
    return len(data) / seconds


def batched(
    folder: Path, data: Sequence[tuple[str, str, str]], batch: int, db: str | None = None
) -> float:
    memory = _memory(folder, db)
    parts = [_contents(data[i : i + batch], "batched") for i in range(0, len(data), batch)]

    def run() -> None:
        for part in parts:
            memory.store_many(part, principal=WRITER)

    seconds = _timed(run)
    memory.close()
    return len(data) / seconds


def events_batched(
    folder: Path, data: Sequence[tuple[str, str, str]], batch: int, db: str | None = None
) -> float:
    memory = _memory(folder, db)
    drafts = [
        _event(i, scope.replace("acme", "events", 1), f"{title}. {body}")
        for i, (scope, title, body) in enumerate(data)
    ]
    parts = [drafts[i : i + batch] for i in range(0, len(drafts), batch)]

    def run() -> None:
        for part in parts:
            memory.append_events(part, principal=WRITER)

    seconds = _timed(run)
    memory.close()
    return len(data) / seconds


def _event(i: int, scope: str, text: str) -> EventDraft:
    return EventDraft(
        event_id=f"ev-{i}",
        ts=T0 + timedelta(seconds=i),
        session_id=f"s{i // 500}",
        scope=scope,
        agent="bench",
        role=EventRole.USER,
        kind="user_message",
        text=text,
    )


def fts5_floor(folder: Path, data: Sequence[tuple[str, str, str]]) -> float:
    """A bare SQLite FTS5 insert of the same rows (a table, its full-text index, one
    transaction, the durability cairn uses): what the storage engine itself costs."""
    conn = sqlite3.connect(folder / "floor.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, scope TEXT, title TEXT, body TEXT)")
    conn.execute(
        "CREATE VIRTUAL TABLE notes_fts USING fts5(title, body, content='', "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )

    def run() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO notes (scope, title, body) VALUES (?, ?, ?)", data)
        conn.execute("INSERT INTO notes_fts (rowid, title, body) SELECT id, title, body FROM notes")
        conn.execute("COMMIT")

    seconds = _timed(run)
    conn.close()
    return len(data) / seconds


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument(
        "--quick", action="store_true", help="2,000 rows, each path its best of three: a smoke run"
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--db", default=None, help="postgresql://… (an empty database)")
    args = parser.parse_args(argv)
    n = 2_000 if args.quick else args.records
    data = rows(n)
    single_n = max(200, n // 10)
    # A smoke run takes a fraction of a second a path, where one stall of a busy machine
    # would decide the ratio: each path runs three times, on a fresh store each, and keeps
    # its best. (A full run is long enough to average its stalls out.)
    runs = 3 if args.quick else 1
    with tempfile.TemporaryDirectory(prefix="cairn-ingest-") as tmp:
        root = Path(tmp)

        def best(name: str, path: Callable[[Path], float]) -> float:
            rates = []
            for run in range(runs):
                (root / f"{name}{run}").mkdir()
                rates.append(path(root / f"{name}{run}"))
            return max(rates)

        if args.db is not None and runs > 1:
            parser.error("--quick runs each path three times: give it an empty SQLite, not --db")
        floor = best("floor", lambda folder: fts5_floor(folder, data))
        figures: dict[str, Any] = {
            "backend": "postgresql" if args.db else "sqlite",
            "records": n,
            "batch": args.batch,
            "runs_each": runs,
            "one_at_a_time_records": single_n,
            "one_at_a_time_per_s": best(
                "one", lambda folder: one_at_a_time(folder, data[:single_n], args.db)
            ),
            "batched_per_s": best(
                "batched", lambda folder: batched(folder, data, args.batch, args.db)
            ),
            "events_batched_per_s": best(
                "events", lambda folder: events_batched(folder, data, args.batch, args.db)
            ),
            "fts5_floor_per_s": floor,
        }
    figures["batched_vs_floor"] = figures["batched_per_s"] / floor
    figures["events_vs_floor"] = figures["events_batched_per_s"] / floor
    figures["batched_vs_one_at_a_time"] = figures["batched_per_s"] / figures["one_at_a_time_per_s"]
    _print(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return figures


def _print(figures: dict[str, Any]) -> None:
    backend = "PostgreSQL" if figures["backend"] == "postgresql" else "SQLite"
    table = Table(title=f"ingest, {backend}, {figures['records']:,} rows of ~300 characters")
    for column in ("path", "rows/s", "vs FTS5 floor"):
        table.add_column(column, justify="right" if column != "path" else "left")
    floor = figures["fts5_floor_per_s"]
    lines = (
        (f"records one at a time ({figures['one_at_a_time_records']:,})",
         figures["one_at_a_time_per_s"]),
        (f"records batched ({figures['batch']:,} a batch)", figures["batched_per_s"]),
        (f"events batched ({figures['batch']:,} a batch)", figures["events_batched_per_s"]),
        ("bare SQLite FTS5 insert (floor)", floor),
    )  # fmt: skip
    for name, rate in lines:
        table.add_row(name, f"{rate:,.0f}", f"{rate / floor:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
