"""What a read pays to count the chunks it may see that wait for a vector during a large
import, next to what a keyword read of the same store costs in the same run.

    python bench/waiting_count.py [--records 100000] [--db postgresql://…] [--json OUT]

A read counts them in the store (``count_unembedded``), from the oldest chunk that waits on,
looking at no more than ``--scan`` chunks (the kernel's bound by default). A store of
``--records`` records, none embedded, is built through the gate; then three readers are
timed: one who may see every scope, one who may see one scope of ten, one whose ACLs admit
nothing. Each is timed on the whole backlog (more than the bound: the count is skipped, and
the read says only that many chunks wait) and on the last ``--scan`` chunks (counted). The
baseline is a keyword read (``Memory.search``, keyword mode, a query matching one record in
200) by a curator, in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, PrincipalKind, Sensitivity
from cairn.retrieval.indexer import WAITING_SCAN
from cairn.store.base import ChunkFilter, Store
from cairn.store.factory import open_store
from cairn.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._progress import bar
from bench._report import report

TEAMS = 10
TOPICS = 200
BATCH = 2_000
REPEATS = 7
WRITER = Principal(id="loader", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("acme/*",))
MODEL = "no-model"  # nothing is embedded: every chunk waits for this model's vectors


def _contents(start: int, stop: int) -> list[Content]:
    return [
        Content(
            kind="fact",
            scope=f"acme/team-{i % TEAMS}",
            title=f"note {i}",
            # one topic word of TOPICS each: the baseline's query matches one record in TOPICS
            body=f"note number {i} about kafka partitions and topic{i % TOPICS}, {i * 7}",
            acl=Acl(labels=("internal",), sensitivity=Sensitivity.LOW),
        )
        for i in range(start, stop)
    ]


def _fill(memory: Memory, records: int, console: Console) -> float:
    started = time.perf_counter()
    with bar(console) as shown:
        task = shown.add_task("writing records", total=records)
        for start in range(0, records, BATCH):
            stop = min(records, start + BATCH)
            memory.remember_many(_contents(start, stop), principal=WRITER)
            shown.update(task, completed=stop)
    return time.perf_counter() - started


def _median_ms(run: Callable[[], object]) -> tuple[float, Any]:
    times, found = [], None
    for _ in range(REPEATS):
        started = time.perf_counter()
        found = run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), found


def _readers(store: Store) -> dict[str, ChunkFilter]:
    acl_ids = frozenset(a.id for a in store.acls())
    team = frozenset(i for i, name in store.scopes().items() if name == "acme/team-3")
    active = frozenset({"active"})
    return {
        "every scope": ChunkFilter(acl_ids=acl_ids, statuses=active),
        "one scope of ten": ChunkFilter(acl_ids=acl_ids, statuses=active, scope_ids=team),
        "no ACL admits": ChunkFilter(acl_ids=frozenset({-1}), statuses=active),
    }


def measure(records: int, scan: int, db: str | None, console: Console) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cairn-waiting-") as tmp:
        folder = Path(tmp)
        store: Store = open_store(db, folder) if db else SqliteStore(folder / "cairn.db")
        memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=None)
        try:
            write_s = _fill(memory, records, console)
            top = store.index_seq()
            keyword_ms, _ = _median_ms(
                lambda: memory.search("topic17 partitions", principal=WRITER, mode="keyword")
            )
            counts = []
            for reader, where in _readers(store).items():
                for case, after in (("whole backlog", 0), ("one bound", top - scan)):
                    ms, found = _median_ms(
                        lambda w=where, a=after: store.count_unembedded(MODEL, w, a, scan)
                    )
                    counts.append({"reader": reader, "range": case, "count": found, "ms": ms})
        finally:
            memory.close()
    return {
        "backend": "postgresql" if db else "sqlite",
        "records": records,
        "scan": scan,
        "write_s": round(write_s, 1),
        "keyword_read_ms": round(keyword_ms, 2),
        "counts": [
            {**c, "ms": round(c["ms"], 2), "vs_keyword_read": round(c["ms"] / keyword_ms, 2)}
            for c in counts
        ],
    }


def _show(results: dict[str, Any], console: Console) -> None:
    backend = "PostgreSQL" if results["backend"] == "postgresql" else "SQLite"
    table = Table(
        title=f"counting waiting chunks, {backend}, {results['records']:,} records none embedded, "
        f"at most {results['scan']:,} looked at (keyword read: {results['keyword_read_ms']} ms)"
    )
    for column in ("reader", "range", "count", "median ms", "vs keyword read"):
        table.add_column(column, justify="left" if column in ("reader", "range") else "right")
    for c in results["counts"]:
        count = "skipped" if c["count"] is None else f"{c['count']:,}"
        table.add_row(c["reader"], c["range"], count, f"{c['ms']:.1f}", f"{c['vs_keyword_read']}x")
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--scan", type=int, default=WAITING_SCAN, help="the bound on a count")
    parser.add_argument("--db", default=None, help="postgresql://… (an empty database)")
    parser.add_argument("--quick", action="store_true", help="2,000 records, a bound of 500")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    records, scan = (2_000, 500) if args.quick else (args.records, args.scan)
    if scan >= records:
        parser.error("--scan must be smaller than --records")
    console = Console()
    return report(measure(records, scan, args.db, console), _show, console, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
