"""The in-memory vector catalog: every embedded chunk's vector plus its filter columns.

Permission and lifecycle trimming for vector recall happens here as a boolean mask over
numpy columns (acl, scope, status, head, validity, …) computed *before* ranking, so a chunk
the reader may not see never takes a slot. The catalog mirrors the store's ``chunks`` table
incrementally through the store's change sequence, which also picks up writes made by other
processes.

Small catalogs are searched exactly: one BLAS matrix-vector product over a float32 matrix.
Past ``ann_threshold`` rows an hnswlib graph (labels = row numbers) answers instead, filtered
by a callable over the same boolean mask; readers whose allowed set is small are still
answered exactly, because filtered HNSW walks most of the graph to find few allowed nodes.
In ANN mode the catalog keeps an int8 copy of the vectors (one scale per row) for the exact
fallback, a quarter of the memory, and re-scores the few finalists in float32. Where those
float32 vectors come from depends on the graph:

- given ``vectors_of`` (the indexer passes the store's own copy), the graph holds the vectors
  projected onto their ``ann_dims`` main directions (an uncentred PCA fitted when the graph
  is built). Its candidates are narrowed with the int8 copy and the finalists re-read from
  the store in float32, so no float32 copy stays in memory: at 1M rows of 256 dimensions the
  graph takes ~0.65 GB instead of 1.35. When the projected graph cannot reach the recall
  target on held-out rows (vectors with no few main directions), it is built in full instead;
- without it, hnswlib holds the only float32 copy, in full dimension.

``shortlist`` stops short of that re-read and hands back the :class:`Finalists`, so that
the indexer reads them from the store after letting go of its lock.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from hashlib import blake2b
from typing import Any

import hnswlib
import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from cairn.store.base import ChunkFilter, ChunkMeta
from cairn.store.filters import (
    AtLeast,
    Condition,
    Flag,
    HeadReadable,
    In,
    NotAfter,
    StillValid,
    conditions,
)

__all__ = [
    "DEFAULT_ANN_DIMS",
    "DEFAULT_ANN_THRESHOLD",
    "DEFAULT_PARK_LIMIT",
    "BoolArray",
    "CatalogState",
    "Finalists",
    "FloatArray",
    "VectorCatalog",
    "VectorsOf",
]

FloatArray = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]
# Chunk ids -> their stored float32 vectors (those the store holds).
VectorsOf = Callable[[Sequence[int]], dict[int, FloatArray]]
_STATUS_CODES = {"draft": 0, "active": 1, "stale": 2, "rejected": 3, "archived": 4}

DEFAULT_ANN_THRESHOLD = 200_000
# Dimensions of the graph when float32 vectors can be re-read (``vectors_of``). On the static
# embedder's vectors (256-d) a 96-d graph re-scored in full matched the full graph's recall
# at 71% of its memory with M=32 (docs/benchmarks.md); fewer dimensions lost recall.
DEFAULT_ANN_DIMS = 96
# A projected graph is asked for this many candidates beyond k: its scores are estimates,
# so the true top k sit a little deeper in its ranking (8k for k = 10, as measured).
_EXTRA_CANDIDATES = 70
# Rows the projection is fitted on (evenly spaced over those held): a 256-d Gram matrix
# is settled long before this many.
_PROJECTION_SAMPLE = 65_536
# Rows handled per slice when the whole matrix is walked (building, quantising, exact
# neighbours): the transient copies stay small.
_SLICE = 65_536
# A projection is kept when a perfect graph over it would still find this share of the
# held-out rows' true top 10 (re-scored in full): its directions carry the vectors. Static
# embeddings' 96 main directions kept 0.995 of it at 1M (docs/benchmarks.md).
_PROJECTION_RECALL = 0.99
# Chunks waiting for a vector are held as ChunkMeta objects (~700 bytes each); past this many
# the rest are not held but re-read from the store once room frees (see ``rescan_from``). A
# million chunks ingested before the first indexing would otherwise cost ~0.7 GB.
DEFAULT_PARK_LIMIT = 20_000
# Rows appended in ANN mode wait in a small float32 tail (scanned exactly on every search)
# and join the graph in batches: hnswlib inserts far faster many at a time, on all cores.
_TAIL_FLUSH = 2048
# Search breadths tried when calibrating ef, and how many held-out rows measure each.
_EF_LADDER = (64, 100, 150, 200, 300, 400, 600, 800, 1200)
_CALIBRATION_QUERIES = 64
# Re-scoring reads float32 vectors back from hnswlib at ~25 us each (its binding copies row
# by row), so the finalists are capped at 2k + this many. On static embeddings of the bench
# corpus (60k rows) the int8 scan kept every true top-10 and top-50 row among them
# (score error ~9e-4 typical, against bfloat16's ~2e-4).
_RESCORE_MARGIN = 48
# Membership masks kept between searches (see _member_of): 1 MB each at 1M rows.
_MEMBERSHIPS_KEPT = 16
# Rows scanned per block in exact scans of the int8 copy: the float32 widening of a block is
# the only transient (16 MB), however many rows are allowed.
_SCAN_BLOCK = 16_384


# New rows a batch of changes or vectors brings, by chunk id, in the order they join.
_Fresh = dict[int, tuple[ChunkMeta, FloatArray]]

# The catalog's per-row columns (each an array of one value per row).
_ROW_COLUMNS = (
    "_ids", "_acl", "_scope", "_status", "_head", "_superseded", "_kind", "_version",
    "_record", "_valid_from", "_valid_to", "_created", "_source_time", "_source_kind",
)  # fmt: skip


def _quantize(rows: npt.ArrayLike) -> tuple[npt.NDArray[np.int8], FloatArray]:
    """float32 rows -> int8 codes and one scale per row (``row ~ codes * scale``), rounded
    to nearest: each component is off by at most ``scale / 2``, so a score ``q . row`` by
    at most ``scale / 2 * |q|_1``."""
    wide = np.atleast_2d(np.asarray(rows, dtype=np.float32))
    peak = np.abs(wide).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.rint(wide / scale[:, None]).astype(np.int8)
    return codes, scale


def _remembered(
    float32: Callable[[npt.NDArray[np.int64]], FloatArray],
) -> Callable[[npt.NDArray[np.int64]], FloatArray]:
    """``float32``, asked only for rows it was not asked for before."""
    known: dict[int, FloatArray] = {}

    def rows_of(rows: npt.NDArray[np.int64]) -> FloatArray:
        wanted = rows.tolist()
        missing = [row for row in dict.fromkeys(wanted) if row not in known]
        if missing:
            known.update(zip(missing, float32(np.asarray(missing, dtype=np.int64)), strict=True))
        return np.stack([known[row] for row in wanted]) if wanted else float32(rows)

    return rows_of


def _epoch(value: datetime | None, missing: float) -> float:
    if value is None:
        return missing
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class _Codes:
    """Interns strings as small ints so filters become vectorised comparisons."""

    def __init__(self) -> None:
        self.by_value: dict[str, int] = {}

    def code(self, value: str) -> int:
        found = self.by_value.get(value)
        if found is None:
            found = self.by_value[value] = len(self.by_value)
        return found

    def codes(self, values: Iterable[str]) -> npt.NDArray[np.int32]:
        known = [self.by_value[v] for v in values if v in self.by_value]
        return np.asarray(known, dtype=np.int32)


def _member(column: npt.NDArray[Any], wanted: Iterable[int], upper: int) -> BoolArray:
    """``np.isin(column, wanted)`` for small non-negative codes below ``upper``: a lookup
    table indexed by the column is ~2x faster than isin's sort at 1M rows (measured)."""
    table = np.zeros(max(upper, 1), dtype=bool)
    codes = np.fromiter((c for c in wanted if 0 <= c < upper), dtype=np.int64)
    table[codes] = True
    found: BoolArray = table[column]
    return found


