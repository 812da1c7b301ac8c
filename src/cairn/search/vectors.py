"""Vector indexes over L2-normalised float32 vectors keyed by string ids.

Two implementations share one shape (:class:`VectorIndex`): :class:`ExactVectorIndex`
(numpy brute force; exact, ~10 ms for 100k x 384) and :class:`HnswVectorIndex`
(hnswlib graph; ~0.5 ms at recall@10 ~0.99). Scores are cosine similarities,
higher is better. Permission filters are applied inside the search, before
ranking, so a vector the caller may not see never takes a top-k slot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import hnswlib
import numpy as np
import numpy.typing as npt

__all__ = [
    "Allowed",
    "ExactVectorIndex",
    "HnswVectorIndex",
    "VectorIndex",
    "measure_recall_at_k",
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


class HnswVectorIndex:
    """Approximate index on hnswlib (cosine space).

    Integer labels map to string keys here. Removal marks the element deleted
    and its slot is reused by later inserts (``allow_replace_deleted``), so
    churn does not grow the index. Filtered searches whose allowed set is small
    (``exact_below`` keys) are answered exactly from the stored vectors: when few
    nodes pass the filter hnswlib explores much of the graph through a Python
    callback (~10 ms at 1% of 20k), while fetching a few hundred vectors and
    scoring them costs ~30 us each.
    """

    def __init__(
        self,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef: int = 128,
        initial_capacity: int = 1024,
        exact_below: int = 256,
        seed: int = 100,
        num_threads: int = -1,
    ) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        self._dim = dim
        self._m = m
        self._ef_construction = ef_construction
        self._ef = ef
        self._exact_below = exact_below
        self._seed = seed
        self._num_threads = num_threads
        self._index: Any = hnswlib.Index(space="cosine", dim=dim)
        self._index.init_index(
            max_elements=max(initial_capacity, 1),
            ef_construction=ef_construction,
            M=m,
            random_seed=seed,
            allow_replace_deleted=True,
        )
        self._index.set_ef(ef)
        self._labels: dict[str, int] = {}
        self._keys: dict[int, str] = {}
        self._next_label = 0

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._labels)

    def __contains__(self, key: object) -> bool:
        return key in self._labels

    def keys(self) -> list[str]:
        return list(self._labels)

    def add(self, key: str, vector: npt.ArrayLike) -> None:
        """Insert a new key; raises ``KeyError`` if it is already present."""
        if key in self._labels:
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
        existing = [i for i, key in enumerate(keys) if key in self._labels]
        fresh = [i for i, key in enumerate(keys) if key not in self._labels]
        if existing:
            # Re-adding a live label makes hnswlib update that element in place.
            labels = [self._labels[keys[i]] for i in existing]
            self._index.add_items(matrix[existing], labels, num_threads=self._num_threads)
        if fresh:
            self._reserve_for(len(fresh))
            labels = list(range(self._next_label, self._next_label + len(fresh)))
            self._next_label += len(fresh)
            self._index.add_items(
                matrix[fresh], labels, num_threads=self._num_threads, replace_deleted=True
            )
            for i, label in zip(fresh, labels, strict=True):
                self._labels[keys[i]] = label
                self._keys[label] = keys[i]

    def remove(self, key: str) -> None:
        """Delete ``key``; raises ``KeyError`` if absent."""
        label = self._labels.pop(key)
        del self._keys[label]
        self._index.mark_deleted(label)

    def get(self, key: str) -> FloatArray:
        """The stored (normalised) vector of ``key``; raises ``KeyError`` if absent."""
        items = np.asarray(self._index.get_items([self._labels[key]]), dtype=np.float32)
        row: FloatArray = items[0]
        return row

    def search(
        self, query: npt.ArrayLike, k: int, allowed: Allowed = None
    ) -> list[tuple[str, float]]:
        """Top ``k`` ``(key, cosine)`` pairs among the allowed keys, best first."""
        q = _as_vector(query, self._dim)
        if k <= 0 or not self._labels:
            return []
        if isinstance(allowed, (set, frozenset)):
            labels = {self._labels[key] for key in allowed if key in self._labels}
            if len(labels) <= max(self._exact_below, k):
                return self._exact(q, k, sorted(labels))
            return self._knn(q, k, labels.__contains__) or self._exact(q, k, sorted(labels))
        if allowed is None:
            return self._knn(q, min(k, len(self._labels)), None) or self._exact(
                q, k, list(self._keys)
            )
        predicate = allowed
        keys = self._keys

        def label_allowed(label: int) -> bool:
            return predicate(keys[label])

        found = self._knn(q, k, label_allowed)
        if found is not None:
            return found
        # Fewer than k allowed elements reachable: fall back to an exact scan.
        return self._exact(q, k, [label for label, key in keys.items() if predicate(key)])

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the graph and the key map to ``directory`` (created if missing)."""
        target = Path(directory)
        target.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": 1,
            "dim": self._dim,
            "m": self._m,
            "ef_construction": self._ef_construction,
            "ef": self._ef,
            "exact_below": self._exact_below,
            "seed": self._seed,
            "next_label": self._next_label,
            "labels": self._labels,
        }
        # Write-then-rename so a crash never leaves a half-written file behind.
        tmp_index = target / "index.bin.tmp"
        self._index.save_index(str(tmp_index))
        os.replace(tmp_index, target / "index.bin")
        tmp_meta = target / "meta.json.tmp"
        tmp_meta.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp_meta, target / "meta.json")

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, num_threads: int = -1) -> HnswVectorIndex:
        """Read an index written by :meth:`save`."""
        source = Path(directory)
        meta = json.loads((source / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != 1:
            raise ValueError(f"unknown index format in {source}")
        self = cls(
            int(meta["dim"]),
            m=int(meta["m"]),
            ef_construction=int(meta["ef_construction"]),
            ef=int(meta["ef"]),
            initial_capacity=1,
            exact_below=int(meta["exact_below"]),
            seed=int(meta["seed"]),
            num_threads=num_threads,
        )
        self._index.load_index(str(source / "index.bin"), allow_replace_deleted=True)
        self._index.set_ef(self._ef)
        self._labels = {str(key): int(label) for key, label in meta["labels"].items()}
        self._keys = {label: key for key, label in self._labels.items()}
        self._next_label = int(meta["next_label"])
        return self

    def _knn(
        self, q: FloatArray, k: int, label_filter: Callable[[int], bool] | None
    ) -> list[tuple[str, float]] | None:
        """hnswlib search; ``None`` when it cannot find ``k`` allowed elements."""
        self._index.set_ef(max(self._ef, k))
        try:
            labels, distances = self._index.knn_query(q, k=k, num_threads=1, filter=label_filter)
        except RuntimeError:
            return None
        pairs = [
            (self._keys[int(label)], 1.0 - float(dist))
            for label, dist in zip(labels[0], distances[0], strict=True)
        ]
        pairs.sort(key=lambda pair: (-pair[1], pair[0]))
        return pairs

    def _exact(self, q: FloatArray, k: int, labels: Sequence[int]) -> list[tuple[str, float]]:
        if not labels:
            return []
        vectors = np.asarray(self._index.get_items(list(labels)), dtype=np.float32)
        return _top_k([self._keys[label] for label in labels], vectors @ q, k)

    def _reserve_for(self, fresh: int) -> None:
        # Deleted slots are reused first (replace_deleted), so only the excess
        # needs new capacity; get_current_count() includes deleted slots.
        used = int(self._index.get_current_count())
        deleted = used - len(self._labels)
        needed = used + max(0, fresh - deleted)
        capacity = int(self._index.get_max_elements())
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        self._index.resize_index(capacity)


def measure_recall_at_k(
    exact: VectorIndex,
    approx: VectorIndex,
    queries: Iterable[npt.ArrayLike],
    k: int = 10,
    allowed: Allowed = None,
) -> float:
    """Mean fraction of the exact top-``k`` keys that the approximate index also returns."""
    total = 0.0
    count = 0
    for query in queries:
        truth = {key for key, _ in exact.search(query, k, allowed)}
        if not truth:
            continue
        found = {key for key, _ in approx.search(query, k, allowed)}
        total += len(truth & found) / len(truth)
        count += 1
    return total / count if count else 1.0
