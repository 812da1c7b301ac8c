"""The vector catalog: filter masks, incremental maintenance, exact and ANN search."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from cairn.search import catalog as catalog_module
from cairn.search.catalog import VectorCatalog
from cairn.store.base import ChunkFilter, ChunkMeta
from tests.factories import chunk_meta

FloatArray = npt.NDArray[np.float32]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 32


def _meta(i: int, **changes: Any) -> ChunkMeta:
    return chunk_meta(i, **changes)


def _where(**changes: Any) -> ChunkFilter:
    base = ChunkFilter(acl_ids=frozenset({1}), statuses=frozenset({"active"}))
    return dataclasses.replace(base, **changes)


def _unit(rows: npt.NDArray[Any]) -> FloatArray:
    out: FloatArray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def _clustered(n: int, dim: int, seed: int) -> FloatArray:
    """Points around a few hundred centres: real embeddings cluster, and on i.i.d. noise
    every point is nearly equidistant, so recall would measure nothing."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n // 50), dim))
    return _unit(centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, dim)))


def _catalog(metas: list[ChunkMeta], vectors: FloatArray, **options: Any) -> VectorCatalog:
    catalog = VectorCatalog(vectors.shape[1], **options)
    catalog.apply(metas, {m.text_hash: vectors[i] for i, m in enumerate(metas)})
    return catalog


def _ids(catalog: VectorCatalog, where: ChunkFilter) -> set[int]:
    return {int(i) for i in np.flatnonzero(catalog.mask(where)) + 1000}


# ---- mask semantics ----------------------------------------------------------------------


def test_an_old_version_is_read_only_when_its_records_head_may_be() -> None:
    metas = [
        _meta(0, record_id="rec-a", version_id="a-1", is_head=False, acl_id=1),
        _meta(1, record_id="rec-a", version_id="a-2", acl_id=1),  # head readable
        _meta(2, record_id="rec-b", version_id="b-1", is_head=False, acl_id=1),
        _meta(3, record_id="rec-b", version_id="b-2", acl_id=2),  # head closed to acl 1 readers
    ]
    catalog = _catalog(metas, _clustered(len(metas), DIM, 0))
    pinned = frozenset({"a-1", "b-1"})
    assert _ids(catalog, _where(version_ids=pinned)) == {1000}
    assert _ids(catalog, _where(version_ids=pinned, acl_ids=frozenset({1, 2}))) == {1000, 1002}


def test_mask_each_filter_field() -> None:
    metas = [
        _meta(0),
        _meta(1, acl_id=2),
        _meta(2, status="draft"),
        _meta(3, scope_id=7),
        _meta(4, kind="decision"),
        _meta(5, is_head=False),
        _meta(6, superseded=True),
        _meta(7, valid_from=T0 + timedelta(days=100)),
        _meta(8, valid_to=T0 + timedelta(days=10)),
    ]
    catalog = _catalog(metas, _clustered(len(metas), DIM, 0))
    everything = {1000 + i for i in range(len(metas))}
    base = {1000, 1003, 1004, 1007, 1008}  # acl 1, active, head, not superseded
    assert _ids(catalog, _where()) == base
    assert _ids(catalog, _where(acl_ids=frozenset({1, 2}))) == base | {1001}
    assert _ids(catalog, _where(acl_ids=frozenset())) == set()
    assert _ids(catalog, _where(acl_ids=frozenset({99}))) == set()
    assert _ids(catalog, _where(statuses=frozenset({"active", "draft"}))) == base | {1002}
    assert _ids(catalog, _where(scope_ids=frozenset({7}))) == {1003}
    assert _ids(catalog, _where(scope_ids=frozenset({1, 7}))) == base
    assert _ids(catalog, _where(kinds=frozenset({"decision"}))) == {1004}
    assert _ids(catalog, _where(kinds=frozenset({"unknown-kind"}))) == set()
    assert _ids(catalog, _where(head_only=False)) == base | {1005}
    # Pinned versions override head_only, but an old version is read only with its record's
    # head: rec-5 has no head here, so ver-5 stays out (the next test has the other side).
    assert _ids(catalog, _where(version_ids=frozenset({"ver-5", "ver-0"}))) == {1000}
    assert _ids(catalog, _where(record_ids=frozenset({"rec-3", "rec-4", "nope"}))) == {
        1003,
        1004,
    }
    assert _ids(catalog, _where(include_superseded=True)) == base | {1006}
    at = T0 + timedelta(days=50)
    assert _ids(catalog, _where(valid_at=at)) == base - {1007, 1008}
    assert _ids(catalog, _where(valid_at=T0 + timedelta(days=200))) == base - {1008}
    assert _ids(catalog, _where(created_after=T0 + timedelta(days=4))) == {1004, 1007, 1008}
    assert _ids(catalog, _where(created_before=T0 + timedelta(days=4))) == {1000, 1003}
    wide = _where(
        acl_ids=frozenset({1, 2}),
        statuses=frozenset(catalog_module._STATUS_CODES),
        head_only=False,
        include_superseded=True,
    )
    assert _ids(catalog, wide) == everything