def _id_hash(value: str) -> int:
    """A version or record id as a signed 64-bit hash, the same in every process (Python's
    own ``hash`` of a str is salted per process, and a saved catalog is read by another)."""
    return int.from_bytes(blake2b(value.encode(), digest_size=8).digest(), "little", signed=True)


def _hashes(values: Iterable[str]) -> npt.NDArray[np.int64]:
    return np.fromiter((_id_hash(v) for v in values), dtype=np.int64)


def _single_threaded_blas() -> None:
    """A matrix-vector product over the catalog is memory-bound; OpenBLAS's threads only
    contend with the server's other work (10x slower under load on 2 cores, measured).
    One thread per product, and concurrency comes from serving requests in parallel."""
    threadpool_limits(limits=1, user_api="blas")


def _top(scores: FloatArray, rows: npt.NDArray[np.int64], ids: npt.NDArray[np.int64], k: int
         ) -> npt.NDArray[np.int64]:  # fmt: skip
    """Positions of the best ``k`` scores, best first, ties broken by chunk id."""
    take = min(k, scores.size)
    if take <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, take - 1)[:take] if take < scores.size else np.arange(take)
    order: npt.NDArray[np.int64] = top[np.lexsort((ids[rows[top]], -scores[top]))]
    return order


@dataclass(frozen=True)
class Finalists:
    """A search's last few candidates, taken out of the catalog so that scoring them needs
    neither the catalog nor its caller's lock: their chunk ids and float32 vectors, except
    the rows marked ``unread`` (a projected graph keeps no float32 copy), which hold their
    int8 estimate until :meth:`scored` reads them through ``vectors_of``, the catalog's own
    source."""

    query: FloatArray
    k: int
    ids: npt.NDArray[np.int64]
    vectors: FloatArray
    unread: BoolArray
    vectors_of: VectorsOf | None

    def scored(self) -> list[tuple[int, float]]:
        """The best ``k`` by exact cosine, best first (ties by chunk id)."""
        _read_into(self.vectors, self.ids, self.unread, self.vectors_of)
        scores = self.vectors @ self.query
        order = _top(scores, np.arange(self.ids.size), self.ids, self.k)
        return [(int(self.ids[i]), float(scores[i])) for i in order]


def _read_into(
    vectors: FloatArray,
    ids: npt.NDArray[np.int64],
    unread: BoolArray,
    vectors_of: VectorsOf | None,
) -> None:
    """Overwrite the ``unread`` rows of ``vectors`` with the store's float32 vectors of
    their chunks. A vector gone from the store meanwhile keeps its int8 estimate, the best
    left."""
    if vectors_of is None or not unread.any():
        return
    positions = np.flatnonzero(unread)
    wanted = ids[positions].tolist()
    stored = vectors_of(wanted)
    for position, chunk_id in zip(positions.tolist(), wanted, strict=True):
        vector = stored.get(chunk_id)
        if vector is not None:
            vectors[position] = vector


@dataclass
class _Insert:
    """Rows ``[start, stop)`` being added to the graph by ``thread``: how long it took, and
    what it raised."""

    start: int
    stop: int
    thread: threading.Thread = field(init=False)
    seconds: float = 0.0
    error: BaseException | None = None


@dataclass(frozen=True)
class CatalogState:
    """What a catalog holds, to be saved and restored in another process (see
    ``search.catalog_file``): its per-row columns and vectors (``arrays``), its counters and
    codes (``meta``), the settings it was built under (``settings``: a catalog restores only
    under the same) and its HNSW graph, if it has one (an ``hnswlib.Index``)."""

    settings: dict[str, Any]
    meta: dict[str, Any]
    arrays: dict[str, npt.NDArray[Any]]
    graph: Any


