"""What a vector cache file costs a read that embeds a new query: one vector written to a
full file, one read back, and a write followed by a count of the file (what every write used
to run: the baseline, measured in the same run).

    python bench/vector_cache.py [--entries 100000] [--writes 1000] [--dim 384] [--json OUT]

The file is filled to ``--entries`` (its bound) before anything is timed, then opened again
as a process that starts would open it; its first write, which counts the file once, is
not timed. Writes then go to the full file, each one a query's vector under a digest key, as
``embed_query`` writes them.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from cairn.search.vector_cache import DiskVectorCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report

FILL_BATCH = 5_000


def _ms_each(run: Any, times: int) -> float:
    started = time.perf_counter()
    for i in range(times):
        run(i)
    return (time.perf_counter() - started) / times * 1000


def _key(name: str) -> str:
    # the length of a real key (cairn.search.embedder.content_key: a sha256 digest)
    return hashlib.sha256(name.encode()).hexdigest()


def measure(entries: int, writes: int, dim: int) -> dict[str, Any]:
    blob = np.zeros(dim, dtype=np.float32).tobytes()
    with tempfile.TemporaryDirectory(prefix="cairn-vector-cache-") as folder:
        path = Path(folder) / "vectors.sqlite"
        filling = DiskVectorCache(path, max_items=entries)
        for start in range(0, entries, FILL_BATCH):
            stop = min(entries, start + FILL_BATCH)
            filling.update({_key(f"doc-{i}"): blob for i in range(start, stop)})
        filling.close()
        cache = DiskVectorCache(path, max_items=entries)
        cache["first"] = blob  # counts the file once, and trims it
        write_ms = _ms_each(lambda i: cache.__setitem__(_key(f"query-{i}"), blob), writes)
        keys = random.Random(1).sample(list(cache), writes)
        read_ms = _ms_each(lambda i: cache[keys[i]], writes)

        def write_and_count(i: int) -> None:
            cache[_key(f"counted-{i}")] = blob
            cache._db.execute("SELECT COUNT(*) FROM vectors").fetchone()

        counted_ms = _ms_each(write_and_count, writes)
        held = len(cache)
        cache.close()
    return {
        "entries": entries,
        "dim": dim,
        "writes": writes,
        "write_ms": round(write_ms, 3),
        "read_ms": round(read_ms, 3),
        "write_and_count_ms": round(counted_ms, 3),
        "entries_after": held,
    }


def show(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"vector cache file · {results['entries']:,} entries of {results['dim']} floats",
        title_justify="left",
    )
    columns = ("write a query vector ms", "read one ms", "write + count the file ms", "held after")
    for column in columns:
        table.add_column(column, justify="right")
    table.add_row(
        f"{results['write_ms']:.3f}",
        f"{results['read_ms']:.3f}",
        f"{results['write_and_count_ms']:.3f}",
        f"{results['entries_after']:,}",
    )
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000, help="the file's bound")
    parser.add_argument("--writes", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--quick", action="store_true", help="2,000 entries, 100 writes")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.entries, args.writes = 2_000, 100
    results = measure(args.entries, args.writes, args.dim)
    return report(results, show, Console(), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