def test_mask_by_source_kind_and_source_time() -> None:
    metas = [
        _meta(0, source_time=T0),
        _meta(1, source_time=T0 + timedelta(days=5)),
        _meta(2, source_kind="segment", source_time=T0 + timedelta(days=5)),
        _meta(3),  # no source time: in no range
    ]
    catalog = _catalog(metas, _clustered(len(metas), DIM, 0))
    day = T0 + timedelta(days=1)
    assert _ids(catalog, _where(source_after=day)) == {1001, 1002}
    assert _ids(catalog, _where(source_before=day)) == {1000}
    assert _ids(catalog, _where(source_kinds=frozenset({"segment"}))) == {1002}
    assert _ids(catalog, _where(source_kinds=frozenset({"record"}), source_after=day)) == {1001}
    assert _ids(catalog, _where(source_kinds=frozenset({"nothing-here"}))) == set()


def test_reapply_updates_filter_columns() -> None:
    metas = [_meta(i) for i in range(4)]
    catalog = _catalog(metas, _clustered(4, DIM, 1))
    assert _ids(catalog, _where(valid_at=T0)) == {1000, 1001, 1002, 1003}
    # Later changes to the same chunk ids: no vectors needed, columns are rewritten.
    catalog.apply(
        [
            _meta(0, status="archived", seq=10),
            _meta(1, superseded=True, seq=11),
            _meta(2, acl_id=5, scope_id=9, seq=12),
            _meta(3, valid_to=T0 - timedelta(days=1), seq=13),
        ],
        {},
    )
    assert len(catalog) == 4
    assert catalog.seq == 13
    assert _ids(catalog, _where(valid_at=T0)) == set()
    assert _ids(catalog, _where(acl_ids=frozenset({5}), scope_ids=frozenset({9}))) == {1002}
    # Validity bounds removed again: the chunk is visible at any time.
    catalog.apply([_meta(3, seq=14)], {})
    assert _ids(catalog, _where(valid_at=T0)) == {1003}


def test_pending_until_vectors_arrive() -> None:
    vectors = _clustered(3, DIM, 2)
    catalog = VectorCatalog(DIM)
    catalog.apply([_meta(0), _meta(1), _meta(2, text_hash="hash-1")], {"hash-0": vectors[0]})
    assert len(catalog) == 1
    assert set(catalog.pending) == {"hash-1"}
    assert [m.id for m in catalog.pending["hash-1"]] == [1001, 1002]
    # A state change while pending replaces the waiting copy instead of queueing twice.
    catalog.apply([_meta(1, status="stale", seq=9)], {})
    waiting = [(m.id, m.status) for m in catalog.pending["hash-1"]]
    assert waiting == [(1002, "active"), (1001, "stale")]
    assert [hit for hit, _ in catalog.search(vectors[1], _where(), 10)] == [1000]
    catalog.add_vectors({"hash-1": vectors[1], "hash-unknown": vectors[2]})
    assert catalog.pending == {}
    assert len(catalog) == 3
    found = catalog.search(vectors[1], _where(), 10)
    assert found[0][0] == 1002
    assert found[0][1] == pytest.approx(1.0, abs=1e-5)
    assert {hit for hit, _ in found} == {1000, 1002}  # 1001 is stale now
    vector = catalog.vector_of(1001)
    assert vector is not None and np.allclose(vector, vectors[1])
    assert catalog.vector_of(4242) is None