class VectorCatalog:
    """Chunk vectors and filter columns, searchable under a :class:`ChunkFilter`.

    ``ann_threshold``: rows above which an HNSW graph answers (0 = always, None = never).
    ``ann_ef``: the graph's search breadth when every row is allowed; a filter admitting a
    fraction ``f`` of rows searches with ``ann_ef / f`` (capped at ``ann_max_ef``), since the
    walk must pass ~1/f nodes per allowed one. (``/ sqrt(f)`` was enough for allowed rows
    spread evenly, but gave recall 0.95 when they were whole topics, as a team's scope is.)
    ``ann_ef=None`` (the default) calibrates it on the catalog's own data: rows not yet in
    the graph serve as held-out queries, the smallest ef on a ladder whose recall@10
    against an exact scan reaches ``ann_target_recall`` is found, and one ladder step more
    is kept; this is redone each time the graph doubles. The ef needed varies ~10x between
    data sets (clustered vectors: 100; static embeddings of random-word text: 1200), so no
    constant fits.
    ``exact_rows`` / ``exact_fraction``: allowed sets smaller than either are scored exactly
    (int8 scan, float32 re-score): filtered HNSW slows down and loses recall there.

    M=32 rather than hnswlib's usual 16: on the random-word corpus M=16 stayed below
    recall 0.98 even at ef=400; M=32 costs 128 bytes a row and builds no slower than
    M=16 with ef_construction=200.

    ``vectors_of``: chunk ids -> their float32 vectors (those it has), from outside the
    catalog. Given it, the graph is built over ``ann_dims`` dimensions (None: all) and
    finalists are re-scored from it (see the module's docstring).
    """

    def __init__(
        self,
        dim: int,
        *,
        capacity: int = 1024,
        ann_threshold: int | None = DEFAULT_ANN_THRESHOLD,
        ann_m: int = 32,
        ann_ef_construction: int = 100,
        ann_ef: int | None = None,
        ann_target_recall: float = 0.995,
        ann_max_ef: int = 1500,
        exact_rows: int = 20_000,
        exact_fraction: float = 0.15,
        ann_threads: int = -1,
        park_limit: int = DEFAULT_PARK_LIMIT,
        ann_dims: int | None = DEFAULT_ANN_DIMS,
        vectors_of: VectorsOf | None = None,
    ) -> None:
        _single_threaded_blas()
        self.dim = dim
        self.seq = 0
        self._n = 0
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._matrix: FloatArray = np.zeros((capacity, dim), dtype=np.float32)
        self._acl = np.zeros(capacity, dtype=np.int32)
        self._scope = np.zeros(capacity, dtype=np.int32)
        self._status = np.zeros(capacity, dtype=np.int8)
        self._head = np.zeros(capacity, dtype=bool)
        self._superseded = np.zeros(capacity, dtype=bool)
        self._kind = np.zeros(capacity, dtype=np.int32)
        # Version and record ids are kept as 64-bit string hashes, not interned: a table of
        # a million distinct ULID strings per column cost ~175 MB at 1M chunks. A hash
        # collision (~1e-13 per query at 1M) could only widen a version/record narrowing
        # among rows the ACL and scope columns already admit, never a permission.
        self._version = np.zeros(capacity, dtype=np.int64)
        self._record = np.zeros(capacity, dtype=np.int64)
        self._valid_from = np.zeros(capacity, dtype=np.float64)
        self._valid_to = np.zeros(capacity, dtype=np.float64)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._source_time = np.zeros(capacity, dtype=np.float64)
        self._source_kind = np.zeros(capacity, dtype=np.int32)
        self._source_kinds = _Codes()
        # Row of each chunk id, -1 for none: chunk ids are the store's dense row ids, so an
        # array indexed by id costs 4 bytes an id where a dict cost ~100 at 1M chunks.
        self._row_of = np.full(capacity, -1, dtype=np.int32)
        self._kinds = _Codes()
        # Largest acl/scope id seen: sizes the membership lookup tables.
        self._acl_upper = 0
        self._scope_upper = 0
        # Rows with a bounded validity interval; when none, `valid_at` filters nothing.
        self._bounded = 0
        # (column, values) -> the rows holding one of values, until a filter column changes
        self._memberships: dict[tuple[str, frozenset[Any]], BoolArray] = {}
        # chunks seen but not embedded yet, by text hash (the indexer's lag)
        self.pending: dict[str, list[ChunkMeta]] = {}
        self.park_limit = park_limit
        self._parked = 0  # ChunkMeta objects held in pending
        # When pending was full, chunks after this change seq were passed over unheld; the
        # indexer re-reads them from here (``rescan``) as room frees. None: nothing skipped.
        self.rescan_from: int | None = None
        # ---- ANN mode ----
        self.ann_threshold = ann_threshold
        self._ann_m = ann_m
        self._ann_ef_construction = ann_ef_construction
        self.ann_ef = ann_ef or _EF_LADDER[0]
        self._calibrate_ef = ann_ef is None
        self.ann_target_recall = ann_target_recall
        self._calibrated_at = 0  # graph size at the last calibration
        self.ann_calibration: list[tuple[int, float]] = []  # (ef, recall) last measured
        self.ann_max_ef = ann_max_ef
        self.exact_rows = exact_rows
        self.exact_fraction = exact_fraction
        self._ann_threads = ann_threads
        self._hnsw: Any = None  # hnswlib.Index once the catalog passes the threshold
        self._ann_dims = ann_dims
        self._vectors_of = vectors_of
        # (graph dimensions, full dimensions): the graph holds rows @ projection.T; None
        # while the graph holds full vectors.
        self._projection: FloatArray | None = None
        # What a perfect graph over the projection found of the held-out rows' top 10, as
        # measured when the graph was built (None: no projection was tried).
        self.projection_recall: float | None = None
        self._indexed = 0  # rows [0, _indexed) are in the graph; the rest is the tail
        # Tail rows being added to the graph in the background (see _flush_tail), if any
        self._insert: _Insert | None = None
        self._insert_error: BaseException | None = None  # of a failed one, not yet raised
        # Rows held when a graph build last failed: the next try waits for a tail's worth
        # more, so that a failure that persists (memory) is not an O(n) build every change
        # (reads mirror the store's changes too).
        self._build_failed_at: int | None = None
        # The indexer serialises searches and writes, but the pipeline's validation calls
        # vector_of outside that lock; hnswlib's get_items must not race resize_index, and
        # the tail must not be swapped mid-read.
        self._graph_lock = threading.Lock()
        # Seconds spent building and extending the graph (what ANN costs the write path),
        # the background inserts' included, though other work goes on beside them.
        self.ann_build_seconds = 0.0
        # ANN mode's int8 copy of the vectors and each row's scale
        self._codes = np.zeros((0, dim), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)
        self._tail: FloatArray = np.zeros((0, dim), dtype=np.float32)  # rows not in the graph

    def __len__(self) -> int:
        return self._n

    # ---- saved and restored ----------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        return {
            "dim": self.dim, "ann_threshold": self.ann_threshold, "ann_m": self._ann_m,
            "ann_dims": self._ann_dims if self._vectors_of is not None else None,
            "ann_ef_construction": self._ann_ef_construction,
            "ann_target_recall": self.ann_target_recall,
        }  # fmt: skip

    @property
    def settled(self) -> bool:
        """Whether every chunk seen is held (none waits for a vector or a re-read): only then
        does ``seq`` say exactly what the catalog holds, so only then is it saved."""
        return not self.pending and self.rescan_from is None

    def state(self) -> CatalogState:
        """What this catalog holds, without copies (views of its arrays: save them before
        the catalog changes again). Only a settled catalog has a state to save."""
        if not self.settled:
            raise ValueError("a catalog with chunks waiting for vectors is not saved")
        self.join_graph(reraise=False)
        n = self._n
        arrays = {name.lstrip("_"): getattr(self, name)[:n] for name in _ROW_COLUMNS}
        if self._hnsw is None:
            arrays["matrix"] = self._matrix[:n]
        else:
            arrays["codes"], arrays["scales"] = self._codes[:n], self._scales[:n]
            arrays["tail"] = self._tail[: n - self._indexed]
            if self._projection is not None:
                arrays["projection"] = self._projection
        meta = {
            "seq": self.seq, "rows": n, "indexed": self._indexed, "ann_ef": self.ann_ef,
            "calibrated_at": self._calibrated_at,
            "calibration": [list(pair) for pair in self.ann_calibration],
            "projection_recall": self.projection_recall,
            "graph_dims": self.graph_dims,
            "kinds": list(self._kinds.by_value), "source_kinds": list(self._source_kinds.by_value),
        }  # fmt: skip
        return CatalogState(self._settings(), meta, arrays, self._hnsw)

    def restore(self, state: CatalogState) -> None:
        """Take over a saved ``state`` (this catalog must be new and built with the same
        settings); it then mirrors the store from the state's ``seq`` on."""
        if self._n or self.seq or self.pending:
            raise ValueError("only a new catalog restores a saved one")
        if state.settings != self._settings():
            raise ValueError("the saved catalog was built with other settings")
        meta, arrays = state.meta, state.arrays
        n = int(meta["rows"])
        holds = "matrix" if state.graph is None else "codes"
        if holds not in arrays:
            raise ValueError("the saved catalog holds neither vectors nor a graph")
        for name in _ROW_COLUMNS:
            column = arrays[name.lstrip("_")]
            if column.shape != (n,) or column.dtype != getattr(self, name).dtype:
                raise ValueError(f"the saved column {name.lstrip('_')} does not fit")
        capacity = max(n, len(self._ids))
        for name in _ROW_COLUMNS:
            column = np.zeros(capacity, dtype=getattr(self, name).dtype)
            column[:n] = arrays[name.lstrip("_")]
            setattr(self, name, column)
        self._n = n
        self.seq = int(meta["seq"])
        ids = self._ids[:n]
        self._row_of = np.full(int(ids.max(initial=0)) + 1, -1, dtype=np.int32)
        self._row_of[ids] = np.arange(n, dtype=np.int32)
        self._kinds.by_value = {v: i for i, v in enumerate(meta["kinds"])}
        self._source_kinds.by_value = {v: i for i, v in enumerate(meta["source_kinds"])}
        self._acl_upper = int(self._acl[:n].max(initial=-1)) + 1
        self._scope_upper = int(self._scope[:n].max(initial=-1)) + 1
        bounded = (self._valid_from[:n] > -math.inf) | (self._valid_to[:n] < math.inf)
        self._bounded = int(bounded.sum())
        self._memberships.clear()
        if state.graph is None:
            self._matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            self._matrix[:n] = arrays["matrix"]
            return
        self._codes = np.zeros((capacity, self.dim), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        self._codes[:n], self._scales[:n] = arrays["codes"], arrays["scales"]
        self._matrix = np.zeros((0, self.dim), dtype=np.float32)
        self._tail = np.array(arrays["tail"], dtype=np.float32)
        self._indexed = int(meta["indexed"])
        projection = arrays.get("projection")
        self._projection = None if projection is None else np.array(projection, np.float32)
        self.projection_recall = meta["projection_recall"]
        self.ann_ef = int(meta["ann_ef"])
        self._calibrated_at = int(meta["calibrated_at"])
        self.ann_calibration = [(int(ef), float(r)) for ef, r in meta["calibration"]]
        self._hnsw = state.graph
        self._hnsw.set_ef(self.ann_ef)

    @property
    def uses_ann(self) -> bool:
        """Whether searches go through the HNSW graph (the catalog passed its threshold)."""
        return self._hnsw is not None

    @property
    def graph_dims(self) -> int | None:
        """Dimensions of the vectors in the graph (None before it is built)."""
        if self._hnsw is None:
            return None
        return self.dim if self._projection is None else len(self._projection)

    # ---- maintenance ---------------------------------------------------------------------

    def _grow(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2)
        for name in _ROW_COLUMNS:
            old = getattr(self, name)
            grown = np.zeros(new_capacity, dtype=old.dtype)
            grown[:capacity] = old
            setattr(self, name, grown)
        if self._hnsw is None:
            matrix = np.zeros((new_capacity, self.dim), dtype=np.float32)
            matrix[:capacity] = self._matrix
            self._matrix = matrix
        else:
            codes = np.zeros((new_capacity, self.dim), dtype=np.int8)
            codes[:capacity] = self._codes
            self._codes = codes
            scales = np.zeros(new_capacity, dtype=np.float32)
            scales[:capacity] = self._scales
            self._scales = scales

    def _set_columns(self, row: int, meta: ChunkMeta) -> None:
        """A held row's columns set to its chunk's new state."""
        self._bounded -= int(self._valid_from[row] > -math.inf or self._valid_to[row] < math.inf)
        self._write_columns(row, [meta])

    def _write_columns(self, start: int, metas: Sequence[ChunkMeta]) -> None:
        """Rows ``start, start + 1, ...`` set to ``metas``' states, a column at a time (a new
        row's columns, or a held row's once ``_set_columns`` has taken its old validity out
        of the count of bounded rows)."""
        self._memberships.clear()  # a filter column changes
        count = len(metas)
        rows = slice(start, start + count)

        def column(values: Iterable[Any], dtype: npt.DTypeLike) -> npt.NDArray[Any]:
            return np.fromiter(values, dtype=dtype, count=count)

        acl = column((m.acl_id for m in metas), np.int32)
        scope = column((m.scope_id for m in metas), np.int32)
        self._acl[rows], self._scope[rows] = acl, scope
        self._acl_upper = max(self._acl_upper, int(acl.max()) + 1)
        self._scope_upper = max(self._scope_upper, int(scope.max()) + 1)
        self._status[rows] = column((_STATUS_CODES[m.status] for m in metas), np.int8)
        self._head[rows] = column((m.is_head for m in metas), bool)
        self._superseded[rows] = column((m.superseded for m in metas), bool)
        self._kind[rows] = column((self._kinds.code(m.kind) for m in metas), np.int32)
        self._version[rows] = column((_id_hash(m.version_id) for m in metas), np.int64)
        self._record[rows] = column((_id_hash(m.record_id) for m in metas), np.int64)
        self._valid_from[rows] = column((_epoch(m.valid_from, -math.inf) for m in metas), float)
        self._valid_to[rows] = column((_epoch(m.valid_to, math.inf) for m in metas), float)
        self._bounded += sum(m.valid_from is not None or m.valid_to is not None for m in metas)
        self._created[rows] = column((_epoch(m.created_at, 0.0) for m in metas), float)
        # a chunk with no source time is in no time range (NaN compares false), as in SQL
        self._source_time[rows] = column((_epoch(m.source_time, math.nan) for m in metas), float)
        self._source_kind[rows] = column(
            (self._source_kinds.code(m.source_kind) for m in metas), np.int32
        )

    def row_of(self, chunk_id: int) -> int | None:
        """The catalog row holding ``chunk_id``, or None."""
        if not 0 <= chunk_id < len(self._row_of):
            return None
        row = int(self._row_of[chunk_id])
        return row if row >= 0 else None

    @property
    def parked(self) -> int:
        """Chunks held in ``pending`` (not counting those left for a rescan)."""
        return self._parked

    def apply(self, changes: Sequence[ChunkMeta], vectors: dict[str, FloatArray]) -> None:
        """Apply chunk inserts and state changes; chunks without a vector wait in pending
        (or, when it is full, are left for a rescan)."""
        fresh: _Fresh = {}
        for meta in changes:
            self.seq = max(self.seq, meta.seq)
            self._take(meta, vectors, fresh)
        self._append_many(fresh)
        self._maintain_ann()

    def rescan(self, changes: Sequence[ChunkMeta], vectors: dict[str, FloatArray]) -> None:
        """Apply ``changes`` re-read from the store after ``rescan_from``, in seq order and
        ending on a whole seq group. They are the store's current state, so re-applying one
        already applied is harmless; ``seq`` is not advanced (changes past it are the next
        sync's). The cursor moves to the first chunk passed over again, past the batch, or
        is cleared once the re-read reached ``seq``."""
        start = self.rescan_from
        if start is None:
            return
        self.rescan_from = None
        last = start
        fresh: _Fresh = {}
        for meta in changes:
            if meta.seq > self.seq:
                break  # caught up with the sync cursor
            # A chunk passed over again sets rescan_from just before its seq.
            self._take(meta, vectors, fresh)
            last = meta.seq
        else:
            if self.rescan_from is None and changes and last < self.seq:
                # More to re-read after this batch (which ends on a whole seq group).
                self.rescan_from = last
        self._append_many(fresh)
        self._maintain_ann()

    def _take(
        self,
        meta: ChunkMeta,
        vectors: dict[str, FloatArray],
        fresh: _Fresh,
    ) -> None:
        """Take in one change: a held row's new state, or a new row, put in ``fresh`` for the
        caller to append once it has taken in the whole batch."""
        taken = fresh.get(meta.id)
        if taken is not None:  # a new row's later state (a store's batch names a chunk once)
            fresh[meta.id] = (meta, taken[1])
            return
        row = self.row_of(meta.id)
        if row is not None:
            self._set_columns(row, meta)
            return
        vector = vectors.get(meta.text_hash)
        if vector is not None:
            self._drop_pending(meta)
            fresh[meta.id] = (meta, vector)
            return
        waiting = self.pending.get(meta.text_hash)
        if waiting is not None and any(m.id == meta.id for m in waiting):
            # A state change while pending replaces the waiting copy.
            waiting[:] = [m for m in waiting if m.id != meta.id] + [meta]
            return
        if self._parked >= self.park_limit:
            if self.rescan_from is None or meta.seq - 1 < self.rescan_from:
                self.rescan_from = meta.seq - 1
            return
        self.pending.setdefault(meta.text_hash, []).append(meta)
        self._parked += 1

    def _drop_pending(self, meta: ChunkMeta) -> None:
        waiting = self.pending.get(meta.text_hash)
        if waiting is None:
            return
        kept = [m for m in waiting if m.id != meta.id]
        self._parked -= len(waiting) - len(kept)
        if kept:
            waiting[:] = kept
        else:
            del self.pending[meta.text_hash]

    def add_vectors(self, vectors: dict[str, FloatArray]) -> None:
        """Vectors arrived for pending chunks: move those chunks into the searchable matrix."""
        fresh: _Fresh = {}
        for text_hash, vector in vectors.items():
            waiting = self.pending.pop(text_hash, [])
            self._parked -= len(waiting)
            for meta in waiting:
                if self.row_of(meta.id) is None:
                    fresh.setdefault(meta.id, (meta, vector))
        self._append_many(fresh)
        self._maintain_ann()

    def _append_many(self, fresh: _Fresh) -> None:
        """Append new rows (chunks not held, by chunk id) at the end, in ``fresh``'s order,
        column by column: a catch-up appends thousands at a time, and row by row the numpy
        calls per row cost more than the rows (~13 us a row, ~30 with the int8 copy)."""
        count = len(fresh)
        if count == 0:
            return
        self._grow(self._n + count)
        start, stop = self._n, self._n + count
        metas = [meta for meta, _ in fresh.values()]
        vectors = np.stack([vector for _, vector in fresh.values()]).astype(np.float32, copy=False)
        ids = np.fromiter((meta.id for meta in metas), dtype=np.int64, count=count)
        self._ids[start:stop] = ids
        if self._hnsw is None:
            self._matrix[start:stop] = vectors
        else:
            self._codes[start:stop], self._scales[start:stop] = _quantize(vectors)
            tail = stop - self._indexed
            if tail > len(self._tail):
                grown = np.zeros((max(64, 2 * len(self._tail), tail), self.dim), np.float32)
                grown[: len(self._tail)] = self._tail
                self._tail = grown
            self._tail[start - self._indexed : tail] = vectors
        self._write_columns(start, metas)
        top = int(ids.max())
        if top >= len(self._row_of):
            rows = np.full(max(top + 1, 2 * len(self._row_of)), -1, dtype=np.int32)
            rows[: len(self._row_of)] = self._row_of
            self._row_of = rows
        self._row_of[ids] = np.arange(start, stop, dtype=np.int32)
        self._n = stop

    def _maintain_ann(self) -> None:
        """Build the graph when the catalog passes the threshold; move a full tail into it."""
        if self._hnsw is None:
            if self.ann_threshold is None or self._n <= self.ann_threshold:
                return
            failed_at = self._build_failed_at
            if failed_at is not None and self._n - failed_at < _TAIL_FLUSH:
                return
            try:
                self._build_ann()
            except BaseException:
                self._build_failed_at = self._n
                self._abandon_build()
                raise
            self._build_failed_at = None
            return
        if self._n - self._indexed >= _TAIL_FLUSH:
            self._flush_tail()

    def _abandon_build(self) -> None:
        """What a failed build made, let go of: a graph short of rows must not be searched
        as if it held them all, and the int8 copy and projection serve only a graph. The
        catalog stays exact (the matrix still has every row) until a build succeeds."""
        self._hnsw = self._projection = self.projection_recall = None
        self._codes = np.zeros((0, self.dim), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)

    def _build_ann(self) -> None:
        started = time.perf_counter()
        # The int8 copy first: a projected graph's candidates are re-scored with it, the
        # calibration below included.
        capacity = len(self._ids)
        self._codes = np.zeros((capacity, self.dim), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        for start in range(0, self._n, _SLICE):
            stop = min(self._n, start + _SLICE)
            self._codes[start:stop], self._scales[start:stop] = _quantize(self._matrix[start:stop])
        eligible = (
            self._vectors_of is not None
            and self._ann_dims is not None
            and self._ann_dims < self.dim
            and self._n > 4 * self._ann_dims
        )
        # The newest rows stay out of the graph at first: they are the held-out queries
        # that calibrate ef (see _calibrate) and test a projection, then join like any tail.
        calibrating = self._calibrate_ef or eligible
        held = min(_CALIBRATION_QUERIES, self._n // 4) if calibrating else 0
        built = self._n - held
        matrix = self._matrix
        queries = matrix[built : self._n]
        truth = (
            self._true_neighbours(queries, built, lambda a, b: matrix[a:b], 10)
            if held
            else np.zeros((0, 10), dtype=np.int64)
        )
        self._projection = None
        if eligible and held:
            projection = self._fitted_projection(built)
            self.projection_recall = self._projection_recall(projection, queries, truth, built)
            if self.projection_recall >= _PROJECTION_RECALL:
                self._projection = projection
        self._hnsw = self._graph_of(built)
        if held:
            if self._calibrate_ef:
                self._calibrate(queries, truth, matrix.__getitem__)
            self._hnsw.add_items(
                self._graph_rows(queries), np.arange(built, self._n), num_threads=self._ann_threads
            )
        # hnswlib (or the store, through vectors_of) now holds the float32 vectors; the
        # catalog's own float32 copy goes, at once for vector_of (which reads outside the
        # indexer's lock and takes the matrix while it is there).
        with self._graph_lock:
            self._matrix = np.zeros((0, self.dim), dtype=np.float32)
            self._tail = np.zeros((0, self.dim), dtype=np.float32)
            self._indexed = self._n
        self.ann_build_seconds += time.perf_counter() - started

    def _fitted_projection(self, rows: int) -> FloatArray:
        """The ``ann_dims`` main directions of rows ``[0, rows)`` (evenly spaced sample):
        eigenvectors of ``X^T X``, uncentred. Centring would drop the mean's direction,
        which carries most of ``q . x`` when embeddings share a large common component (the
        static embedder's rows), and leave rows of uneven length around the origin, where an
        inner-product graph navigates badly (recall@10 ~0.1 measured)."""
        assert self._ann_dims is not None
        sample = self._matrix[: rows : max(1, rows // _PROJECTION_SAMPLE)]
        gram = (sample.T @ sample).astype(np.float64)
        _, eigenvectors = np.linalg.eigh(gram)  # ascending eigenvalues
        top = eigenvectors[:, ::-1][:, : self._ann_dims].T
        projection: FloatArray = np.ascontiguousarray(top, dtype=np.float32)
        return projection

    def _projection_recall(
        self,
        projection: FloatArray,
        queries: FloatArray,
        truth: npt.NDArray[np.int64],
        rows: int,
    ) -> float:
        """Recall@k of a perfect graph over the projected rows ``[0, rows)``: each query's
        exact top candidates by projected score, re-scored as a search re-scores them,
        against ``truth`` (exact top-k in full). What the projection alone loses, apart
        from the graph's own misses, which the ef calibration deals with."""
        k = truth.shape[1]
        matrix = self._matrix
        candidates = self._true_neighbours(
            queries @ projection.T, rows, lambda a, b: matrix[a:b] @ projection.T,
            k + _EXTRA_CANDIDATES,
        )  # fmt: skip
        hits = 0
        for q, found, expected in zip(queries, candidates, truth, strict=True):
            best, _ = self._best_rows(q, found, k, matrix.__getitem__)
            hits += len(set(best.tolist()) & set(expected.tolist()))
        return hits / max(1, truth.size)

    def _graph_rows(self, rows: FloatArray) -> FloatArray:
        """``rows`` as the graph holds them."""
        if self._projection is None:
            return rows
        projected: FloatArray = rows @ self._projection.T
        return projected

    def _graph_of(self, rows: int) -> Any:
        """A graph over rows ``[0, rows)`` of the float32 matrix."""
        dims = self.dim if self._projection is None else len(self._projection)
        index: Any = hnswlib.Index(space="ip", dim=dims)
        index.init_index(
            max_elements=len(self._ids),
            ef_construction=self._ann_ef_construction,
            M=self._ann_m,
            random_seed=100,
        )
        # In slices, so the transient copies (the projection, hnswlib's binding) stay small.
        for start in range(0, rows, _SLICE):
            stop = min(rows, start + _SLICE)
            index.add_items(
                self._graph_rows(self._matrix[start:stop]),
                np.arange(start, stop),
                num_threads=self._ann_threads,
            )
        return index

    def _flush_tail(self) -> None:
        self.join_graph()  # one insert at a time, and the calibration below reads the graph
        count = self._n - self._indexed
        if count == 0:
            return
        started = time.perf_counter()
        if self._calibrate_ef and self._indexed >= 2 * self._calibrated_at:
            # Candidates from the int8 copy, truth from re-scoring them in float32:
            # embeddings of similar texts sit within a few 1e-4 of each other, and a
            # bfloat16 truth (error ~2e-4) measured recall ~0.85 where it was 0.99 (then
            # chose the largest ef on the ladder).
            queries = self._tail[: min(count, _CALIBRATION_QUERIES)]
            candidates = self._true_neighbours(
                queries,
                self._indexed,
                lambda start, stop: self._dequantized(slice(start, stop)),
                10 + _RESCORE_MARGIN,
            )
            exact = np.einsum(
                "qcd,qd->qc",
                self._float32_rows(candidates.ravel()).reshape(*candidates.shape, self.dim),
                queries,
            )
            best = np.argsort(-exact, axis=1, kind="stable")[:, :10]
            self._calibrate(queries, np.take_along_axis(candidates, best, 1), self._float32_rows)
        with self._graph_lock:
            if int(self._hnsw.get_max_elements()) < self._n:
                self._hnsw.resize_index(len(self._ids))
        # The rows join the graph in a thread of their own, and stay in the tail (searched
        # exactly) until ``join_graph`` takes them out: hnswlib inserts outside the
        # interpreter, so on two cores the caller's next rows (the model, the store's reads,
        # the columns: one core's work) are made meanwhile instead of after. A 1M-row index
        # build took 304 s with the inserts in line (134 s of it in them), 242 s so.
        rows = np.array(self._graph_rows(self._tail[:count]), dtype=np.float32)
        insert = _Insert(self._indexed, self._n)
        insert.thread = threading.Thread(
            target=self._insert_rows, args=(insert, rows), name="cairn-graph"
        )
        self.ann_build_seconds += time.perf_counter() - started
        insert.thread.start()  # before it is recorded: one that cannot start is never joined
        self._insert = insert

    def _insert_rows(self, insert: _Insert, rows: FloatArray) -> None:
        """Add ``rows`` to the graph as rows ``insert.start`` on (the insert's thread). The
        graph lock keeps ``vector_of``'s reads of the graph out meanwhile; searches and
        every other use of the graph wait for the insert first (``join_graph``)."""
        started = time.perf_counter()
        labels = np.arange(insert.start, insert.stop)
        try:
            with self._graph_lock:
                try:
                    self._hnsw.add_items(rows, labels, num_threads=self._ann_threads)
                except BaseException:
                    self._drop_from_graph(labels)
                    raise
        except BaseException as exc:  # handed to the caller's thread by join_graph
            insert.error = exc
        insert.seconds = time.perf_counter() - started

    def _drop_from_graph(self, labels: npt.NDArray[np.int64]) -> None:
        """Take out of the graph whichever of ``labels`` a failed insert had put in: those
        rows stay in the tail until a later flush, and a row both in the graph and in the
        tail would be answered twice (or, under a filter, be asked about beyond its mask).
        hnswlib adds a deleted label back when it is inserted again (one whose own insert
        was complete: a label left half-linked by an allocation failing inside hnswlib is
        beyond repair here, as it was before)."""
        for label in labels.tolist():
            try:
                self._hnsw.mark_deleted(label)
            except RuntimeError:  # never got in
                continue

    def graph_settles_within(self, seconds: float) -> bool:
        """Whether the rows being added to the graph (if any) are in it within ``seconds``
        (then joined, as ``join_graph`` does, never raising); False: the insert still runs,
        and a search now would wait for it."""
        insert = self._insert
        if insert is None:
            return True
        insert.thread.join(timeout=max(0.0, seconds))
        if insert.thread.is_alive():
            return False
        self.join_graph(reraise=False)
        return True

    def join_graph(self, *, reraise: bool = True) -> None:
        """Wait for the rows being added to the graph, then search them there rather than in
        the tail. Called, like every method that changes the catalog, by the caller that
        changes it (the indexer, under its lock), before anything uses the graph. An insert
        that failed leaves its rows in the tail (the next flush tries them again) and its
        error for the next call with ``reraise`` (a flush's, a catch-up's), never a read's."""
        insert = self._insert
        if insert is not None:
            insert.thread.join()
            self._insert = None
            self.ann_build_seconds += insert.seconds
            if insert.error is None:
                self._joined(insert)
            else:
                self._insert_error = insert.error
        if reraise and self._insert_error is not None:
            failed, self._insert_error = self._insert_error, None
            raise failed

    def _joined(self, insert: _Insert) -> None:
        """``insert``'s rows are in the graph: out of the tail with them."""
        with self._graph_lock:
            done = insert.stop - self._indexed
            self._tail = self._tail[done:].copy()
            self._indexed = insert.stop

    def _true_neighbours(
        self, queries: FloatArray, rows: int, block: Callable[[int, int], FloatArray], k: int
    ) -> npt.NDArray[np.int64]:
        """Exact top-``k`` rows among ``[0, rows)`` for each query, scanning ``block(start,
        stop)`` slices so the score matrix never holds more than one slice."""
        k = min(k, rows)
        best_rows = np.zeros((len(queries), 0), dtype=np.int64)
        best_scores = np.zeros((len(queries), 0), dtype=np.float32)
        for start in range(0, rows, _SLICE):
            stop = min(rows, start + _SLICE)
            scores = queries @ block(start, stop).T  # (queries, slice)
            take = min(k, stop - start)
            top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
            best_rows = np.concatenate([best_rows, top + start], axis=1)
            best_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, 1)], 1)
            keep = np.argpartition(-best_scores, min(k, best_scores.shape[1]) - 1, axis=1)[:, :k]
            best_rows = np.take_along_axis(best_rows, keep, 1)
            best_scores = np.take_along_axis(best_scores, keep, 1)
        return best_rows

    def _calibrate(
        self,
        queries: FloatArray,
        truth: npt.NDArray[np.int64],
        float32: Callable[[npt.NDArray[np.int64]], FloatArray],
    ) -> None:
        """Set ``ann_ef`` to the smallest ladder value whose recall@k for ``queries`` (rows
        not in the graph) against their ``truth`` (exact top-k graph rows) reaches the
        target. A projected graph is measured as it answers: its candidates re-scored,
        the finalists' float32 rows from ``float32``."""
        k = truth.shape[1]
        float32 = _remembered(float32)  # the ladder asks for the same finalists again
        measured: list[tuple[int, float]] = []
        for ef in _EF_LADDER:
            if ef > self.ann_max_ef:
                break
            self._hnsw.set_ef(max(ef, k))
            labels = self._graph_top(queries, k, float32)
            hits = [
                len(set(t.tolist()) & set(f.tolist())) for t, f in zip(truth, labels, strict=True)
            ]
            recall = sum(hits) / (k * len(hits))
            measured.append((ef, round(recall, 4)))
            if recall >= self.ann_target_recall:
                break
        # Short of the target, recall usually plateaus: a few nodes the graph cannot reach
        # (hnswlib's neighbour pruning strands some) stay missed at any ef, so take the
        # smallest ef within noise of the best seen rather than the most expensive one.
        best = max(recall for _, recall in measured)
        goal = min(self.ann_target_recall, best - 1.0 / (k * len(truth)))
        found = next(i for i, (_, recall) in enumerate(measured) if recall >= goal)
        # One ladder step of headroom: 64 held-out rows are a small sample (on clustered
        # data ef=100 measured 0.997 on them and 0.990 on 200 fresh queries).
        ladder = [ef for ef in _EF_LADDER if ef <= self.ann_max_ef]
        self.ann_ef = ladder[min(found + 1, len(ladder) - 1)]
        self.ann_calibration = measured
        self._calibrated_at = max(1, int(self._hnsw.get_current_count()))

    def _graph_top(
        self, queries: FloatArray, k: int, float32: Callable[[npt.NDArray[np.int64]], FloatArray]
    ) -> npt.NDArray[np.int64]:
        """The graph's top-``k`` rows for each of ``queries``, unfiltered, as a search
        would answer them at the current ef."""
        if self._projection is None:
            labels, _ = self._hnsw.knn_query(queries, k=k, num_threads=1)
            return np.asarray(labels, dtype=np.int64)
        wanted = min(k + _EXTRA_CANDIDATES, int(self._hnsw.get_current_count()))
        labels, _ = self._hnsw.knn_query(self._graph_rows(queries), k=wanted, num_threads=1)
        return np.asarray(
            [
                self._best_rows(q, rows.astype(np.int64), k, float32)[0]
                for q, rows in zip(queries, labels, strict=True)
            ],
            dtype=np.int64,
        )

    # ---- search ------------------------------------------------------------------------

    def mask(self, where: ChunkFilter) -> BoolArray:
        """The rows ``where`` admits: ``store.filters``' conditions, as numpy."""
        keep = np.ones(self._n, dtype=bool)
        for condition in conditions(where):
            keep &= self._passes(condition)
        return keep

    def _passes(self, cond: Condition) -> BoolArray:
        n = self._n
        if isinstance(cond, In):
            return self._member_of(cond.column, cond.values)
        if isinstance(cond, Flag):
            flags = {"is_head": self._head, "superseded": self._superseded}[cond.column][:n]
            return flags.copy() if cond.value else ~flags
        if isinstance(cond, HeadReadable):
            # Rows of a head are here once embedded; a record whose head is not yet is left
            # out meanwhile (never let in).
            heads = self._head[:n] & self._member_of("acl_id", cond.acl_ids)
            return self._head[:n] | np.isin(self._record[:n], self._record[:n][heads])
        times = {
            "valid_from": self._valid_from,
            "valid_to": self._valid_to,
            "created_at": self._created,
            "source_time": self._source_time,
        }[cond.column][:n]
        at = _epoch(cond.at, 0.0)
        if isinstance(cond, NotAfter | StillValid) and self._bounded == 0:
            return np.ones(n, dtype=bool)  # no row has a bounded validity interval
        if isinstance(cond, NotAfter):
            return times <= at  # unset starts are stored as -inf
        if isinstance(cond, StillValid):
            return times > at  # unset ends are stored as +inf
        if isinstance(cond, AtLeast):
            return times >= at
        return times < at

    def _member_of(self, column: str, values: frozenset[Any]) -> BoolArray:
        """Rows whose ``column`` is one of ``values``. Kept until a filter column next
        changes: one reader's ACLs, scopes and states are the same from query to query,
        and at 1M rows each of these masks costs ~2 ms to compute."""
        key = (column, values)
        found = self._memberships.get(key)
        if found is None:
            if len(self._memberships) >= _MEMBERSHIPS_KEPT:
                self._memberships.pop(next(iter(self._memberships)))
            found = self._memberships[key] = self._computed_member_of(column, values)
        # A copy: mask() narrows what it is given in place.
        return found.copy()

    def _computed_member_of(self, column: str, values: frozenset[Any]) -> BoolArray:
        n = self._n
        if column == "acl_id":
            return _member(self._acl[:n], values, self._acl_upper)
        if column == "scope_id":
            return _member(self._scope[:n], values, self._scope_upper)
        if column == "status":
            codes = [_STATUS_CODES[s] for s in values if s in _STATUS_CODES]
            return _member(self._status[:n], codes, len(_STATUS_CODES))
        if column == "kind":
            kinds = self._kinds.codes(values).tolist()
            return _member(self._kind[:n], kinds, len(self._kinds.by_value))
        if column == "source_kind":
            codes = self._source_kinds.codes(values).tolist()
            return _member(self._source_kind[:n], codes, len(self._source_kinds.by_value))
        hashed = {"version_id": self._version, "record_id": self._record}[column][:n]
        return np.isin(hashed, _hashes(values))

    def search(self, query: FloatArray, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
        """Top-``k`` chunk ids by cosine similarity among the chunks ``where`` admits."""
        found = self.shortlist(query, where, k)
        return found.scored() if isinstance(found, Finalists) else found

    def shortlist(
        self, query: FloatArray, where: ChunkFilter, k: int
    ) -> list[tuple[int, float]] | Finalists:
        """What :meth:`search` answers, or the :class:`Finalists` it would score: a caller
        that serialises searches and writes (the indexer) scores them after letting go of
        its lock, so that reading their vectors from the store never holds other searches
        up."""
        if self._n == 0 or k <= 0:
            return []
        allowed = self.mask(where)
        count = int(allowed.sum())
        if count == 0:
            return []
        q = np.asarray(query, dtype=np.float32)
        if self._hnsw is None:
            return self._exact_full(q, allowed, count, k)
        self.join_graph(reraise=False)  # hnswlib must not search while it inserts
        if count < max(self.exact_rows, self.exact_fraction * self._n):
            return self._finalists(q, np.flatnonzero(allowed), k)
        return self._ann(q, allowed, k)

    def _exact_full(
        self, q: FloatArray, allowed: BoolArray, count: int, k: int
    ) -> list[tuple[int, float]]:
        # One BLAS product over the whole matrix beats gathering the allowed rows first;
        # disallowed rows are then pushed below any real score before selecting top-k.
        scores = self._matrix[: self._n] @ q
        scores[~allowed] = -np.inf
        rows = np.arange(self._n)
        order = _top(scores, rows, self._ids, min(k, count))
        return [(int(self._ids[i]), float(scores[i])) for i in order]

    def _float32_rows(self, rows: npt.NDArray[np.int64]) -> FloatArray:
        """Exact float32 vectors of ``rows`` in ANN mode: from the tail, and from the graph
        or (a projected graph) ``vectors_of``."""
        vectors, unread = self._held_rows(rows)
        _read_into(vectors, self._ids[rows], unread, self._vectors_of)
        return vectors

    def _held_rows(self, rows: npt.NDArray[np.int64]) -> tuple[FloatArray, BoolArray]:
        """The float32 vectors of ``rows`` the catalog holds (the tail's, a full graph's),
        and which rows a projected graph holds none for: those get their int8 estimate,
        marked unread."""
        out = np.empty((rows.size, self.dim), dtype=np.float32)
        unread = np.zeros(rows.size, dtype=np.bool_)
        with self._graph_lock:
            in_graph = rows < self._indexed
            if (~in_graph).any():
                out[~in_graph] = self._tail[rows[~in_graph] - self._indexed]
            if not in_graph.any():
                return out, unread
            if self._projection is None:
                found = self._hnsw.get_items(rows[in_graph].tolist())
                out[in_graph] = np.asarray(found, dtype=np.float32)
                return out, unread
        out[in_graph] = self._dequantized(rows[in_graph])
        return out, in_graph

    def _dequantized(self, rows: slice | npt.NDArray[np.int64]) -> FloatArray:
        """``rows`` of the int8 copy (a range or row numbers), widened back to float32."""
        widened: FloatArray = self._codes[rows].astype(np.float32)
        widened *= self._scales[rows, None]
        return widened

    def _finalists(self, q: FloatArray, rows: npt.NDArray[np.int64], k: int) -> Finalists:
        """Exact top-k over ``rows`` in ANN mode, up to the re-score: the int8 scan's
        finalists, with the float32 vectors held for them."""
        finalists = rows[self._narrowed(q, rows, k)]
        vectors, unread = self._held_rows(finalists)
        return Finalists(q, k, self._ids[finalists], vectors, unread, self._vectors_of)

    def _best_rows(
        self,
        q: FloatArray,
        rows: npt.NDArray[np.int64],
        k: int,
        float32: Callable[[npt.NDArray[np.int64]], FloatArray],
    ) -> tuple[npt.NDArray[np.int64], FloatArray]:
        """The best ``k`` of ``rows`` and their exact scores, best first: int8 scan, then
        the finalists' float32 rows from ``float32``."""
        finalists = rows[self._narrowed(q, rows, k)]
        scores = float32(finalists) @ q
        order = _top(scores, finalists, self._ids, k)
        return finalists[order], scores[order]

    def _narrowed(
        self, q: FloatArray, rows: npt.NDArray[np.int64], k: int
    ) -> npt.NDArray[np.int64]:
        """Positions in ``rows`` that may hold the true top ``k``, by the int8 copy's scores
        and their error bounds."""
        approx = np.empty(rows.size, dtype=np.float32)
        for start in range(0, rows.size, _SCAN_BLOCK):
            block = rows[start : start + _SCAN_BLOCK]
            approx[start : start + block.size] = self._codes[block].astype(np.float32) @ q
        approx *= self._scales[rows]
        best = _top(approx, rows, self._ids, 2 * k + _RESCORE_MARGIN)
        # A row whose approximate score trails the k-th by more than the two rows' error
        # bounds cannot be in the true top k; the rest are re-scored exactly.
        kth = approx[best[min(k, best.size) - 1]]
        slack = 0.5 * float(np.abs(q).sum()) * 1.01
        bound = slack * self._scales[rows[best]]
        narrowed: npt.NDArray[np.int64] = best[approx[best] >= kth - bound - float(bound.max())]
        return narrowed

    def _ann(
        self, q: FloatArray, allowed: BoolArray, k: int
    ) -> list[tuple[int, float]] | Finalists:
        indexed = self._indexed
        in_graph = allowed[:indexed]
        tail_rows = np.flatnonzero(allowed[indexed:]) + indexed
        count = int(in_graph.sum())
        found: list[tuple[int, float]] = []
        if count:
            fraction = count / indexed
            ef = max(k, min(self.ann_max_ef, math.ceil(self.ann_ef / fraction)))
            wanted = min(count, k if self._projection is None else k + _EXTRA_CANDIDATES)
            self._hnsw.set_ef(max(ef, wanted))
            # The filter reads the same mask: hnswlib only admits allowed labels to its
            # result set, so a disallowed row never takes a top-k slot.
            admit: Callable[[int], bool] | None = None if count == indexed else in_graph.__getitem__
            try:
                labels, distances = self._hnsw.knn_query(
                    self._graph_rows(q), k=wanted, num_threads=1, filter=admit
                )
            except RuntimeError:
                # hnswlib found fewer than k allowed nodes within ef (allowed rows far
                # from the query's neighbourhood): answer exactly rather than short.
                return self._finalists(q, np.flatnonzero(allowed), k)
            if self._projection is not None:
                # Estimated scores: re-score the candidates, with the tail's allowed rows.
                candidates = np.concatenate([labels[0].astype(np.int64), tail_rows])
                return self._finalists(q, candidates, k)
            # "ip" distance is 1 - dot, so this is the same cosine the exact path reports.
            found = [
                (int(self._ids[label]), 1.0 - float(dist))
                for label, dist in zip(labels[0], distances[0], strict=True)
            ]
        if tail_rows.size:
            scores = self._tail[tail_rows - indexed] @ q
            found += [
                (int(self._ids[row]), float(score))
                for row, score in zip(tail_rows.tolist(), scores.tolist(), strict=True)
            ]
        found.sort(key=lambda hit: (-hit[1], hit[0]))
        return found[:k]

    def vector_of(self, chunk_id: int) -> FloatArray | None:
        row = self.row_of(chunk_id)
        if row is None:
            return None
        with self._graph_lock:
            # Below the threshold, and while the graph is being built, the matrix has it.
            if row < len(self._matrix):
                held: FloatArray = self._matrix[row].copy()
                return held
        vector: FloatArray = self._float32_rows(np.asarray([row], dtype=np.int64))[0]
        return vector
