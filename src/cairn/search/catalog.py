"""The in-memory vector catalog: every embedded chunk's vector plus its filter columns.

Permission and lifecycle trimming for vector recall happens here as a boolean mask over
numpy columns (acl, scope, status, head, validity, …) computed *before* the dot product's
top-k, so a chunk the reader may not see never takes a slot. The catalog mirrors the
store's ``chunks`` table incrementally through the store's change sequence, which also
picks up writes made by other processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from cairn.store.base import ChunkFilter, ChunkMeta

FloatArray = npt.NDArray[np.float32]
_STATUS_CODES = {"draft": 0, "active": 1, "stale": 2, "rejected": 3, "archived": 4}


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


def _single_threaded_blas() -> None:
    """A matrix-vector product over the catalog is memory-bound; OpenBLAS's threads only
    contend with the server's other work (10x slower under load on 2 cores, measured).
    One thread per product, and concurrency comes from serving requests in parallel."""
    threadpool_limits(limits=1, user_api="blas")


class VectorCatalog:
    def __init__(self, dim: int, *, capacity: int = 1024) -> None:
        _single_threaded_blas()
        self.dim = dim
        self.seq = 0
        self._n = 0
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._acl = np.zeros(capacity, dtype=np.int32)
        self._scope = np.zeros(capacity, dtype=np.int32)
        self._status = np.zeros(capacity, dtype=np.int8)
        self._head = np.zeros(capacity, dtype=bool)
        self._superseded = np.zeros(capacity, dtype=bool)
        self._kind = np.zeros(capacity, dtype=np.int32)
        self._version = np.zeros(capacity, dtype=np.int32)
        self._record = np.zeros(capacity, dtype=np.int32)
        self._valid_from = np.zeros(capacity, dtype=np.float64)
        self._valid_to = np.zeros(capacity, dtype=np.float64)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._row: dict[int, int] = {}
        self._kinds = _Codes()
        self._versions = _Codes()
        self._records = _Codes()
        # chunks seen but not embedded yet, by text hash (the indexer's lag)
        self.pending: dict[str, list[ChunkMeta]] = {}

    def __len__(self) -> int:
        return self._n

    # ---- maintenance ---------------------------------------------------------------------

    def _grow(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        new_capacity = max(needed, capacity * 2)
        for name in (
            "_ids", "_acl", "_scope", "_status", "_head", "_superseded", "_kind", "_version",
            "_record", "_valid_from", "_valid_to", "_created",
        ):  # fmt: skip
            old = getattr(self, name)
            grown = np.zeros(new_capacity, dtype=old.dtype)
            grown[:capacity] = old
            setattr(self, name, grown)
        matrix = np.zeros((new_capacity, self.dim), dtype=np.float32)
        matrix[:capacity] = self._matrix
        self._matrix = matrix

    def _set_columns(self, row: int, meta: ChunkMeta) -> None:
        self._acl[row] = meta.acl_id
        self._scope[row] = meta.scope_id
        self._status[row] = _STATUS_CODES[meta.status]
        self._head[row] = meta.is_head
        self._superseded[row] = meta.superseded
        self._kind[row] = self._kinds.code(meta.kind)
        self._version[row] = self._versions.code(meta.version_id)
        self._record[row] = self._records.code(meta.record_id)
        self._valid_from[row] = _epoch(meta.valid_from, -math.inf)
        self._valid_to[row] = _epoch(meta.valid_to, math.inf)
        self._created[row] = _epoch(meta.created_at, 0.0)

    def apply(self, changes: Sequence[ChunkMeta], vectors: dict[str, FloatArray]) -> None:
        """Apply chunk inserts and state changes; chunks without a vector wait in pending."""
        for meta in changes:
            self.seq = max(self.seq, meta.seq)
            row = self._row.get(meta.id)
            if row is not None:
                self._set_columns(row, meta)
                continue
            vector = vectors.get(meta.text_hash)
            if vector is None:
                waiting = self.pending.setdefault(meta.text_hash, [])
                waiting[:] = [m for m in waiting if m.id != meta.id] + [meta]
                continue
            self._append(meta, vector)

    def add_vectors(self, vectors: dict[str, FloatArray]) -> None:
        """Vectors arrived for pending chunks: move those chunks into the searchable matrix."""
        for text_hash, vector in vectors.items():
            for meta in self.pending.pop(text_hash, []):
                if meta.id not in self._row:
                    self._append(meta, vector)

    def _append(self, meta: ChunkMeta, vector: FloatArray) -> None:
        self._grow(self._n + 1)
        row = self._n
        self._ids[row] = meta.id
        self._matrix[row] = vector
        self._set_columns(row, meta)
        self._row[meta.id] = row
        self._n += 1

    # ---- search ------------------------------------------------------------------------

    def mask(self, where: ChunkFilter) -> npt.NDArray[np.bool_]:
        n = self._n
        keep = np.isin(self._acl[:n], np.fromiter(where.acl_ids, dtype=np.int32))
        statuses = [_STATUS_CODES[s] for s in where.statuses]
        keep &= np.isin(self._status[:n], np.asarray(statuses, dtype=np.int8))
        if where.scope_ids is not None:
            keep &= np.isin(self._scope[:n], np.fromiter(where.scope_ids, dtype=np.int32))
        if where.kinds is not None:
            keep &= np.isin(self._kind[:n], self._kinds.codes(where.kinds))
        if where.version_ids is not None:
            keep &= np.isin(self._version[:n], self._versions.codes(where.version_ids))
        elif where.head_only:
            keep &= self._head[:n]
        if where.record_ids is not None:
            keep &= np.isin(self._record[:n], self._records.codes(where.record_ids))
        if not where.include_superseded:
            keep &= ~self._superseded[:n]
        if where.valid_at is not None:
            at = _epoch(where.valid_at, 0.0)
            keep &= (self._valid_from[:n] <= at) & (self._valid_to[:n] > at)
        if where.created_after is not None:
            keep &= self._created[:n] >= _epoch(where.created_after, 0.0)
        if where.created_before is not None:
            keep &= self._created[:n] < _epoch(where.created_before, 0.0)
        return keep

    def search(self, query: FloatArray, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
        """Top-``k`` chunk ids by cosine similarity among the chunks ``where`` admits."""
        if self._n == 0 or k <= 0:
            return []
        allowed = self.mask(where)
        count = int(allowed.sum())
        if count == 0:
            return []
        # One BLAS product over the whole matrix beats gathering the allowed rows first;
        # disallowed rows are then pushed below any real score before selecting top-k.
        scores = self._matrix[: self._n] @ query.astype(np.float32)
        scores[~allowed] = -np.inf
        take = min(k, count)
        top = np.argpartition(-scores, take - 1)[:take]
        order = top[np.lexsort((self._ids[top], -scores[top]))]
        return [(int(self._ids[i]), float(scores[i])) for i in order]

    def vector_of(self, chunk_id: int) -> FloatArray | None:
        row = self._row.get(chunk_id)
        return None if row is None else self._matrix[row]