# ---- exact search ------------------------------------------------------------------------


def _brute_force(
    vectors: FloatArray, allowed: npt.NDArray[np.bool_], query: FloatArray, k: int
) -> list[int]:
    scores = vectors @ query
    rows = sorted(np.flatnonzero(allowed).tolist(), key=lambda r: (-scores[r], r))
    return [1000 + r for r in rows[:k]]


def test_exact_search_equals_brute_force() -> None:
    n = 3000
    rng = np.random.default_rng(3)
    vectors = _clustered(n, DIM, 3)
    acl = rng.integers(0, 4, n)
    metas = [_meta(i, acl_id=int(acl[i])) for i in range(n)]
    catalog = _catalog(metas, vectors, ann_threshold=None)
    where = _where(acl_ids=frozenset({0, 2}))
    allowed = np.isin(acl, [0, 2])
    for query in _clustered(20, DIM, 4):
        found = catalog.search(query, where, 25)
        assert [hit for hit, _ in found] == _brute_force(vectors, allowed, query, 25)
        scores = [score for _, score in found]
        assert scores == sorted(scores, reverse=True)
    assert catalog.search(vectors[0], _where(acl_ids=frozenset()), 10) == []
    assert catalog.search(vectors[0], where, 0) == []
    # k beyond the allowed set returns the whole allowed set, never a disallowed row.
    few = _where(record_ids=frozenset({"rec-1", "rec-2", "rec-3"}), acl_ids=frozenset({0, 1, 2, 3}))
    assert {hit for hit, _ in catalog.search(vectors[0], few, 50)} == {1001, 1002, 1003}


def test_ties_break_by_chunk_id() -> None:
    vector = _clustered(1, DIM, 5)[0]
    metas = [_meta(i) for i in (3, 1, 2)]
    catalog = VectorCatalog(DIM, ann_threshold=None)
    catalog.apply(metas, {m.text_hash: vector for m in metas})
    assert [hit for hit, _ in catalog.search(vector, _where(), 3)] == [1001, 1002, 1003]


# ---- ANN search --------------------------------------------------------------------------

ANN_N = 20_000
ANN_DIM = 48


@pytest.fixture(scope="module")
def corpus() -> tuple[list[ChunkMeta], FloatArray, FloatArray]:
    rng = np.random.default_rng(6)
    vectors = _clustered(ANN_N + 200, ANN_DIM, 6)
    # acl ids 0-9 uniformly: a reader allowed {0..4} sees 50%, {0} sees 10%.
    acl = rng.integers(0, 10, ANN_N)
    metas = [_meta(i, acl_id=int(acl[i])) for i in range(ANN_N)]
    return metas, vectors[:ANN_N], vectors[ANN_N:]


@pytest.fixture(scope="module")
def exact(corpus: tuple[list[ChunkMeta], FloatArray, FloatArray]) -> VectorCatalog:
    metas, vectors, _ = corpus
    return _catalog(metas, vectors, ann_threshold=None)


@pytest.fixture(scope="module")
def ann(corpus: tuple[list[ChunkMeta], FloatArray, FloatArray]) -> VectorCatalog:
    metas, vectors, _ = corpus
    # No exact fallback at all, so the filtered graph search itself is what is measured.
    catalog = _catalog(metas, vectors, ann_threshold=0, exact_rows=0, exact_fraction=0.0)
    assert catalog.uses_ann
    assert catalog.graph_dims == ANN_DIM  # no float32 source: the graph holds the vectors
    return catalog


