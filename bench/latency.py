"""Latency and ingest benchmark on a synthetic corpus.

    python bench/latency.py --records 100000 [--embedder static] [--db postgresql://...]
    python bench/latency.py --quick --json out.json
    python bench/latency.py --records 1000000 --store DIR   # build once, reuse afterwards

Builds a realistic corpus (kinds, scopes and ACLs varied), ingests it through the gate in
batches, builds the dense index, then times keyword, vector and hybrid reads by a principal
whose permissions trim the corpus, and hybrid reads confined to one of its scopes. Prints
tables; never asserts. Peak RSS is this process's.

``--store DIR`` keeps the ingested store (and its stored vectors) in DIR: the first run builds
it, later runs with the same corpus options skip ingest, open it, build the in-memory index
from it and time the reads (ingest figures then come from the run that built it, and
``store_reused`` says so). At 1M that saves the ingest, about half of the run; the dense
index is rebuilt from the stored vectors every time. Without ``--store`` the throwaway store
is deleted at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Principal, PrincipalKind, Sensitivity
from cairn.retrieval.types import Mode
from cairn.search.catalog import VectorCatalog
from cairn.store.base import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._report import report

KINDS = ("decision", "belief", "episode", "skill", "fact", "document")
LABELS = (("public",), ("internal",), ("internal",), ("confidential",))
SENSITIVITY = (Sensitivity.LOW, Sensitivity.LOW, Sensitivity.MEDIUM, Sensitivity.HIGH)
TOPICS = [
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
    "plan",
    "vacuum",
    "deploy",
    "release",
    "rollback",
    "canary",
    "pipeline",
    "build",
    "cache",
    "artifact",
    "docker",
    "kubernetes",
    "helm",
    "test",
    "suite",
    "fixture",
    "flaky",
    "coverage",
    "lint",
    "mypy",
    "ruff",
    "pytest",
    "benchmark",
    "latency",
    "throughput",
    "auth",
    "token",
    "session",
    "oauth",
    "key",
    "rotation",
    "secret",
    "vault",
    "permission",
    "role",
    "policy",
    "audit",
    "api",
    "endpoint",
    "route",
    "schema",
    "openapi",
    "client",
    "retry",
    "timeout",
    "backoff",
    "queue",
    "worker",
    "cron",
    "frontend",
    "react",
    "component",
    "render",
    "state",
    "hook",
    "css",
    "layout",
    "accessibility",
    "bundle",
    "webpack",
    "incident",
    "outage",
    "alert",
    "pager",
    "runbook",
    "postmortem",
    "oncall",
    "escalation",
    "dashboard",
    "metric",
    "log",
]
FILLER = [
    "the",
    "team",
    "agreed",
    "that",
    "we",
    "should",
    "always",
    "prefer",
    "to",
    "keep",
    "this",
    "simple",
    "and",
    "documented",
    "so",
    "anyone",
    "can",
    "follow",
    "it",
    "later",
    "when",
    "they",
    "work",
    "on",
    "it",
    "again",
    "with",
    "care",
]


def vocabulary(size: int, seed: int) -> tuple[list[str], list[float]]:
    """Topic words plus pronounceable made-up words, with Zipf frequencies (rank^-1.07),
    the way word use is distributed in real text: a few words everywhere, most rare."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words = list(dict.fromkeys(FILLER + TOPICS))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randrange(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    cumulative: list[float] = []
    total = 0.0
    for rank in range(1, len(words) + 1):
        total += rank**-1.07
        cumulative.append(total)
    return words, cumulative


VOCABULARY = vocabulary(30_000, 1)


def _text(rng: random.Random, words: int) -> str:
    vocab, cumulative = VOCABULARY
    return " ".join(rng.choices(vocab, cum_weights=cumulative, k=words))


