"""ANN libraries side by side on the same vectors: hnswlib as the catalog has it, usearch, faiss.

    python bench/vector_index.py [--n 100000] [--dim 384] [--json out.json]
    python bench/vector_index.py --n 1000000 --dim 256 --ef 100 --json out-1m.json
    python bench/vector_index.py --n 100000 --data static   # real (static-embedder) vectors
    python bench/vector_index.py --quick

Clustered unit vectors (``ann_recall.clustered``: uneven clusters, uneven spread; ``--dim``
384 as MiniLM, 256 as the static embedder) and ``--queries`` held-out queries from the same
distribution; or, with ``--data static``, the latency benchmark's corpus embedded with cairn's
static embedder (256-d; the last ``--queries`` records are the held-out queries, its topics
are spherical k-means clusters, n/100 of them up to 1,024). Each variant runs in its own
subprocess, one after the other, so its memory is measured alone: the vectors are shared
through a memory-mapped file (file pages, not anonymous memory) and "index MB" is the growth
of the child's anonymous RSS across the build, next to the library's own figure.

Variants:

* ``hnswlib f32``: what :class:`~cairn.search.catalog.VectorCatalog` builds: inner-product
  space, M=32, ef_construction=100, inserted in 65,536-row slices on every core. Filtered
  searches pass the allowed-row mask as hnswlib's filter callable with ef raised to
  ``ef / fraction``, as the catalog does.
* ``usearch f32`` / ``f16`` / ``bf16`` / ``i8``: cosine, connectivity 32, expansion_add 100,
  every core (f32 shows the library at hnswlib's precision; bf16 has native dot products on
  CPUs with AVX-512 BF16). usearch's i8 cast is ``round(x * 127)`` of the normalised vector,
  which leaves 384-d unit vectors (components of a few hundredths) a handful of levels, so
* ``usearch i8 row-scaled`` adds int8 codes scaled per vector so its largest component is
  127 (the catalog's own int8 copy): cosine does not change with a vector's length, and
  int8 input is stored as given (float input is normalised before usearch's cast, so
  scaling float rows would change nothing).
* ``faiss hnsw f32``: faiss's ``IndexHNSWFlat`` as a control (faiss's graph at hnswlib's
  precision), set up and searched as the sq8 variants below.
* ``faiss hnsw sq8`` / ``sq8 uniform``: faiss's ``IndexHNSWSQ``, inner product, M=32,
  efConstruction=100, over 8-bit scalar-quantised codes (``QT_8bit``: a range per dimension;
  ``QT_8bit_uniform``: one range for all), the ranges trained on the first 65,536-row slice
  (as the catalog would on the rows it holds when it builds the graph); added in the same
  slices on every core (``omp_set_num_threads``), searched on one. ``efSearch`` is the
  variant's ef; filtered searches pass the mask as an ``IDSelectorBitmap`` (packed per
  query, inside the timing) with efSearch raised to ``ef / fraction`` as for hnswlib. The
  graph links are int32 (hnswlib's too); no float32 copy is kept.
* ``faiss hnsw sq8 + rescore``: the same index asked for ``4k`` candidates, re-scored exactly
  from float32 rows held outside the index (here the memory-mapped base file, so they are
  file pages and not in "index MB": the stand-in for re-reading finalists from the store).
* ``hnswlib pca<d'> + int8 rescore <c>k``: hnswlib as above (M=32, ef_construction=100, every
  core, the same filter callable and ``ef / fraction``) over vectors reduced by an uncentred
  PCA to d' dimensions (fitted with numpy on the first ``--pca-sample`` rows, 50,000 unless
  told, as the catalog would at its threshold), beside the catalog's int8 copy of the full
  vectors (one scale per row); the graph is asked for ``c * k`` candidates (ef at least
  that), re-scored in full dimension from the int8 codes (``codes @ q * scale``), top k
  kept. "index MB" and "library MB" include the int8 copy, its scales and the PCA matrix.
* ``hnswlib pca<d'> + int8 + f32 rescore <c>k``: the same, then the best ``2k + 48`` by int8
  re-scored in float32 as the catalog's exact path does, the float32 rows read from the
  memory-mapped base (outside "index MB", as for faiss's rescore: the graph no longer holds
  them, so the catalog would read them from the store or a file). int8 per-row codes alone
  cap recall@10 at ~0.86 on the static embedder's rows (their scores crowd within ~0.01).
* ``ivf<lists> int8 + f32 rescore``: no graph, an inverted file: spherical k-means centres
  fitted on the first ``--pca-sample`` rows, every row filed under its nearest centre; a
  search scans the int8 codes of the rows of the best ``ef`` lists (``--ef`` is the number
  of lists probed; filtered: ``ef / fraction`` lists, refused rows dropped), then re-scores
  the best ``2k + 48`` in float32 as above. The k-means fit counts as build time.

``--m`` and ``--ef-construction`` set every graph's links a node and build breadth.

usearch's Python binding has no filter callback (the C/C++ API does), so its filtered rows
over-fetch: ask for ``2k / fraction`` hits at ``ef / fraction`` breadth, keep the allowed ones,
and ask for 4x more while fewer than ``k`` survive (at most 4 rounds, then the recall shows
the shortfall). "rows" filters keep a random half of the rows (ACL-like), "topics" keep every
other cluster (a team scope owning whole topics: queries often start far from any allowed
row, the hard case). faiss applies its selector only to what enters the result heap: its
search beam holds disallowed nodes too and stops once ``efSearch`` visited nodes, allowed or
not, beat the next candidate, where hnswlib's walks on until ``ef`` *allowed* nodes are found.
So under a "topics" filter a query whose own topic is disallowed stops inside it, and only a
larger efSearch helps.

Recall@k is against an exact float32 scan; latency is one query at a time, one thread.
usearch and faiss variants are skipped when the package is missing (``pip install usearch
faiss-cpu``, or the ``ann-bench`` extra; neither is a dependency of cairn). Prints a table;
never asserts.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.table import Table

from ann_recall import (  # a sibling script: run as a script, bench/ is on the path
    clustered,
    static_vectors,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._proc import status_mb
from bench._report import report

from cairn.search.catalog import _quantize  # the catalog's own int8 copy, measured here

FloatArray = npt.NDArray[np.float32]
DEFAULT_DIM = 384
K = 10
DEFAULT_M = 32
DEFAULT_EF_CONSTRUCTION = 100
M = DEFAULT_M  # as --m and --ef-construction say (main)
EF_CONSTRUCTION = DEFAULT_EF_CONSTRUCTION
SLICE = 65_536
VARIANTS = (
    "hnswlib f32",
    "usearch f32",
    "usearch f16",
    "usearch bf16",
    "usearch i8",
    "usearch i8 row-scaled",
    "faiss hnsw f32",
    "faiss hnsw sq8",
    "faiss hnsw sq8 uniform",
    "faiss hnsw sq8 + rescore",
    *(f"hnswlib pca{d} + int8 rescore {c}k" for d in (64, 96, 128) for c in (4, 8)),
    *(f"hnswlib pca{d} + int8 + f32 rescore {c}k" for d in (64, 96, 128) for c in (4, 8)),
    *(f"ivf{lists} int8 + f32 rescore" for lists in (256, 1024, 4096)),
)
RESCORE_FACTOR = 4  # the rescoring variant takes this many times k candidates
PCA_SAMPLE = 50_000  # rows the PCA is fitted on (the first ones), unless --pca-sample
RESCORE_MARGIN = 48  # "+ f32 rescore": float32 for the top 2k + this many by int8 (the catalog's)
FILTERS = ("rows", "topics")


def _cpu_seconds() -> float:
    """User + system CPU of this process: the build's work, less sensitive than wall time
    to other processes sharing the cores."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row_scaled(rows: FloatArray) -> npt.NDArray[np.int8]:
    """int8 codes scaled per row so the largest component is 127 (the catalog's own int8
    copy). Handed to usearch as int8, they are stored as they are: usearch normalises
    float input before its own cast, so scaling float rows alone changes nothing."""
    peak = np.abs(rows).max(axis=1, keepdims=True)
    return np.rint(rows * (127.0 / peak)).astype(np.int8)