READERS = {
    "all": frozenset(range(10)),
    "half": frozenset(range(5)),
    "tenth": frozenset({0}),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_ann_recall_against_exact(
    corpus: tuple[list[ChunkMeta], FloatArray, FloatArray],
    exact: VectorCatalog,
    ann: VectorCatalog,
    reader: str,
) -> None:
    _, _, queries = corpus
    where = _where(acl_ids=READERS[reader])
    allowed = _ids(exact, where)
    recall = 0.0
    for query in queries:
        truth = {hit for hit, _ in exact.search(query, where, 10)}
        # The pipeline asks for 50 candidates and keeps the best 10 after fusion.
        found = ann.search(query, where, 50)
        assert {hit for hit, _ in found} <= allowed, "a disallowed row took a slot"
        assert len(found) == 50
        recall += len(truth & {hit for hit, _ in found[:10]}) / len(truth)
    assert recall / len(queries) >= 0.99


def test_ann_small_allowed_set_is_exact(
    corpus: tuple[list[ChunkMeta], FloatArray, FloatArray], exact: VectorCatalog
) -> None:
    metas, vectors, queries = corpus
    # Default fallback thresholds: 20k rows means every filtered read here is exact
    # (float16 scan, float32 re-score), so it must match the exact catalog to the id.
    catalog = _catalog(metas[:5000], vectors[:5000], ann_threshold=0)
    where = _where(acl_ids=frozenset({3}))
    reference = _catalog(metas[:5000], vectors[:5000], ann_threshold=None)
    for query in queries[:50]:
        found = catalog.search(query, where, 20)
        expected = reference.search(query, where, 20)
        assert [hit for hit, _ in found] == [hit for hit, _ in expected]
        assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-6)


