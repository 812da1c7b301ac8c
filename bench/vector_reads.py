"""A large store's finalist vectors read in one statement, or in a few side by side.

    python bench/latency.py --records 1000000 --store DIR     # builds and keeps a store
    python bench/vector_reads.py DIR --cold --json out.json   # then this, on that store
    python bench/vector_reads.py --quick --json out.json      # a small store of its own

Past 200,000 vectors a search re-reads its finalists' float32 vectors from the store
(``Store.chunk_vectors``): a random row or two of the largest table each. Where the
operating system has paged the store out (a machine that reclaims idle page cache, a store
larger than memory), each is a wait on the disk. This times, on the same store and the same
ids, the read as one statement and as the store does it (cut into parts that run side by
side on the store's read threads), in turns (medians also by which went first: without
``--cold`` the second read of the same rows finds them in memory), and checks that both
read the same vectors.
With ``--cold`` the page cache is dropped before every timed read (Linux, as root).
Prints a table and writes JSON; never asserts.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report
from bench.index_load import _small_store

from cairn.retrieval.indexer import Indexer
from cairn.search.embedder import make_embedder
from cairn.store.sqlite import SqliteStore

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def _drop_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    DROP_CACHES.write_text("1\n")


def _timed_read(
    store: SqliteStore, model: str, ids: list[int], parts: int, cold: bool
) -> tuple[float, dict[int, bytes]]:
    store.vector_read_parts = parts
    if cold:
        _drop_page_cache()
    started = time.perf_counter()
    found = store.chunk_vectors(model, ids)
    return (time.perf_counter() - started) * 1000, found


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="cairn-vector-reads-"))
    try:
        folder = args.store or _small_store(home, args.embedder)
        store = SqliteStore(folder / "cairn.db")
        default_parts = store.vector_read_parts
        try:
            model = Indexer(store, make_embedder(args.embedder)).model  # loading is lazy
            chunks = store.chunk_count()
            probe = random.Random(7).sample(range(1, chunks + 1), min(32, chunks))
            if not store.chunk_vectors(model, probe):
                raise SystemExit(
                    f"{folder}: no {model} vectors (index the store first, or name its --embedder)"
                )
            rng = random.Random(11)
            times: dict[str, list[float]] = {"one read": [], "side by side": []}
            # by position in the round: without --cold the second read of the same rows
            # finds them in memory, the first one maybe not
            by_position: dict[str, dict[str, list[float]]] = {
                name: {"first": [], "second": []} for name in times
            }
            same = True
            for round_ in range(args.rounds):
                ids = rng.sample(range(1, chunks + 1), min(args.rows, chunks))
                # in turns, so that neither always reads a page cache the other warmed
                order = [(1, "one read"), (default_parts, "side by side")][:: 1 - 2 * (round_ % 2)]
                found = []
                for position, (parts, name) in zip(("first", "second"), order, strict=True):
                    ms, vectors = _timed_read(store, model, ids, parts, args.cold)
                    times[name].append(ms)
                    by_position[name][position].append(ms)
                    found.append(vectors)
                same = same and found[0] == found[1] and len(found[0]) > 0
        finally:
            store.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    medians = {name: statistics.median(v) for name, v in times.items()}
    return {
        "store": "built by --quick" if args.store is None else str(args.store),
        "chunks": chunks,
        "rows_per_read": min(args.rows, chunks),
        "rounds": args.rounds,
        "cold": args.cold,
        "parts": default_parts,
        "ms": {name: [round(t, 1) for t in v] for name, v in times.items()},
        "median_ms": {name: round(m, 1) for name, m in medians.items()},
        "median_ms_by_position": {
            name: {pos: round(statistics.median(v), 1) if v else None for pos, v in each.items()}
            for name, each in by_position.items()
        },
        "speedup": round(medians["one read"] / medians["side by side"], 2)
        if medians["side by side"] > 0
        else None,
        "same_vectors": same,
    }


def show(figures: dict[str, Any], console: Console) -> None:
    cache = "page cache dropped before each read" if figures["cold"] else "page cache as it is"
    table = Table(
        title=f"finalist vectors · {figures['rows_per_read']} rows of "
        f"{figures['chunks']:,} chunks · {cache}",
        title_justify="left",
    )
    for column in ("read", "median ms", "read first", "read second", "each ms"):
        table.add_column(column, justify="right")
    for name, each in figures["ms"].items():
        label = f"{name} ({figures['parts']} parts)" if name == "side by side" else name
        position = figures["median_ms_by_position"][name]
        table.add_row(label, str(figures["median_ms"][name]), str(position["first"]),
                      str(position["second"]), " ".join(map(str, each)))  # fmt: skip
    console.print(table)
    console.print(
        f"one read ÷ side by side: {figures['speedup']}x; same vectors: {figures['same_vectors']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "store", type=Path, nargs="?", help="a store folder kept by bench/latency.py --store"
    )
    parser.add_argument("--quick", action="store_true", help="a small store of its own")
    parser.add_argument(
        "--embedder", default="static", help="the embedder the store's vectors were made with"
    )
    parser.add_argument("--rows", type=int, default=150, help="vectors per read")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--cold", action="store_true", help="drop the page cache before each read (root)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.store is None and not args.quick:
        parser.error("give a store folder (bench/latency.py --store DIR builds one) or --quick")
    if args.store is not None and not (args.store / "cairn.db").is_file():
        parser.error(f"{args.store}: no cairn.db (build one with bench/latency.py --store DIR)")
    if args.cold and not DROP_CACHES.exists():
        parser.error("--cold drops the page cache through /proc/sys/vm/drop_caches (Linux)")
    if args.quick:
        args.rounds = min(args.rounds, 3)
    console = Console(width=None if sys.stdout.isatty() else 150)
    return report(run(args), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