def _int8_copy(
    codes: npt.NDArray[np.int8], scales: FloatArray, start: int, rows: FloatArray
) -> None:
    """Rows ``start`` on of the catalog's own int8 copy (its ``_quantize``: one scale a row)."""
    codes[start : start + len(rows)], scales[start : start + len(rows)] = _quantize(rows)


def _f32_rescored(rows: FloatArray, finalists: npt.NDArray[np.int64], q: FloatArray) -> list[int]:
    """The best K of ``finalists`` (row numbers) by their float32 rows, read in row order."""
    ordered = np.sort(finalists)
    exact = np.asarray(rows[ordered], dtype=np.float32) @ q
    return [int(row) for row in ordered[np.argsort(-exact, kind="stable")[:K]]]


# ---- data and ground truth (parent) ------------------------------------------------------


def _spherical_kmeans(
    vectors: FloatArray, count: int, seed: int, rounds: int = 8
) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """``count`` unit centres of ``vectors`` (rows of unit length) and each row's label: a few
    rounds of spherical k-means scored in slices; a centre left empty keeps its place."""
    rng = np.random.default_rng(seed)
    centres = vectors[rng.choice(len(vectors), count, replace=False)].copy()
    label = np.zeros(len(vectors), dtype=np.int64)
    for _ in range(rounds):
        for start in range(0, len(vectors), SLICE):
            label[start : start + SLICE] = np.argmax(vectors[start : start + SLICE] @ centres.T, 1)
        sums = np.zeros_like(centres)
        np.add.at(sums, label, vectors)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centres = np.where(norms > 0, sums / np.maximum(norms, 1e-12), centres)
    return np.ascontiguousarray(centres, dtype=np.float32), label