def test_ann_tail_and_threshold_crossing() -> None:
    n = 6000
    vectors = _clustered(n, DIM, 7)
    metas = [_meta(i) for i in range(n)]
    catalog = VectorCatalog(DIM, ann_threshold=1000)
    catalog.apply(metas[:1000], {m.text_hash: vectors[i] for i, m in enumerate(metas[:1000])})
    assert not catalog.uses_ann  # the threshold is "more than"
    catalog.apply(metas[1000:1001], {"hash-1000": vectors[1000]})
    assert catalog.uses_ann
    # Rows arriving later wait in the tail (searched exactly), then join the graph in bulk.
    catalog.apply(metas[1001:], {})
    for start in range(1001, n, 500):
        catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(start, min(n, start + 500))})
        newest = min(n, start + 500) - 1
        found = catalog.search(vectors[newest], _where(), 5)
        assert found[0][0] == 1000 + newest
        assert found[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(catalog) == n
    assert catalog._indexed > 1001  # the tail was flushed into the graph at least once
    for chunk in (1000, 1000 + n - 1):
        vector = catalog.vector_of(chunk)
        assert vector is not None and np.allclose(vector, vectors[chunk - 1000])
    # A status change after indexing still trims immediately: no rebuild needed.
    catalog.apply([_meta(5, status="archived", seq=n + 10)], {})
    assert 1005 not in {hit for hit, _ in catalog.search(vectors[5], _where(), 10)}


def test_ef_is_calibrated_on_held_out_rows(
    corpus: tuple[list[ChunkMeta], FloatArray, FloatArray], ann: VectorCatalog
) -> None:
    metas, vectors, _ = corpus
    # The default catalog measured recall on rows kept out of the graph, found the first
    # ef reaching the target (or the plateau), and kept one ladder step more.
    assert ann.ann_calibration
    ladder = list(catalog_module._EF_LADDER)
    reached, recall = ann.ann_calibration[-1]
    if recall >= ann.ann_target_recall:  # clustered data: the target is reachable
        assert ann.ann_ef == ladder[min(ladder.index(reached) + 1, len(ladder) - 1)]
    else:
        assert ann.ann_ef in ladder
    # A fixed ef is taken as given.
    fixed = _catalog(metas[:2000], vectors[:2000], ann_threshold=0, ann_ef=77)
    assert fixed.ann_ef == 77 and fixed.ann_calibration == []


# ---- a projected graph (the store keeps the float32 vectors) ----------------------------


def _low_rank(n: int, dim: int, rank: int, seed: int) -> FloatArray:
    """Clustered vectors whose energy lies mostly in ``rank`` directions, as real
    embeddings' does, with a little noise in every dimension."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dim, rank)))[0].T
    centres = rng.standard_normal((max(1, n // 50), rank))
    inner = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, rank))
    return _unit(inner @ basis + 0.05 * rng.standard_normal((n, dim)))


class _Source:
    """The store's side: each chunk's float32 vector by chunk id, counting what is asked."""

    def __init__(self, vectors: FloatArray) -> None:
        self.vectors = vectors
        self.asked = 0

    def __call__(self, chunk_ids: Any) -> dict[int, FloatArray]:
        self.asked += len(chunk_ids)
        return {i: self.vectors[i - 1000] for i in chunk_ids if 0 <= i - 1000 < len(self.vectors)}


def test_a_projected_graph_rescored_from_the_store_keeps_recall() -> None:
    n, dim = 8000, 128
    vectors = _low_rank(n + 100, dim, 16, seed=11)
    acl = np.random.default_rng(11).integers(0, 10, n)
    metas = [_meta(i, acl_id=int(acl[i])) for i in range(n)]
    source = _Source(vectors[:n])
    ann = _catalog(metas, vectors[:n], ann_threshold=0, ann_dims=32, vectors_of=source,
                   exact_rows=0, exact_fraction=0.0)  # fmt: skip
    exact = _catalog(metas, vectors[:n], ann_threshold=None)
    assert ann.graph_dims == 32  # the graph holds the projection, not the vectors
    assert ann.projection_recall is not None and ann.projection_recall >= 0.99
    for readers in READERS.values():
        where = _where(acl_ids=readers)
        allowed = _ids(exact, where)
        recall = 0.0
        for query in vectors[n:]:
            expected = dict(exact.search(query, where, 10))
            asked = source.asked
            found = ann.search(query, where, 10)
            assert source.asked > asked  # the finalists were re-read in float32
            assert {hit for hit, _ in found} <= allowed, "a disallowed row took a slot"
            # Scores are exact float32 cosines, not the graph's estimates.
            assert all(score == pytest.approx(float(vectors[hit - 1000] @ query), abs=1e-5)
                       for hit, score in found)  # fmt: skip
            recall += len(expected.keys() & {hit for hit, _ in found}) / len(expected)
        assert recall / (len(vectors) - n) >= 0.98
    vector = ann.vector_of(1005)
    assert vector is not None and np.array_equal(vector, vectors[5])


def test_vectors_without_a_few_main_directions_get_a_full_graph() -> None:
    n, dim = 8000, 128
    # Many small clusters whose centres spread over every dimension: 32 directions keep
    # too little of them (at 50 rows a cluster they would do).
    rng = np.random.default_rng(12)
    centres = rng.standard_normal(((n + 100) // 5, dim))
    vectors = _unit(centres[rng.integers(0, len(centres), n + 100)]
                    + 0.5 * rng.standard_normal((n + 100, dim)))  # fmt: skip
    metas = [_meta(i) for i in range(n)]
    source = _Source(vectors[:n])
    ann = _catalog(metas, vectors[:n], ann_threshold=0, ann_dims=32, vectors_of=source,
                   exact_rows=0, exact_fraction=0.0)  # fmt: skip
    exact = _catalog(metas, vectors[:n], ann_threshold=None)
    # A perfect graph over 32 directions would miss the held-out rows' true neighbours:
    # the graph holds the full vectors.
    assert ann.projection_recall is not None and ann.projection_recall < 0.99
    assert ann.graph_dims == dim
    recall = 0.0
    for query in vectors[n:]:
        expected = {hit for hit, _ in exact.search(query, _where(), 10)}
        recall += len(expected & {hit for hit, _ in ann.search(query, _where(), 10)}) / 10
    assert recall / (len(vectors) - n) >= 0.98


def test_rows_joining_a_projected_graph_later_are_found_exactly() -> None:
    n, dim = 5000, 128
    vectors = _low_rank(n, dim, 16, seed=13)
    metas = [_meta(i) for i in range(n)]
    catalog = VectorCatalog(dim, ann_threshold=1000, ann_dims=32, vectors_of=_Source(vectors))
    catalog.apply(metas[:1001], {m.text_hash: vectors[i] for i, m in enumerate(metas[:1001])})
    assert catalog.graph_dims == 32
    catalog.apply(metas[1001:], {})
    for start in range(1001, n, 500):
        catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(start, min(n, start + 500))})
        newest = min(n, start + 500) - 1
        for row in (newest, start - 1):  # in the tail, and (once flushed) in the graph
            found = catalog.search(vectors[row], _where(), 5)
            assert found[0] == (1000 + row, pytest.approx(1.0, abs=1e-5))
    assert catalog._indexed > 1001  # the tail joined the graph, projected


def test_a_batch_naming_a_new_chunk_twice_holds_it_once_in_its_last_state() -> None:
    # New rows of a batch are appended together at its end; a later change of one of them
    # in the same batch is its state, not another row.
    vectors = _clustered(2, DIM, 3)
    catalog = VectorCatalog(DIM)
    catalog.apply(
        [
            _meta(0, valid_to=T0 - timedelta(days=1)),
            _meta(1),
            _meta(0, status="archived", seq=5),
            _meta(1, acl_id=5, seq=6),
        ],
        {"hash-0": vectors[0], "hash-1": vectors[1]},
    )
    assert len(catalog) == 2
    assert _ids(catalog, _where(statuses=frozenset({"archived"}), valid_at=T0)) == {1000}
    assert _ids(catalog, _where(acl_ids=frozenset({5}))) == {1001}
    assert catalog.vector_of(1001) is not None
    assert np.allclose(catalog.vector_of(1001), vectors[1])


class _FailingInserts:
    """An hnswlib index whose inserts fail (everything else passes through)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def add_items(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("insert failed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


def _graph_with_rows_waiting(
    monkeypatch: pytest.MonkeyPatch, n: int, *, seed: int
) -> tuple[VectorCatalog, Any]:
    """A catalog whose first 1,001 rows built its graph (flushed 64 rows at a time) and whose
    other ``n - 1001`` chunks wait for their vectors (``hash-{i}``); and the ``n`` vectors."""
    monkeypatch.setattr(catalog_module, "_TAIL_FLUSH", 64)
    vectors = _clustered(n, DIM, seed)
    metas = [_meta(i) for i in range(n)]
    catalog = VectorCatalog(DIM, ann_threshold=1000, ann_ef=64)
    catalog.apply(metas[:1001], {m.text_hash: vectors[i] for i, m in enumerate(metas[:1001])})
    catalog.apply(metas[1001:], {})
    return catalog, vectors


def test_rows_joining_the_graph_in_the_background_are_searchable_throughout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 1400
    catalog, vectors = _graph_with_rows_waiting(monkeypatch, n, seed=11)
    assert catalog.uses_ann

    def arrive(start: int, stop: int) -> None:
        catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(start, stop)})

    arrive(1001, 1100)  # a flush: these rows go into the graph in another thread
    assert catalog._insert is not None
    assert catalog.search(vectors[1099], _where(), 1)[0][0] == 2099  # waits for it
    assert catalog._insert is None and catalog._indexed == 1100
    # A failed insert: a read is not told, its rows are still found (in the tail), and the
    # next flush raises it, then the one after puts them in the graph.
    real = catalog._hnsw
    catalog._hnsw = _FailingInserts(real)
    arrive(1100, 1200)
    assert catalog.search(vectors[1150], _where(), 1)[0][0] == 2150
    assert catalog._indexed == 1100
    with pytest.raises(RuntimeError, match="insert failed"):
        arrive(1200, 1300)
    catalog._hnsw = real
    arrive(1300, n)
    catalog.join_graph()
    assert catalog._indexed == n and real.get_current_count() == n
    for row in (1150, 1250, n - 1):
        assert catalog.search(vectors[row], _where(), 1)[0][0] == 1000 + row


class _HalfInserts:
    """An hnswlib index whose next insert puts in half of its rows, then fails."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph

    def add_items(self, rows: Any, labels: Any, **kwargs: Any) -> None:
        half = len(labels) // 2
        self.graph.add_items(rows[:half], labels[:half], **kwargs)
        raise MemoryError("insert failed halfway")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


@pytest.mark.parametrize("filtered", [False, True], ids=["every-row", "under-a-filter"])
def test_rows_of_a_graph_insert_that_failed_halfway_are_answered_once(
    monkeypatch: pytest.MonkeyPatch, filtered: bool
) -> None:
    # The rows that got into the graph before the failure are also still in the tail (the
    # next flush puts them in again): a search must not answer one of them twice, nor meet a
    # graph label beyond the rows its filter knows.
    n = 1200
    catalog, vectors = _graph_with_rows_waiting(monkeypatch, n, seed=14)
    catalog.exact_rows, catalog.exact_fraction = 0, 0.0  # searched through the graph
    if filtered:  # one chunk in three unreadable: the graph is searched through its filter
        catalog.apply([_meta(i, acl_id=7, seq=n + i) for i in range(0, n, 3)], {})
    real = catalog._hnsw
    catalog._hnsw = _HalfInserts(real)
    catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1001, 1100)})  # a flush
    assert catalog.graph_settles_within(60)
    catalog._hnsw = real
    assert catalog._indexed == 1001  # the failed rows wait in the tail
    for row in (1010, 1040, 1090):
        hits = catalog.search(vectors[row], _where(), 10)
        ids = [chunk for chunk, _ in hits]
        assert len(ids) == len(set(ids)) == 10
        assert ids[0] == 1000 + row
    with pytest.raises(MemoryError, match="halfway"):  # the next flush says so
        catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1100, 1150)})
    catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1150, n)})  # tried again
    catalog.join_graph()
    assert catalog._indexed == n
    hits = catalog.search(vectors[1040], _where(), 10)
    assert hits[0][0] == 2040 and len({chunk for chunk, _ in hits}) == 10


def test_a_graph_build_that_fails_leaves_the_catalog_exact_and_builds_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The build adds the rows that calibrated its breadth last; if that fails, the graph
    # lacks them and must not be searched as if it held every row.
    real_index = catalog_module.hnswlib.Index
    graphs: list[Any] = []

    def failing_last_insert(*args: Any, **kwargs: Any) -> Any:
        graph = _HalfInserts(real_index(*args, **kwargs))
        real_add = graph.graph.add_items
        calls = [0]

        def add_items(rows: Any, labels: Any, **options: Any) -> None:
            calls[0] += 1
            if calls[0] == 1:  # the build's rows
                real_add(rows, labels, **options)
            else:  # the held rows: half in, then the failure
                _HalfInserts.add_items(graph, rows, labels, **options)

        graph.add_items = add_items  # type: ignore[method-assign]
        graphs.append(graph)
        return graph

    monkeypatch.setattr(catalog_module.hnswlib, "Index", failing_last_insert)
    n = 1100
    vectors = _clustered(n, DIM, 15)
    metas = [_meta(i) for i in range(n)]
    catalog = VectorCatalog(DIM, ann_threshold=1000, exact_rows=0, exact_fraction=0.0)
    with pytest.raises(MemoryError, match="halfway"):
        catalog.apply(metas, {m.text_hash: vectors[i] for i, m in enumerate(metas)})
    assert not catalog.uses_ann
    assert catalog._codes.size == 0  # the int8 copy serves only a graph: not kept meanwhile
    for row in (5, 700, n - 1):  # the newest rows were the held ones
        hits = catalog.search(vectors[row], _where(), 10)
        assert hits[0][0] == 1000 + row and len({chunk for chunk, _ in hits}) == 10
    built: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(real_index(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(catalog_module.hnswlib, "Index", counted)
    # Not tried again at every change (reads mirror changes too): after a tail's worth more.
    monkeypatch.setattr(catalog_module, "_TAIL_FLUSH", 64)
    more = _clustered(64, DIM, 16)
    catalog.apply([_meta(n, seq=n + 1)], {"hash-1100": more[0]})
    assert not catalog.uses_ann and not built
    catalog.apply(
        [_meta(i, seq=i + 1) for i in range(n + 1, n + 64)],
        {f"hash-{i}": more[i - n] for i in range(n + 1, n + 64)},
    )
    assert catalog.uses_ann and len(graphs) == 1 and len(built) == 1
    assert catalog.search(vectors[n - 1], _where(), 1)[0][0] == 1000 + n - 1


def test_a_graph_that_cannot_even_be_made_leaves_nothing_of_the_build_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("no room for a graph")

    monkeypatch.setattr(catalog_module.hnswlib, "Index", no_memory)
    n = 1100
    vectors = _clustered(n, DIM, 17)
    metas = [_meta(i) for i in range(n)]
    catalog = VectorCatalog(DIM, ann_threshold=1000)
    with pytest.raises(MemoryError, match="no room"):
        catalog.apply(metas, {m.text_hash: vectors[i] for i, m in enumerate(metas)})
    assert not catalog.uses_ann and catalog._codes.size == 0 and catalog._projection is None
    assert catalog.search(vectors[700], _where(), 1)[0][0] == 1700


def test_a_graph_insert_whose_thread_cannot_start_leaves_the_catalog_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "can't start new thread" (no threads left, or at interpreter shutdown): the flush
    # fails, but its rows stay in the tail, searches go on, and a later flush takes them.
    n = 1200
    catalog, vectors = _graph_with_rows_waiting(monkeypatch, n, seed=12)
    real_start = catalog_module.threading.Thread.start

    def cannot_start(thread: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(catalog_module.threading.Thread, "start", cannot_start)
    with pytest.raises(RuntimeError, match="can't start"):
        catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1001, 1100)})
    assert catalog.search(vectors[1050], _where(), 1)[0][0] == 2050
    monkeypatch.setattr(catalog_module.threading.Thread, "start", real_start)
    catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1100, n)})
    catalog.join_graph()
    assert catalog._indexed == n
    assert catalog.search(vectors[1050], _where(), 1)[0][0] == 2050


class _HeldInserts:
    """An hnswlib index whose inserts wait for ``let_go`` (everything else passes through)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.let_go = threading.Event()

    def add_items(self, *args: Any, **kwargs: Any) -> None:
        assert self.let_go.wait(60)
        self.graph.add_items(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)


def test_whether_joining_rows_settle_is_asked_with_a_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog, vectors = _graph_with_rows_waiting(monkeypatch, 1100, seed=13)
    held = _HeldInserts(catalog._hnsw)
    catalog._hnsw = held
    catalog.add_vectors({f"hash-{i}": vectors[i] for i in range(1001, 1100)})  # a flush
    assert not catalog.graph_settles_within(0.05)  # still inserting: not joined
    assert catalog._insert is not None and catalog._indexed == 1001
    held.let_go.set()
    assert catalog.graph_settles_within(60)
    assert catalog._insert is None and catalog._indexed == 1100
    assert catalog.graph_settles_within(0)  # nothing joining: settled at once