def corpus(n: int, seed: int) -> Iterator[Content]:
    """Generated lazily: a million Content objects held at once cost ~1.5 GB of this
    process's peak RSS, which is the benchmark's, not the kernel's."""
    rng = random.Random(seed)
    for i in range(n):
        k = rng.randrange(len(LABELS))
        yield Content(
            kind=KINDS[i % len(KINDS)],
            scope=f"acme/team-{rng.randrange(20)}",
            title=f"{_text(rng, 5)} #{i}",
            body=_text(rng, rng.randrange(20, 80)) + ".",
            acl=Acl(labels=LABELS[k], sensitivity=SENSITIVITY[k]),
            metadata={"n": i},
        )


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "p50_ms": round(pick(0.50), 2),
        "p95_ms": round(pick(0.95), 2),
        "p99_ms": round(pick(0.99), 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _uses_ann(memory: Memory) -> bool:
    indexer = memory.indexer
    return indexer is not None and indexer.catalog.uses_ann


def _graph_dims(memory: Memory) -> int | None:
    indexer = memory.indexer
    return indexer.catalog.graph_dims if indexer is not None else None


def _ann_build_s(memory: Memory) -> float:
    """The part of the index build spent on the HNSW graph (the rest is embedding)."""
    indexer = memory.indexer
    return indexer.catalog.ann_build_seconds if indexer is not None else 0.0


def _open_store(db: str | None, folder: Path) -> Store:
    if db:
        from cairn.store.factory import open_store

        return open_store(db, folder)
    from cairn.store.sqlite import SqliteStore

    return SqliteStore(folder / "cairn.db", synchronous="NORMAL")


MANIFEST = "bench-manifest.json"


def _corpus_key(args: argparse.Namespace) -> dict[str, Any]:
    """What must match for a kept store to stand in for a fresh ingest."""
    return {"records": args.records, "seed": args.seed, "batch": args.batch,
            "embedder": args.embedder}  # fmt: skip


def _kept_store(args: argparse.Namespace) -> tuple[Path, dict[str, Any] | None]:
    """The folder to build in, and the manifest of a complete kept store there (or None).

    A folder without a manifest (an interrupted build) or built for other options is
    emptied and built again."""
    if args.store is None:
        return Path(tempfile.mkdtemp(prefix="cairn-bench-")), None
    folder = Path(args.store)
    manifest = folder / MANIFEST
    if manifest.exists():
        kept: dict[str, Any] = json.loads(manifest.read_text())
        if kept.get("corpus") == _corpus_key(args):
            return folder, kept
    if folder.exists() and any(folder.iterdir()):
        if not (folder / "cairn.db").exists():
            raise SystemExit(f"--store {folder}: not empty and not a kept store; refusing to clear")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder, None


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    folder, kept = _kept_store(args)
    try:
        return _measure(args, console, folder, kept)
    finally:
        if args.store is None:
            # a throwaway store is ~6 GB at 1M records
            shutil.rmtree(folder, ignore_errors=True)


# (name, mode, scope): the reader's reads over all ten teams it may see, then hybrid reads
# confined to one team (a twentieth of the store), which keyword search restricts inside
# the FTS index.
READS: tuple[tuple[str, Mode, str | None], ...] = (
    ("keyword", "keyword", None),
    ("vector", "vector", None),
    ("hybrid", "hybrid", None),
    ("hybrid_one_scope", "hybrid", "acme/team-3"),
)


def _measure(
    args: argparse.Namespace, console: Console, folder: Path, kept: dict[str, Any] | None
) -> dict[str, Any]:
    curator = Principal(id="bench-curator", kind=PrincipalKind.HUMAN, roles=("curator",),
                        scopes=("*",), labels=("*",), sensitivity=Sensitivity.HIGH)  # fmt: skip
    reader = Principal(id="bench-agent", kind=PrincipalKind.AGENT, roles=("agent",),
                       scopes=tuple(f"acme/team-{i}" for i in range(10)),
                       labels=("public", "internal"), sensitivity=Sensitivity.MEDIUM)  # fmt: skip
    store = _open_store(args.db, folder)
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=args.embedder)
    if args.ann_threshold != "default" or args.ann_dims != "default":
        # The indexer builds its catalog with the kernel's defaults; swap in one with the
        # requested threshold and graph dimensions while it is still empty.
        indexer = memory.indexer
        if indexer is not None:
            options: dict[str, Any] = {"vectors_of": indexer.stored_vectors}
            if args.ann_threshold != "default":
                never = args.ann_threshold == "never"
                options["ann_threshold"] = None if never else int(args.ann_threshold)
            if args.ann_dims != "default":
                options["ann_dims"] = None if args.ann_dims == "full" else int(args.ann_dims)
            indexer.catalog = VectorCatalog(indexer.embedder.dim, **options)
    items = corpus(args.records, args.seed)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=True)  # fmt: skip
    overlap = args.overlap and kept is None
    with progress:
        began = time.perf_counter()
        worker = None
        if overlap:
            # As a server runs: its background worker embeds what each batch wrote while
            # the next batches are written.
            worker = memory.start_indexing()
        made_s = 0.0
        if kept is None:
            task = progress.add_task("ingest", total=args.records)
            # Only the writes are timed: making up the synthetic records (a fifth of the
            # loop's time) is the benchmark's work, not the store's.
            ingest_s = 0.0
            done = 0
            while True:
                start = time.perf_counter()
                batch = list(itertools.islice(items, args.batch))
                made_s += time.perf_counter() - start
                if not batch:
                    break
                start = time.perf_counter()
                memory.remember_many(batch, principal=curator)
                ingest_s += time.perf_counter() - start
                done += len(batch)
                progress.update(task, completed=done)
            ingest_rss = _peak_rss_mb()
        else:
            console.print(f"reusing the store kept in {folder} (ingest skipped)")
            ingest_s, ingest_rss = kept["ingest_s"], kept["peak_rss_after_ingest_mb"]
        task = progress.add_task("dense index", total=args.records)
        start = time.perf_counter()
        memory.index_pending(progress=lambda done, total: progress.update(task, completed=done))
        index_s = time.perf_counter() - start
        if worker is not None:
            # Idle from here on, it would still save the catalog now and then, and a read
            # meanwhile would answer without vectors (and look faster): reads are timed alone.
            worker.stop()
        # From the first write to the last vector. Serial: the writes and the index build
        # alone. Overlapped: the wall time less the corpus's making (the worker embeds on
        # meanwhile, so this flatters the overlap by at most ``corpus_s``, reported too).
        searchable_s = time.perf_counter() - began - made_s if overlap else ingest_s + index_s
    if kept is None and args.store is not None:
        # Written last, once the vectors are stored too: its presence marks a complete store.
        (folder / MANIFEST).write_text(json.dumps({
            "corpus": _corpus_key(args), "ingest_s": ingest_s,
            "peak_rss_after_ingest_mb": ingest_rss,
        }, indent=2))  # fmt: skip

    rng = random.Random(args.seed + 1)
    queries = [_text(rng, rng.randrange(2, 6)) for _ in range(args.queries)]
    memory.search(queries[0], principal=reader, mode="hybrid")  # warm caches and the model
    results: dict[str, Any] = {
        "records": args.records,
        "backend": "postgresql" if args.db else "sqlite",
        "embedder": args.embedder,
        "ingest_records_per_s": round(args.records / ingest_s, 1),
        "ingest_s": round(ingest_s, 2),
        "index_build_s": round(index_s, 2),
        "overlapped": overlap,
        "searchable_s": round(searchable_s, 2),
        "corpus_s": round(made_s, 2),
        "vector_lag_after_build": memory.vector_lag(),
        "vector_index": "hnsw" if _uses_ann(memory) else "exact",
        "ann_build_s": round(_ann_build_s(memory), 2),
        "graph_dims": _graph_dims(memory),
        "projection_recall": memory.indexer.catalog.projection_recall if memory.indexer else None,
        "peak_rss_after_ingest_mb": ingest_rss,
        "store_reused": kept is not None,
    }
    for name, mode, scope in READS:
        samples = []
        cpu = []
        stages: dict[str, list[float]] = {}
        hits = 0
        for query in queries:
            start, started_cpu = time.perf_counter(), time.process_time()
            found = memory.retrieve(query, principal=reader, mode=mode, k=10, scope=scope)
            samples.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
            hits += len(found.items)
            for stage, ms in found.trace.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
        results[name] = _percentiles(samples) | {"mean_items": round(hits / len(queries), 2)}
        # CPU time (all threads) says what a read costs when other work shares the cores;
        # the stages say where the wall time went.
        results[name]["cpu_ms"] = _percentiles(cpu)
        results[name]["stages_ms"] = {stage: _percentiles(v) for stage, v in stages.items()}
    results["peak_rss_mb"] = _peak_rss_mb()
    memory.close()
    return results


