"""Exact and HNSW vector indexes: correctness, filtering, recall, persistence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from cairn.search.vectors import ExactVectorIndex

DIM = 384

# Each index type, plus HNSW forced through hnswlib's own filtered search
# (small allowed sets are otherwise answered by an exact scan).
FACTORIES: list[Any] = [
    pytest.param(ExactVectorIndex, id="exact"),
]
Factory = Callable[[int], Any]


def _unit(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    out: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def _clustered(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Random vectors around 200 centres.

    Real embeddings cluster; i.i.d. uniform 384-d points are all nearly
    equidistant, where no approximate index (nor the notion of a nearest
    neighbour) means much.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, DIM)).astype(np.float32)
    noise = rng.standard_normal((n, DIM)).astype(np.float32)
    return _unit(centres[rng.integers(0, 200, n)] + 0.35 * noise)


def _brute_force(
    keys: list[str], x: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int
) -> list[str]:
    scores = _unit(x) @ (q / np.linalg.norm(q))
    order = sorted(range(len(keys)), key=lambda i: (-float(scores[i]), keys[i]))
    return [keys[i] for i in order[:k]]


@pytest.fixture(scope="module")
def _queries(x: npt.NDArray[np.float32], n: int, seed: int) -> npt.NDArray[np.float32]:
    """Perturbed data points (cosine ~0.95 to their source), like real queries near documents."""
    rng = np.random.default_rng(seed)
    noise = _unit(rng.standard_normal((n, DIM)).astype(np.float32))
    return _unit(x[rng.integers(0, len(x), n)] + 0.3 * noise)


@pytest.mark.parametrize("index_type", FACTORIES)
def test_search_matches_brute_force_on_small_data(index_type: Factory) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    keys = [f"k{i:03d}" for i in range(300)]
    index = index_type(16)
    index.upsert_many(keys, x)
    for q in rng.standard_normal((20, 16)).astype(np.float32):
        for k in (1, 5, 50):
            hits = index.search(q, k)
            assert [key for key, _ in hits] == _brute_force(keys, x, q, k)
            expected = _unit(x[[keys.index(key) for key, _ in hits]]) @ (q / np.linalg.norm(q))
            assert np.allclose([s for _, s in hits], expected, atol=1e-5)


@pytest.mark.parametrize("index_type", FACTORIES)
@pytest.mark.parametrize("as_predicate", [False, True])
def test_filter_excludes_disallowed_and_still_fills_k(
    index_type: Factory, as_predicate: bool
) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 8)).astype(np.float32)
    keys = [f"k{i:03d}" for i in range(500)]
    index = index_type(8)
    index.upsert_many(keys, x)
    q = x[0]  # the query's own vector is the best match, but k000 is not allowed
    allowed_keys = {key for i, key in enumerate(keys) if i % 4 == 1}
    allowed = allowed_keys.__contains__ if as_predicate else allowed_keys
    hits = index.search(q, 10, allowed)
    assert len(hits) == 10
    assert {key for key, _ in hits} <= allowed_keys
    allowed_rows = sorted(keys.index(key) for key in allowed_keys)
    want = _brute_force([keys[i] for i in allowed_rows], x[allowed_rows], q, 10)
    assert [key for key, _ in hits] == want
    assert index.search(q, 10, set()) == []
    assert index.search(q, 10, lambda key: False) == []


@pytest.mark.parametrize("index_type", FACTORIES)
def test_k_beyond_allowed_returns_all_allowed(index_type: Factory) -> None:
    index = index_type(4)
    index.upsert_many(["a", "b", "c"], np.eye(4, dtype=np.float32)[:3])
    assert {key for key, _ in index.search([1, 0, 0, 0], 10)} == {"a", "b", "c"}
    assert [key for key, _ in index.search([1, 0, 0, 0], 10, {"b", "zz"})] == ["b"]
    assert [key for key, _ in index.search([1, 0, 0, 0], 10, lambda k: k != "a")] in (
        ["b", "c"],
        ["c", "b"],
    )


@pytest.mark.parametrize("index_type", FACTORIES)
def test_upsert_replaces_and_remove_deletes(index_type: Factory) -> None:
    index = index_type(3)
    index.upsert("a", [1, 0, 0])
    index.upsert("b", [0, 1, 0])
    index.add("c", [0, 0, 1])
    with pytest.raises(KeyError):
        index.add("a", [1, 1, 1])
    assert index.search([1, 0, 0], 1)[0][0] == "a"
    index.upsert("b", [1, 0.01, 0])  # b moves next to the query
    index.upsert("a", [0, 0, 1])
    assert len(index) == 3
    assert index.search([1, 0, 0], 1)[0][0] == "b"
    assert index.search([0, 0, 1], 1)[0][0] in {"a", "c"}
    assert np.allclose(index.get("a"), [0, 0, 1])
    index.remove("b")
    assert "b" not in index and len(index) == 2
    assert "b" not in {key for key, _ in index.search([1, 0, 0], 5)}
    with pytest.raises(KeyError):
        index.remove("b")
    index.upsert("b", [0, 1, 0])  # a removed key can come back
    assert index.search([0, 1, 0], 1)[0][0] == "b"
    assert np.allclose(index.get("b"), [0, 1, 0])


@pytest.mark.parametrize("index_type", FACTORIES)
def test_vectors_are_normalised_and_validated(index_type: Factory) -> None:
    index = index_type(2)
    index.upsert("a", [3, 4])
    assert np.allclose(index.get("a"), [0.6, 0.8])
    assert index.search([30, 40], 1)[0][1] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError):
        index.upsert("z", [0, 0])
    with pytest.raises(ValueError):
        index.upsert("z", [1, 2, 3])
    with pytest.raises(ValueError):
        index.upsert_many(["x", "x"], [[1, 0], [0, 1]])


def test_exact_ties_break_by_key() -> None:
    index = ExactVectorIndex(2)
    index.upsert_many(["d", "b", "c", "a"], [[1, 0]] * 4)
    assert [key for key, _ in index.search([1, 0], 3)] == ["a", "b", "c"]


def test_exact_remove_keeps_other_rows_intact() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((50, 6)).astype(np.float32)
    keys = [f"k{i}" for i in range(50)]
    index = ExactVectorIndex(6, initial_capacity=4)
    index.upsert_many(keys, x)
    for i in range(0, 50, 3):
        index.remove(keys[i])
    kept = [i for i in range(50) if i % 3]
    for i in kept:
        assert np.allclose(index.get(keys[i]), x[i] / np.linalg.norm(x[i]), atol=1e-6)
    q = rng.standard_normal(6).astype(np.float32)
    want = _brute_force([keys[i] for i in kept], x[kept], q, 7)
    assert [key for key, _ in index.search(q, 7)] == want
