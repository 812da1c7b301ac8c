"""A keyed exact vector index over L2-normalised float32 vectors.

The kernel's vector recall runs on ``cairn.search.catalog`` (which has its own HNSW path);
this small keyed index serves the benchmark study in ``bench/_adapter.py``. Scores are
cosine similarities, higher is better; filters apply before ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "Allowed",
    "ExactVectorIndex",
    "VectorIndex",
]

Allowed = Callable[[str], bool] | set[str] | frozenset[str] | None
"""Which keys a search may return: a predicate, a set of keys, or ``None`` for all."""

FloatArray = npt.NDArray[np.float32]


class VectorIndex(Protocol):
    """What the retrieval pipeline needs from a vector index."""

    @property
    def dim(self) -> int: ...

    def __len__(self) -> int: ...

    def __contains__(self, key: object) -> bool: ...

    def upsert(self, key: str, vector: npt.ArrayLike) -> None: ...

    def remove(self, key: str) -> None: ...

    def search(
        self, query: npt.ArrayLike, k: int, allowed: Allowed = None
    ) -> list[tuple[str, float]]: ...


def _as_matrix(vectors: npt.ArrayLike, dim: int) -> FloatArray:
    """Validate shape and L2-normalise rows, so cosine similarity is a dot product."""
    matrix = np.array(vectors, dtype=np.float32, ndmin=2)
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        raise ValueError(f"expected vectors of dimension {dim}, got shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ValueError("vectors must be finite and non-zero")
    result: FloatArray = matrix / norms
    return result


def _as_vector(vector: npt.ArrayLike, dim: int) -> FloatArray:
    matrix = _as_matrix(vector, dim)
    if matrix.shape[0] != 1:
        raise ValueError("expected a single vector")
    row: FloatArray = matrix[0]
    return row


def _top_k(keys: Sequence[str], scores: FloatArray, k: int) -> list[tuple[str, float]]:
    """Best ``k`` by score; ties broken by key so results do not depend on row order."""
    if k <= 0 or scores.size == 0:
        return []
    if k < scores.size:
        threshold = np.partition(scores, scores.size - k)[scores.size - k]
        # Everything tied with the k-th score competes on key below.
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.arange(scores.size)
    ranked = sorted(candidates.tolist(), key=lambda i: (-float(scores[i]), keys[i]))
    return [(keys[i], float(scores[i])) for i in ranked[:k]]


class ExactVectorIndex:
    """Brute-force index: one float32 matrix, ``scores = X @ q``.

    Rows are kept dense (removal moves the last row into the hole), and the
    matrix grows by doubling so inserts are amortised O(dim).
    """

    def __init__(self, dim: int, *, initial_capacity: int = 1024) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        self._dim = dim
        self._matrix: FloatArray = np.zeros((max(initial_capacity, 1), dim), dtype=np.float32)
        self._keys: list[str] = []
        self._rows: dict[str, int] = {}

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def keys(self) -> list[str]:
        return list(self._keys)

    def add(self, key: str, vector: npt.ArrayLike) -> None:
        """Insert a new key; raises ``KeyError`` if it is already present."""
        if key in self._rows:
            raise KeyError(f"key already present: {key!r}")
        self.upsert(key, vector)

    def upsert(self, key: str, vector: npt.ArrayLike) -> None:
        """Insert ``key`` or replace its vector."""
        self.upsert_many([key], _as_matrix(vector, self._dim))

    def upsert_many(self, keys: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Insert or replace many vectors at once (one row of ``vectors`` per key)."""
        matrix = _as_matrix(vectors, self._dim)
        if matrix.shape[0] != len(keys):
            raise ValueError("need exactly one vector per key")
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate keys in one batch")
        new = sum(1 for key in keys if key not in self._rows)
        self._reserve(len(self._keys) + new)
        for key, row_vector in zip(keys, matrix, strict=True):
            row = self._rows.get(key)
            if row is None:
                row = len(self._keys)
                self._keys.append(key)
                self._rows[key] = row
            self._matrix[row] = row_vector

    def remove(self, key: str) -> None:
        """Delete ``key``; raises ``KeyError`` if absent."""
        row = self._rows.pop(key)
        last = len(self._keys) - 1
        if row != last:
            moved = self._keys[last]
            self._matrix[row] = self._matrix[last]
            self._keys[row] = moved
            self._rows[moved] = row
        self._keys.pop()

    def get(self, key: str) -> FloatArray:
        """The stored (normalised) vector of ``key``; raises ``KeyError`` if absent."""
        row: FloatArray = self._matrix[self._rows[key]].copy()
        return row

    def search(
        self, query: npt.ArrayLike, k: int, allowed: Allowed = None
    ) -> list[tuple[str, float]]:
        """Top ``k`` ``(key, cosine)`` pairs among the allowed keys, best first."""
        q = _as_vector(query, self._dim)
        n = len(self._keys)
        if allowed is None:
            return _top_k(self._keys, self._matrix[:n] @ q, k)
        if isinstance(allowed, (set, frozenset)):
            rows = np.fromiter(
                (self._rows[key] for key in allowed if key in self._rows), dtype=np.intp
            )
        else:
            mask = np.fromiter((allowed(key) for key in self._keys), dtype=bool, count=n)
            rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        rows.sort()
        keys = [self._keys[i] for i in rows.tolist()]
        # Gathering many rows copies most of the matrix; past ~1/8 of the rows it
        # is cheaper to score every row and pick the allowed scores.
        scores = self._matrix[rows] @ q if rows.size * 8 < n else (self._matrix[:n] @ q)[rows]
        return _top_k(keys, scores, k)

    def _reserve(self, needed: int) -> None:
        capacity = self._matrix.shape[0]
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        grown: FloatArray = np.zeros((capacity, self._dim), dtype=np.float32)
        grown[: len(self._keys)] = self._matrix[: len(self._keys)]
        self._matrix = grown