def show(results: dict[str, Any], console: Console) -> None:
    head = Table(title=f"cairn latency · {results['records']:,} records · {results['backend']}",
                 title_justify="left")  # fmt: skip
    for column in ("ingest rec/s", "ingest s", "index build s", "of which HNSW s",
                   "searchable s", "peak RSS MB", "embedder", "vectors"):  # fmt: skip
        head.add_column(column, justify="right")
    head.add_row(
        f"{results['ingest_records_per_s']:,.0f}", f"{results['ingest_s']}",
        f"{results['index_build_s']}", f"{results['ann_build_s']}",
        f"{results['searchable_s']}" + (" (overlapped)" if results["overlapped"] else ""),
        f"{results['peak_rss_mb']}",
        results["embedder"],
        results["vector_index"] + (f" ({results['graph_dims']}-d graph)"
                                   if results.get("graph_dims") else ""),
    )  # fmt: skip
    console.print(head)
    reads = Table(title="reads (permission-trimmed, k=10, validated, budgeted)",
                  title_justify="left")  # fmt: skip
    for column in ("mode", "p50 ms", "p95 ms", "p99 ms", "mean ms", "items"):
        reads.add_column(column, justify="right")
    for name, _, _ in READS:
        r = results[name]
        reads.add_row(name, str(r["p50_ms"]), str(r["p95_ms"]), str(r["p99_ms"]),
                      str(r["mean_ms"]), str(r["mean_items"]))  # fmt: skip
    console.print(reads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--embedder", default="static", help="static, minilm or openai:URL")
    parser.add_argument("--db", default=None, help="postgresql://… (default: embedded SQLite)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--ann-threshold", default="default", help="rows above which HNSW answers: N or 'never'"
    )
    parser.add_argument(
        "--ann-dims",
        default="default",
        help="dimensions of the HNSW graph: N, or 'full' for the vectors' own",
    )
    parser.add_argument(
        "--overlap",
        action="store_true",
        help="embed in the background while ingesting, as a server does (index build s is "
        "then what is left once the writes end)",
    )
    parser.add_argument("--quick", action="store_true", help="a few seconds: smoke test")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--store",
        type=Path,
        default=None,
        help="keep the built store in this folder and reuse it when it matches (skips ingest)",
    )
    args = parser.parse_args(argv)
    if args.store is not None and args.db:
        parser.error("--store keeps an embedded SQLite store; it cannot be used with --db")
    if args.quick:
        args.records, args.queries = min(args.records, 500), min(args.queries, 30)
    console = Console(width=None if sys.stdout.isatty() else 150)
    return report(run(args, console), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
