"""ANN versus exact vector recall in the catalog: recall@10 and latency under permission masks.

    python bench/ann_recall.py --n 200000 [--data clustered|static] [--json out.json]
    python bench/ann_recall.py --quick

Builds two :class:`~cairn.search.catalog.VectorCatalog` over the same vectors, one exact
(``ann_threshold=None``) and one on its HNSW graph (``ann_threshold=0``), then searches both
as readers allowed 100%, 50%, 10% and 1% of the rows (ACLs spread uniformly over the corpus),
plus 10% "clustered" (a team scope that owns whole topics, so allowed rows are far from many
queries: the hard case for filtered HNSW). Each search asks for ``--candidates`` hits as the
retrieval pipeline does and recall@k compares the first ``k`` with the exact top ``k``.
"default" rows use the catalog's own choice (graph, or exact fallback for small allowed sets);
"graph" rows force the filtered graph search, to show why the fallback exists.
Prints tables; never asserts.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from cairn.search.catalog import VectorCatalog
from cairn.store.base import ChunkFilter, ChunkMeta

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._proc import status_mb
from bench._report import report

FloatArray = npt.NDArray[np.float32]
ACLS = 100  # acl ids 0..99, uniformly: a reader allowed j of them sees j% of the rows
SCOPES = 10
MASKS = {"100%": ACLS, "50%": 50, "10%": 10, "1%": 1}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clustered(n: int, dim: int, seed: int) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Unit vectors around n/100 centres of uneven size and spread (Zipf-ish cluster sizes,
    per-cluster noise 0.3-0.9): embeddings of real text are lumpy, not uniform noise.
    Returns the vectors and each one's cluster, generated in slices to bound memory."""
    rng = np.random.default_rng(seed)
    count = max(1, n // 100)
    centres = rng.standard_normal((count, dim)).astype(np.float32)
    spread = rng.uniform(0.3, 0.9, count).astype(np.float32)
    weights = 1.0 / np.arange(1, count + 1) ** 0.8
    cluster = rng.choice(count, size=n, p=weights / weights.sum())
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 65_536):
        part = cluster[start : start + 65_536]
        noise = rng.standard_normal((part.size, dim), dtype=np.float32)
        rows = centres[part] + spread[part, None] * noise
        out[start : start + part.size] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out, cluster


def static_vectors(n: int, seed: int, console: Console) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """The latency benchmark's synthetic corpus embedded with the static embedder; the
    "cluster" is the record's kind-independent team scope, drawn as in that corpus."""
    from cairn.search.embedder import make_embedder
    from latency import corpus

    embedder = make_embedder("static", cached=False)
    out = np.empty((n, embedder.dim), dtype=np.float32)
    teams = np.empty(n, dtype=np.int64)
    batch: list[str] = []
    done = 0
    start = time.perf_counter()
    for i, item in enumerate(corpus(n, seed)):
        batch.append(f"{item.title}\n{item.body}")
        teams[i] = int(item.scope.rsplit("-", 1)[1])
        if len(batch) == 4096 or i == n - 1:
            out[done : done + len(batch)] = embedder.embed(batch)
            done += len(batch)
            batch = []
    console.print(f"embedded {n:,} texts in {time.perf_counter() - start:.1f}s")
    return out, teams


def _meta(row: int, acl: int, scope: int) -> ChunkMeta:
    return ChunkMeta(
        id=row, record_id=f"r{row}", version_id=f"v{row}", text_hash=f"h{row}", kind="fact",
        scope_id=scope, acl_id=acl, status="active", is_head=True, superseded=False,
        valid_from=None, valid_to=None, created_at=T0, seq=row + 1,
    )  # fmt: skip


