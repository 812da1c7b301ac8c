"""Opening a large store: the dense index built from the store against the one saved at close.

    python bench/latency.py --records 100000 --store DIR      # builds and keeps a store
    python bench/index_load.py DIR --json out.json            # then this, on that store
    python bench/index_load.py --quick --json out.json        # a small store of its own

A process's first vector search mirrors the store into its in-memory index: every stored
vector is read and, past 200,000 chunks, an HNSW graph is built (minutes at a million).
``Memory.close`` saves the index in the store folder and the next process loads it. This
times, on the same store in one run: the first sync of a memory with nothing saved (built
from the store), the save at its close, and the first sync of the next memory (loaded),
and checks that both answer the same queries alike. Prints a table and writes JSON; never
asserts.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.memory.indexing import INDEX_FOLDER
from cairn.model import Content, Principal, PrincipalKind, Sensitivity
from cairn.store.sqlite import SqliteStore

WORDS = ("database", "migration", "replica", "backup", "deploy", "rollback", "queue",
         "latency", "incident", "review", "owner", "schema", "cluster", "budget")  # fmt: skip
READER = Principal(id="bench-reader", kind=PrincipalKind.HUMAN, roles=("curator",),
                   scopes=("*",), labels=("*",), sensitivity=Sensitivity.HIGH)  # fmt: skip


def _memory(store_folder: Path, index_home: Path, embedder: str, *, quick: bool) -> Memory:
    """A memory on the kept store whose dense index is saved under ``index_home``."""
    store = SqliteStore(store_folder / "cairn.db")
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=index_home,
                    folder=index_home, embedder=embedder)  # fmt: skip
    if quick and memory.indexer is not None:
        memory.indexer.saved_from_rows = 1  # a quick store is far below the default
    return memory


def _small_store(folder: Path, embedder: str) -> Path:
    """A store of 3,000 short notes with their vectors (``--quick``)."""
    rng = random.Random(3)
    memory = Memory(SqliteStore(folder / "cairn.db"), parse_policy(DEFAULT_POLICY_YAML),
                    root=folder, embedder=embedder)  # fmt: skip
    for start in range(0, 3000, 1000):
        notes = [
            Content(kind="fact", scope=f"acme/team-{i % 5}", title=f"note {i}",
                    body=" ".join(rng.choices(WORDS, k=12)))
            for i in range(start, start + 1000)
        ]  # fmt: skip
        memory.remember_many(notes, principal=READER)
    memory.index_pending()
    memory.close()
    return folder


def _first_sync(memory: Memory) -> float:
    indexer = memory.indexer
    assert indexer is not None
    started = time.perf_counter()
    indexer.sync()
    return time.perf_counter() - started


def _answers(memory: Memory, queries: Sequence[str]) -> list[list[str]]:
    return [
        [hit.version_id for hit in memory.search(q, principal=READER, mode="vector", k=10).hits]
        for q in queries
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="cairn-index-load-"))
    try:
        rng = random.Random(7)
        queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
        if args.store is None:
            args.store = _small_store(Path(tempfile.mkdtemp(dir=home)), args.embedder)
        built = _memory(args.store, home, args.embedder, quick=args.quick)
        build_s = _first_sync(built)
        indexer = built.indexer
        assert indexer is not None
        rows = len(indexer.catalog)
        before = _answers(built, queries)
        started = time.perf_counter()
        built.close()
        save_s = time.perf_counter() - started
        saved = home / INDEX_FOLDER
        size_mb = sum(p.stat().st_size for p in saved.iterdir()) / 1e6 if saved.exists() else 0.0
        loaded = _memory(args.store, home, args.embedder, quick=args.quick)
        load_s = _first_sync(loaded)
        after = _answers(loaded, queries)
        loaded_indexer = loaded.indexer
        assert loaded_indexer is not None
        same_rows = len(loaded_indexer.catalog) == rows
        loaded._indexer = None  # keep the saved index as it is
        loaded.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {
        "store": "built by --quick" if args.quick and not args.given else str(args.store),
        "rows": rows,
        "graph": indexer.catalog.uses_ann,
        "build_s": round(build_s, 2),
        "save_s": round(save_s, 2),
        "load_s": round(load_s, 2),
        "saved_mb": round(size_mb, 1),
        "speedup": round(build_s / load_s, 1) if load_s > 0 else None,
        "same_answers": before == after and same_rows,
        "queries": len(queries),
    }


def show(figures: dict[str, Any], console: Console) -> None:
    table = Table(title=f"the dense index on opening a store · {figures['rows']:,} rows")
    for column in ("built from the store s", "saved at close s", "loaded s", "saved MB",
                   "build ÷ load", "same answers"):  # fmt: skip
        table.add_column(column, justify="right")
    table.add_row(
        str(figures["build_s"]), str(figures["save_s"]), str(figures["load_s"]),
        str(figures["saved_mb"]), f"{figures['speedup']}x", str(figures["same_answers"]),
    )  # fmt: skip
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "store", type=Path, nargs="?", help="a store folder kept by bench/latency.py --store"
    )
    parser.add_argument("--quick", action="store_true", help="a small store of its own")
    parser.add_argument(
        "--embedder", default="static", help="the embedder the store was built with"
    )
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    args.given = args.store is not None
    if args.store is None and not args.quick:
        parser.error("give a store folder (bench/latency.py --store DIR builds one) or --quick")
    if args.store is not None and not (args.store / "cairn.db").is_file():
        parser.error(f"{args.store}: no cairn.db (build one with bench/latency.py --store DIR)")
    console = Console(width=None if sys.stdout.isatty() else 150)
    return report(run(args), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