def _topics(vectors: FloatArray, count: int, seed: int) -> npt.NDArray[np.int64]:
    """Spherical k-means labels: topics for vectors that come without any, so a "topics"
    filter excludes whole regions."""
    return _spherical_kmeans(vectors, count, seed)[1]


def _prepare(
    folder: Path, n: int, dim: int, queries: int, seed: int, data: str, console: Console
) -> dict[str, Any]:
    if data == "static":
        # Real embeddings of artificial text; the held-out queries are the last records.
        vectors, _ = static_vectors(n + queries, seed, console)
        cluster = _topics(vectors, min(1024, max(2, n // 100)), seed)
    else:
        vectors, cluster = clustered(n + queries, dim, seed)
    np.save(folder / "base.npy", vectors[:n])
    np.save(folder / "queries.npy", vectors[n:])
    del vectors
    gc.collect()
    rng = np.random.default_rng(seed + 1)
    masks = {
        "rows": rng.random(n) < 0.5,
        "topics": cluster[:n] % 2 == 0,
    }
    for name, mask in masks.items():
        np.save(folder / f"mask-{name}.npy", mask)
    base = np.load(folder / "base.npy", mmap_mode="r")
    query = np.load(folder / "queries.npy")
    started = time.perf_counter()
    truth = _exact_top(base, query, [None, masks["rows"], masks["topics"]])
    exact_seconds = time.perf_counter() - started
    for name, top in zip(("all", *FILTERS), truth, strict=True):
        np.save(folder / f"truth-{name}.npy", top)
    return {
        "clusters": int(cluster.max()) + 1,
        "fractions": {name: round(float(mask.mean()), 3) for name, mask in masks.items()},
        "exact_batch_seconds": round(exact_seconds, 1),
    }


def _exact_top(
    base: FloatArray, queries: FloatArray, masks: list[npt.NDArray[np.bool_] | None]
) -> list[npt.NDArray[np.int64]]:
    """Exact top-K row numbers for every query, unfiltered and under each mask, in one pass
    over the base in slices (the score matrix never holds more than one slice)."""
    best = [
        (np.zeros((len(queries), 0), np.int64), np.zeros((len(queries), 0), np.float32))
        for _ in masks
    ]
    for start in range(0, len(base), SLICE):
        block = np.asarray(base[start : start + SLICE])
        scores = queries @ block.T
        for i, mask in enumerate(masks):
            part = scores.copy() if mask is not None else scores
            if mask is not None:
                part[:, ~mask[start : start + len(block)]] = -np.inf
            take = min(K, len(block))
            top = np.argpartition(-part, take - 1, axis=1)[:, :take]
            rows = np.concatenate([best[i][0], top + start], axis=1)
            vals = np.concatenate([best[i][1], np.take_along_axis(part, top, 1)], axis=1)
            keep = np.argsort(-vals, axis=1, kind="stable")[:, :K]
            best[i] = (np.take_along_axis(rows, keep, 1), np.take_along_axis(vals, keep, 1))
    return [rows for rows, _ in best]


# ---- one variant (child) -----------------------------------------------------------------


class _Hnswlib:
    def __init__(self, n: int, dim: int) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(max_elements=n, ef_construction=EF_CONSTRUCTION, M=M, random_seed=100)

    def add(self, start: int, rows: FloatArray) -> None:
        self.index.add_items(rows, np.arange(start, start + len(rows)), num_threads=-1)

    def size_mb(self) -> float:
        return float(self.index.index_file_size()) / 2**20

    def search(self, q: FloatArray, ef: int) -> list[int]:
        self.index.set_ef(max(ef, K))
        labels, _ = self.index.knn_query(q, k=K, num_threads=1)
        return [int(label) for label in labels[0]]

    def filtered(self, q: FloatArray, ef: int, mask: npt.NDArray[np.bool_], fraction: float
                 ) -> list[int]:  # fmt: skip
        # As the catalog: the mask's __getitem__ as hnswlib's filter, breadth ef / fraction.
        self.index.set_ef(max(K, min(1500, math.ceil(ef / fraction))))
        try:
            labels, _ = self.index.knn_query(q, k=K, num_threads=1, filter=mask.__getitem__)
        except RuntimeError:
            return []  # fewer than k allowed found; the catalog then scans exactly
        return [int(label) for label in labels[0]]


class _PcaHnswlib:
    """hnswlib (as :class:`_Hnswlib`) over vectors reduced by PCA to ``reduced`` dimensions,
    plus the catalog's int8 copy (one scale per row) of the full vectors: the graph is
    asked for ``candidates`` rows, re-scored in full dimension from the int8 codes.

    The PCA (numpy) is fitted on the first ``sample`` rows, as the catalog would on the
    rows it holds when it builds the graph: the top eigenvectors ``P`` of ``X^T X``,
    *uncentred*, so the graph stores ``P x`` in inner-product space, is searched with
    ``P q`` and ``P q . P x`` estimates ``q . x``. Centring (eigenvectors of the covariance)
    drops the mean's direction, which carries most of ``q . x`` when embeddings share a
    large common component (the static embedder's rows: |mean| ~0.92), and leaves rows of
    uneven length around the origin, on which an inner-product graph navigates badly:
    recall@10 ~0.1 on static vectors at 100k, where uncentred pca96 matches hnswlib f32
    (0.90 at ef 100) once the finalists are re-scored in float32."""

    def __init__(
        self, n: int, dim: int, reduced: int, candidates: int, sample: FloatArray,
        rows: FloatArray | None,
    ) -> None:  # fmt: skip
        import hnswlib

        wide = sample.astype(np.float64)
        _, eigenvectors = np.linalg.eigh(wide.T @ wide)  # ascending eigenvalues
        self.components = np.ascontiguousarray(eigenvectors[:, ::-1][:, :reduced].T, np.float32)
        del wide
        self.index = hnswlib.Index(space="ip", dim=reduced)
        self.index.init_index(max_elements=n, ef_construction=EF_CONSTRUCTION, M=M, random_seed=100)
        self.codes = np.empty((n, dim), dtype=np.int8)
        self.scales = np.empty(n, dtype=np.float32)
        self.candidates = candidates
        self.rows = rows

    def add(self, start: int, rows: FloatArray) -> None:
        _int8_copy(self.codes, self.scales, start, rows)
        reduced = rows @ self.components.T
        self.index.add_items(reduced, np.arange(start, start + len(rows)), num_threads=-1)

    def size_mb(self) -> float:
        """The graph plus what the variant needs beside it: the int8 copy, its scales and
        the PCA matrix."""
        extra = self.codes.nbytes + self.scales.nbytes + self.components.nbytes
        return float(self.index.index_file_size() + extra) / 2**20

    def _rescored(self, labels: npt.NDArray[np.uint64], q: FloatArray) -> list[int]:
        rows = labels.astype(np.int64)
        scores = (self.codes[rows].astype(np.float32) @ q) * self.scales[rows]
        if self.rows is None:
            return [int(row) for row in rows[np.argsort(-scores, kind="stable")[:K]]]
        # As the catalog's exact path: the best 2k + margin by int8, re-scored in float32.
        return _f32_rescored(
            self.rows, rows[np.argsort(-scores, kind="stable")[: 2 * K + RESCORE_MARGIN]], q
        )

    def search(self, q: FloatArray, ef: int) -> list[int]:
        self.index.set_ef(max(ef, self.candidates))
        labels, _ = self.index.knn_query(q @ self.components.T, k=self.candidates, num_threads=1)
        return self._rescored(labels[0], q)

    def filtered(self, q: FloatArray, ef: int, mask: npt.NDArray[np.bool_], fraction: float
                 ) -> list[int]:  # fmt: skip
        self.index.set_ef(max(self.candidates, min(1500, math.ceil(ef / fraction))))
        try:
            labels, _ = self.index.knn_query(
                q @ self.components.T, k=self.candidates, num_threads=1, filter=mask.__getitem__
            )
        except RuntimeError:
            return []  # fewer than `candidates` allowed found; the catalog then scans exactly
        return self._rescored(labels[0], q)


class _Ivf:
    """An inverted file over the catalog's int8 copy: spherical k-means centres fitted on
    the first ``sample`` rows, every row filed under its nearest centre, rows of a list kept
    together. A search scores the centres, scans the rows of the best ``probes`` lists from
    the int8 codes (``codes @ q * scale``), then re-scores the best ``2k + 48`` in float32
    from the rows (here the memory-mapped base, as the catalog would read them from the
    store). Filtered searches drop the rows the mask refuses and scan ``probes / fraction``
    lists. The ``--ef`` values are the probes. Build = the k-means fit, the assignment of
    every row, and the sort into lists: no graph."""

    def __init__(self, n: int, dim: int, lists: int, sample: FloatArray, rows: FloatArray) -> None:
        self.centres = _spherical_kmeans(sample, lists, seed=100)[0]
        self.codes = np.empty((n, dim), dtype=np.int8)
        self.scales = np.empty(n, dtype=np.float32)
        self.filed = np.empty(n, dtype=np.int32)
        self.rows = rows
        self.order = np.zeros(0, dtype=np.int64)
        self.starts = np.zeros(lists + 1, dtype=np.int64)

    def add(self, start: int, rows: FloatArray) -> None:
        _int8_copy(self.codes, self.scales, start, rows)
        self.filed[start : start + len(rows)] = np.argmax(rows @ self.centres.T, axis=1)

    def finish(self) -> None:
        """Rows of a list side by side (codes and scales in list order)."""
        self.order = np.argsort(self.filed, kind="stable")
        self.codes = self.codes[self.order]
        self.scales = self.scales[self.order]
        counts = np.bincount(self.filed, minlength=len(self.centres))
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        del self.filed

    def size_mb(self) -> float:
        extra = self.order.nbytes + self.starts.nbytes + self.centres.nbytes
        return float(self.codes.nbytes + self.scales.nbytes + extra) / 2**20

    def _positions(self, q: FloatArray, probes: int) -> npt.NDArray[np.int64]:
        probes = min(probes, len(self.centres))
        best = np.argpartition(-(self.centres @ q), probes - 1)[:probes]
        return np.concatenate([np.arange(self.starts[b], self.starts[b + 1]) for b in best])

    def _ranked(self, q: FloatArray, positions: npt.NDArray[np.int64]) -> list[int]:
        if positions.size == 0:
            return []
        approx = (self.codes[positions].astype(np.float32) @ q) * self.scales[positions]
        take = min(2 * K + RESCORE_MARGIN, positions.size)
        top = positions[np.argpartition(-approx, take - 1)[:take]]
        return _f32_rescored(self.rows, self.order[top], q)

    def search(self, q: FloatArray, ef: int) -> list[int]:
        return self._ranked(q, self._positions(q, ef))

    def filtered(self, q: FloatArray, ef: int, mask: npt.NDArray[np.bool_], fraction: float
                 ) -> list[int]:  # fmt: skip
        positions = self._positions(q, math.ceil(ef / fraction))
        return self._ranked(q, positions[mask[self.order[positions]]])


class _Usearch:
    def __init__(self, dim: int, dtype: str, row_scaled: bool) -> None:
        from usearch.index import Index

        self.index = Index(
            ndim=dim, metric="cos", dtype=dtype, connectivity=M, expansion_add=EF_CONSTRUCTION
        )
        self.row_scaled = row_scaled

    def _prepare(self, rows: FloatArray) -> npt.NDArray[Any]:
        return _row_scaled(rows) if self.row_scaled else rows

    def add(self, start: int, rows: FloatArray) -> None:
        keys = np.arange(start, start + len(rows), dtype=np.uint64)
        self.index.add(keys, self._prepare(rows), threads=os.cpu_count() or 1)

    def size_mb(self) -> float:
        return float(self.index.memory_usage) / 2**20

    def search(self, q: FloatArray, ef: int) -> list[int]:
        self.index.expansion_search = max(ef, K)
        found = self.index.search(self._prepare(q[None, :])[0], K, threads=1)
        return [int(key) for key in found.keys]

    def filtered(self, q: FloatArray, ef: int, mask: npt.NDArray[np.bool_], fraction: float
                 ) -> list[int]:  # fmt: skip
        wanted = math.ceil(2 * K / fraction)
        query = self._prepare(q[None, :])[0]
        for _ in range(4):
            self.index.expansion_search = max(wanted, min(1500, math.ceil(ef / fraction)))
            keys = self.index.search(query, wanted, threads=1).keys
            kept = [int(key) for key in keys if mask[key]]
            if len(kept) >= K or len(keys) < wanted:
                return kept[:K]
            wanted *= 4
        return kept[:K]


class _Faiss:
    """faiss ``IndexHNSWSQ`` (8-bit codes, inner product) or, with ``codes="f32"``,
    ``IndexHNSWFlat``; with ``rows`` (float32 vectors held outside the index),
    ``RESCORE_FACTOR * k`` candidates re-scored exactly."""

    def __init__(self, dim: int, codes: str, rows: FloatArray | None) -> None:
        import faiss

        # Any: faiss's bundled stubs miss SearchParametersHNSW, the HNSW vectors and the
        # quantiser-type constructor argument.
        self.faiss: Any = faiss
        self.index: Any
        if codes == "f32":
            self.index = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
        else:
            sq = self.faiss.ScalarQuantizer
            qtype = sq.QT_8bit_uniform if codes == "sq8 uniform" else sq.QT_8bit
            self.index = self.faiss.IndexHNSWSQ(dim, qtype, M, faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = EF_CONSTRUCTION
        self.rows = rows
        self.take = K * RESCORE_FACTOR if rows is not None else K

    def add(self, start: int, rows: FloatArray) -> None:
        self.faiss.omp_set_num_threads(os.cpu_count() or 1)  # every core, as hnswlib's -1
        try:
            if not self.index.is_trained:
                self.index.train(rows)  # the codes' ranges, from the first slice
            self.index.add(rows)  # labels are insertion order: start .. start + len(rows)
        finally:
            self.faiss.omp_set_num_threads(1)

    def size_mb(self) -> float:
        """Codes plus graph: the vectors faiss holds (codes, neighbour ids, per-node
        offsets and levels); the small per-level tables are left out."""
        storage = self.faiss.downcast_index(self.index.storage)
        hnsw = self.index.hnsw
        size = storage.codes.size() + 4 * hnsw.neighbors.size()
        size += 8 * hnsw.offsets.size() + 4 * hnsw.levels.size()
        return float(size) / 2**20

    def _search(self, q: FloatArray, params: Any) -> list[int]:
        _, labels = self.index.search(q[None, :], self.take, params=params)
        found = labels[0][labels[0] >= 0]  # -1: fewer allowed nodes found than asked for
        if self.rows is None:
            return [int(label) for label in found]
        rows = np.sort(found)
        scores = np.asarray(self.rows[rows], dtype=np.float32) @ q
        best = rows[np.argsort(-scores, kind="stable")[:K]]
        return [int(row) for row in best]

    def search(self, q: FloatArray, ef: int) -> list[int]:
        params = self.faiss.SearchParametersHNSW(efSearch=max(ef, self.take))
        return self._search(q, params)

    def filtered(self, q: FloatArray, ef: int, mask: npt.NDArray[np.bool_], fraction: float
                 ) -> list[int]:  # fmt: skip
        # The allowed rows as faiss's bitmap (bit i of byte i // 8, least significant first);
        # `bits` must outlive the search, the selector only points at it.
        bits = np.packbits(mask, bitorder="little")
        selector = self.faiss.IDSelectorBitmap(mask.size, self.faiss.swig_ptr(bits))
        ef = max(self.take, min(1500, math.ceil(ef / fraction)))
        params = self.faiss.SearchParametersHNSW(sel=selector, efSearch=ef)
        return self._search(q, params)


def _recall(found: list[list[int]], truth: npt.NDArray[np.int64]) -> float:
    hits = sum(len(set(f) & set(t.tolist())) for f, t in zip(found, truth, strict=True))
    return hits / (K * len(truth))


def measure(folder: Path, variant: str, efs: list[int], pca_sample: int) -> dict[str, Any]:
    base = np.load(folder / "base.npy", mmap_mode="r")
    queries = np.load(folder / "queries.npy")
    n, dim = base.shape
    index: _Hnswlib | _PcaHnswlib | _Usearch | _Faiss | _Ivf
    before = status_mb("RssAnon")
    started = time.perf_counter()
    cpu = _cpu_seconds()
    if variant == "hnswlib f32":
        index = _Hnswlib(n, dim)
    elif variant.startswith("hnswlib pca"):
        # "hnswlib pca<d'> + int8 [+ f32] rescore <c>k"; the PCA fit counts as build time.
        words = variant.split()
        index = _PcaHnswlib(
            n, dim, int(words[1].removeprefix("pca")), K * int(words[-1].removesuffix("k")),
            np.asarray(base[:pca_sample], dtype=np.float32),
            rows=base if "f32 rescore" in variant else None,
        )  # fmt: skip
    elif variant.startswith("ivf"):
        # "ivf<lists> int8 + f32 rescore"; the k-means fit counts as build time.
        sample = np.asarray(base[:pca_sample], dtype=np.float32)
        index = _Ivf(n, dim, int(variant.split()[0].removeprefix("ivf")), sample, rows=base)
        del sample
    elif variant.startswith("faiss"):
        codes = variant.removeprefix("faiss hnsw ").removesuffix(" + rescore")
        index = _Faiss(dim, codes, rows=base if variant.endswith("rescore") else None)
    else:
        dtype = variant.split()[1]
        index = _Usearch(dim, dtype, row_scaled=variant.endswith("row-scaled"))
    for start in range(0, n, SLICE):
        rows = np.ascontiguousarray(base[start : start + SLICE], dtype=np.float32)
        index.add(start, rows)
        del rows
    if isinstance(index, _Ivf):
        index.finish()
    build = time.perf_counter() - started
    build_cpu = _cpu_seconds() - cpu
    gc.collect()
    grown = status_mb("RssAnon") - before
    out: dict[str, Any] = {
        "variant": variant,
        "build_s": round(build, 1),
        "build_cpu_s": round(build_cpu, 1),
        "index_rss_mb": round(grown),
        "library_mb": round(index.size_mb()),
        "by_ef": {},
    }
    truth = {name: np.load(folder / f"truth-{name}.npy") for name in ("all", *FILTERS)}
    masks = {name: np.load(folder / f"mask-{name}.npy") for name in FILTERS}
    for ef in efs:
        row: dict[str, Any] = {}
        found: list[list[int]] = []
        ms: list[float] = []
        for q in queries:
            t = time.perf_counter()
            found.append(index.search(q, ef))
            ms.append((time.perf_counter() - t) * 1000)
        row["all"] = _summary(found, truth["all"], ms)
        for name, mask in masks.items():
            fraction = float(mask.mean())
            found, ms = [], []
            for q in queries:
                t = time.perf_counter()
                found.append(index.filtered(q, ef, mask, fraction))
                ms.append((time.perf_counter() - t) * 1000)
            row[name] = _summary(found, truth[name], ms)
        out["by_ef"][str(ef)] = row
    return out


def _summary(found: list[list[int]], truth: npt.NDArray[np.int64], ms: list[float]
             ) -> dict[str, float]:  # fmt: skip
    return {
        "recall": round(_recall(found, truth), 4),
        "p50_ms": round(_percentile(ms, 0.50), 3),
        "p95_ms": round(_percentile(ms, 0.95), 3),
    }


# ---- driver --------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    """The installed version of each ANN library (absent ones left out)."""
    found: dict[str, str] = {}
    for name, dist in (("hnswlib", "hnswlib"), ("usearch", "usearch"), ("faiss", "faiss-cpu")):
        try:
            found[name] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cairn-vindex-") as tmp:
        folder = Path(tmp)
        with console.status(f"{args.data} vectors, {args.n:,} + {args.queries:,} queries, truth"):
            data = _prepare(
                folder, args.n, args.dim, args.queries, args.seed, args.data, console
            )  # fmt: skip
        results: dict[str, Any] = {
            "n": args.n,
            "dim": int(np.load(folder / "queries.npy").shape[1]),
            "data": args.data,
            "pca_sample": args.pca_sample,
            "queries": args.queries,
            "k": K,
            "seed": args.seed,
            "m": args.m,
            "ef_construction": args.ef_construction,
            "efs": args.ef,
            "cores": os.cpu_count(),
            "machine": platform.processor() or platform.machine(),
            "libraries": _versions(),
            **data,
            "variants": [],
        }
        for variant in args.variants:
            library = variant.split()[0]
            # hnswlib is cairn's own dependency; the inverted file is numpy alone
            optional = library != "hnswlib" and not library.startswith("ivf")
            if optional and importlib.util.find_spec(library) is None:
                console.print(f"[yellow]{variant}: {library} is not installed, skipped[/yellow]")
                continue
            with console.status(f"{variant}: build and query (own process)"):
                child = subprocess.run(
                    [sys.executable, __file__, "--child", str(folder), variant,
                     "--ef", *map(str, args.ef), "--pca-sample", str(args.pca_sample),
                     "--m", str(args.m), "--ef-construction", str(args.ef_construction)],
                    capture_output=True, text=True, check=False,
                )  # fmt: skip
            if child.returncode != 0:
                console.print(f"[red]{variant} failed[/red]\n{child.stderr[-2000:]}")
                continue
            results["variants"].append(json.loads(child.stdout.strip().splitlines()[-1]))
    return results


def show(results: dict[str, Any], console: Console) -> None:
    fr = results["fractions"]
    table = Table(
        title=f"ANN index · {results['n']:,} × {results['dim']}-d {results['data']} · "
        f"{results['queries']:,} queries · recall@{results['k']} vs exact · "
        f"M={results['m']}, ef_construction={results['ef_construction']} · "
        f"{results['cores']} cores build, 1 thread query",
        caption=f"filters keep {fr['rows']:.0%} of rows at random, or every other topic "
        f"({fr['topics']:.0%} of rows)",
    )
    for name in ("variant", "build s (CPU s)", "index MB (RSS)", "library MB", "ef"):
        table.add_column(name, justify="left" if name == "variant" else "right")
    for name in ("all", *FILTERS):
        table.add_column(f"{name}: recall", justify="right")
        table.add_column(f"{name}: p50 / p95 ms", justify="right")
    for variant in results["variants"]:
        for i, (ef, row) in enumerate(variant["by_ef"].items()):
            cells = [
                variant["variant"] if i == 0 else "",
                f"{variant['build_s']:.1f} ({variant['build_cpu_s']:.0f})" if i == 0 else "",
                f"{variant['index_rss_mb']:,}" if i == 0 else "",
                f"{variant['library_mb']:,}" if i == 0 else "",
                ef,
            ]
            for name in ("all", *FILTERS):
                part = row[name]
                cells += [f"{part['recall']:.4f}", f"{part['p50_ms']:.2f} / {part['p95_ms']:.2f}"]
            table.add_row(*cells)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=DEFAULT_DIM)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ef", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--data", choices=("clustered", "static"), default="clustered",
        help="static: the latency corpus embedded with the static embedder (256-d; --dim "
        "is ignored), topics from k-means",
    )  # fmt: skip
    parser.add_argument("--pca-sample", type=int, default=PCA_SAMPLE, help="rows the PCA fits")
    parser.add_argument("--m", type=int, default=DEFAULT_M, help="links a graph node keeps")
    parser.add_argument(
        "--ef-construction", type=int, default=DEFAULT_EF_CONSTRUCTION, help="graph build breadth"
    )
    parser.add_argument("--quick", action="store_true", help="a few seconds: smoke test")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global M, EF_CONSTRUCTION  # the graph variants read them; a child is told them as flags
    M, EF_CONSTRUCTION = args.m, args.ef_construction
    if args.child:
        print(json.dumps(measure(Path(args.child[0]), args.child[1], args.ef, args.pca_sample)))
        return 0
    if args.quick:
        args.n, args.queries, args.ef = 5_000, 100, [64]
    console = Console(width=max(Console().width, 170))
    return report(run(args, console), show, console, args.json)


if __name__ == "__main__":
    sys.exit(main())