def _fill(catalog: VectorCatalog, vectors: FloatArray, acl: Any, scope: Any) -> float:
    """Feed the catalog as the indexer does (batches of chunk changes); seconds taken."""
    start = time.perf_counter()
    for at in range(0, len(vectors), 8192):
        stop = min(len(vectors), at + 8192)
        metas = [_meta(r, int(acl[r]), int(scope[r])) for r in range(at, stop)]
        catalog.apply(metas, {m.text_hash: vectors[m.id] for m in metas})
    catalog.join_graph()  # the last graph insert runs in a thread: time it here, not in a query
    return time.perf_counter() - start


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _measure(
    exact: VectorCatalog,
    ann: VectorCatalog,
    queries: FloatArray,
    where: ChunkFilter,
    k: int,
    candidates: int,
) -> dict[str, float]:
    recalls: list[float] = []
    deep: list[float] = []
    exact_ms: list[float] = []
    ann_ms: list[float] = []
    for query in queries:
        start = time.perf_counter()
        truth = exact.search(query, where, candidates)
        exact_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        found = ann.search(query, where, candidates)
        ann_ms.append((time.perf_counter() - start) * 1000)
        if not truth:
            continue
        top = {hit for hit, _ in truth[:k]}
        recalls.append(len(top & {hit for hit, _ in found[:k]}) / len(top))
        every = {hit for hit, _ in truth}
        deep.append(len(every & {hit for hit, _ in found}) / len(every))
    return {
        "recall_at_k": round(float(np.mean(recalls)) if recalls else 1.0, 4),
        "min_recall_at_k": round(min(recalls) if recalls else 1.0, 2),
        "recall_at_candidates": round(float(np.mean(deep)) if deep else 1.0, 4),
        "exact_p50_ms": round(_percentile(exact_ms, 0.50), 2),
        "exact_p95_ms": round(_percentile(exact_ms, 0.95), 2),
        "ann_p50_ms": round(_percentile(ann_ms, 0.50), 2),
        "ann_p95_ms": round(_percentile(ann_ms, 0.95), 2),
    }


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    total = args.n + args.queries
    if args.data == "static":
        everything, cluster = static_vectors(total, args.seed, console)
    else:
        everything, cluster = clustered(total, args.dim, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    # Queries are held-out points of the same distribution (a question near stored text).
    order = rng.permutation(total)
    vectors = np.ascontiguousarray(everything[order[: args.n]])
    queries = everything[order[args.n :]]
    groups = cluster[order[: args.n]]
    del everything
    gc.collect()
    acl = rng.integers(0, ACLS, args.n)
    scope = groups % SCOPES
    dim = vectors.shape[1]
    console.print(f"{args.n:,} vectors x {dim} ({args.data}), {len(queries)} queries")

    base_rss = status_mb("VmRSS")
    exact = VectorCatalog(dim, ann_threshold=None)
    exact_fill_s = _fill(exact, vectors, acl, scope)
    exact_rss = status_mb("VmRSS") - base_rss
    ann = VectorCatalog(dim, ann_threshold=0, ann_ef_construction=args.ef_construction,
                        ann_m=args.m, ann_ef=args.ef)  # fmt: skip
    before = status_mb("VmRSS")
    ann_fill_s = _fill(ann, vectors, acl, scope)
    ann_rss = status_mb("VmRSS") - before
    results: dict[str, Any] = {
        "n": args.n,
        "dim": dim,
        "data": args.data,
        "queries": len(queries),
        "k": args.k,
        "candidates": args.candidates,
        "m": args.m,
        "ef_construction": args.ef_construction,
        "ef": ann.ann_ef,
        "ef_calibrated": args.ef is None,
        "calibration": ann.ann_calibration,
        "exact_fill_s": round(exact_fill_s, 2),
        "ann_fill_s": round(ann_fill_s, 2),
        "ann_insert_per_s": round(args.n / ann_fill_s, 1),
        "exact_catalog_mb": round(exact_rss, 1),
        "ann_catalog_mb": round(ann_rss, 1),
        "rows": [],
    }
    base = ChunkFilter(acl_ids=frozenset(), statuses=frozenset({"active"}))
    wheres = {
        name: dataclasses.replace(base, acl_ids=frozenset(range(count)))
        for name, count in MASKS.items()
    }
    wheres["10% clustered"] = dataclasses.replace(
        base, acl_ids=frozenset(range(ACLS)), scope_ids=frozenset({0})
    )
    for name, where in wheres.items():
        allowed = int(exact.mask(where).sum())
        fallback = allowed < max(ann.exact_rows, ann.exact_fraction * len(ann))
        variants = [("default", ann.exact_rows, ann.exact_fraction)]
        if fallback:
            variants.append(("graph", 0, 0.0))
        for variant, rows, fraction in variants:
            saved = (ann.exact_rows, ann.exact_fraction)
            ann.exact_rows, ann.exact_fraction = rows, fraction
            path = "exact bf16" if variant == "default" and fallback else "hnsw"
            figures = _measure(exact, ann, queries, where, args.k, args.candidates)
            ann.exact_rows, ann.exact_fraction = saved
            results["rows"].append(
                {"mask": name, "allowed": allowed, "variant": variant, "path": path} | figures
            )
    results["peak_rss_mb"] = round(_peak_rss_mb(), 1)
    return results


def show(results: dict[str, Any], console: Console) -> None:
    head = Table(
        title=f"ANN vs exact · {results['n']:,} x {results['dim']} ({results['data']}) · "
        f"M={results['m']} ef_construction={results['ef_construction']} ef={results['ef']}"
        + (" (calibrated)" if results["ef_calibrated"] else ""),
        title_justify="left",
    )
    for column in ("exact fill s", "ANN fill s", "ANN inserts/s", "exact MB", "ANN MB",
                   "peak RSS MB"):  # fmt: skip
        head.add_column(column, justify="right")
    head.add_row(
        str(results["exact_fill_s"]), str(results["ann_fill_s"]),
        f"{results['ann_insert_per_s']:,.0f}", str(results["exact_catalog_mb"]),
        str(results["ann_catalog_mb"]), str(results["peak_rss_mb"]),
    )  # fmt: skip
    console.print(head)
    if results["calibration"]:
        steps = ", ".join(f"ef {ef}: {recall:.3f}" for ef, recall in results["calibration"])
        console.print(f"ef calibration (held-out recall@10): {steps}")
    reads = Table(
        title=f"search top-{results['candidates']}, recall@{results['k']} vs exact "
        f"({results['queries']} queries)",
        title_justify="left",
    )
    for column in ("mask", "allowed", "path", f"recall@{results['k']}", "min",
                   f"recall@{results['candidates']}", "exact p50", "exact p95", "ANN p50",
                   "ANN p95"):  # fmt: skip
        reads.add_column(column, justify="right")
    for row in results["rows"]:
        reads.add_row(
            row["mask"], f"{row['allowed']:,}", row["path"], f"{row['recall_at_k']:.4f}",
            f"{row['min_recall_at_k']:.2f}", f"{row['recall_at_candidates']:.4f}",
            f"{row['exact_p50_ms']}", f"{row['exact_p95_ms']}", f"{row['ann_p50_ms']}",
            f"{row['ann_p95_ms']}",
        )  # fmt: skip
    console.print(reads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="vectors in the catalog")
    parser.add_argument("--dim", type=int, default=256, help="for --data clustered")
    parser.add_argument("--data", choices=("clustered", "static"), default="clustered")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--candidates", type=int, default=50, help="depth asked of search")
    parser.add_argument("--m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=100)
    parser.add_argument("--ef", type=int, default=None, help="fixed base ef (default: calibrated)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a few seconds: smoke test")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries = min(args.n, 20_000), min(args.queries, 50)
    console = Console(width=None if sys.stdout.isatty() else 150)
    return report(run(args, console), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
