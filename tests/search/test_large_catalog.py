"""Large-store behaviour of the vector catalog and indexer, exercised at small sizes.

At a million chunks the catalog may not hold every chunk that waits for a vector as a
Python object: past ``park_limit`` it passes them over and re-reads them from the store
later (``rescan_from``). These tests shrink the limits so that every path runs, and check
that the catalog ends up exactly as one built without them.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Acl, Content, Sensitivity
from cairn.retrieval import indexer as indexer_module
from cairn.retrieval.indexer import Indexer
from cairn.search import catalog as catalog_module
from cairn.search.catalog import VectorCatalog
from cairn.store.base import ChunkFilter, ChunkMeta
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR, chunk_meta

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 8
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "omicron",
]


def _meta(i: int, **changes: Any) -> ChunkMeta:
    # ids from 1: the catalog's id -> row array grows from the lowest ids it sees
    return chunk_meta(i, **{"id": 1 + i, **changes})


def _where() -> ChunkFilter:
    return ChunkFilter(acl_ids=frozenset({1}), statuses=frozenset({"active"}))


def test_pending_is_bounded_and_the_rest_waits_for_a_rescan() -> None:
    catalog = VectorCatalog(DIM, park_limit=3)
    catalog.apply([_meta(i) for i in range(8)], {})
    assert catalog.parked == 3 and sorted(catalog.pending) == ["hash-0", "hash-1", "hash-2"]
    assert catalog.rescan_from == 3  # chunk 3 (seq 4) was the first passed over
    assert catalog.seq == 8  # the sync cursor still moved past everything
    # A state change of a parked chunk replaces its waiting copy, even when pending is full.
    catalog.apply([_meta(1, status="stale", seq=9)], {})
    assert [m.status for m in catalog.pending["hash-1"]] == ["stale"] and catalog.parked == 3
    vectors = {f"hash-{i}": np.eye(DIM, dtype=np.float32)[i % DIM] for i in range(8)}
    catalog.add_vectors({h: vectors[h] for h in ("hash-0", "hash-1", "hash-2")})
    assert catalog.parked == 0 and len(catalog) == 3
    # The re-read (seq order, from the cursor) brings the rest in; seq is not moved by it.
    catalog.rescan([_meta(i) for i in range(3, 8)] + [_meta(1, status="stale", seq=9)], vectors)
    assert catalog.rescan_from is None and catalog.seq == 9 and len(catalog) == 8
    found = {hit for hit, _ in catalog.search(vectors["hash-5"], _where(), 10)}
    assert found == {1, 3, 4, 5, 6, 7, 8}  # chunk 2 (record 1) is stale


def test_a_rescan_that_fills_pending_again_resumes_at_the_first_chunk_passed_over() -> None:
    catalog = VectorCatalog(DIM, park_limit=2)
    catalog.apply([_meta(i) for i in range(6)], {})
    catalog.add_vectors({"hash-0": np.ones(DIM, dtype=np.float32)})
    assert catalog.rescan_from == 2
    catalog.rescan([_meta(i) for i in range(2, 6)], {})
    assert sorted(catalog.pending) == ["hash-1", "hash-2"] and catalog.rescan_from == 3
    # A batch that stops short of the sync cursor leaves the cursor after it.
    one = np.ones(DIM, dtype=np.float32)
    catalog.add_vectors({"hash-1": one})
    catalog.rescan([_meta(3)], {"hash-3": one})
    assert catalog.rescan_from == 4 and len(catalog) == 3


def _contents(n: int) -> list[Content]:
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=6))
        # Every third record is a document with three sections: three chunks sharing a seq.
        body = (
            "\n\n".join(f"## Part {j}\n\n{words} part {j} " + "filler " * 300 for j in range(3))
            if i % 3 == 0
            else f"{words}."
        )
        out.append(Content(
            kind="document" if i % 3 == 0 else "fact", scope=f"acme/team-{i % 4}",
            title=f"{words} #{i}", body=body,
            acl=Acl(labels=(("public",), ("internal",))[i % 2], sensitivity=Sensitivity.LOW),
        ))  # fmt: skip
    return out


def _state(catalog: VectorCatalog, store: SqliteStore) -> list[tuple[int, int, int, bool, float]]:
    """Every chunk's catalog row contents, by chunk id (the catalog's observable state)."""
    where = ChunkFilter(
        acl_ids=frozenset(a.id for a in store.acls()),
        statuses=frozenset({"active", "archived", "draft", "stale", "rejected"}),
        head_only=False, include_superseded=True,
    )  # fmt: skip
    mask = catalog.mask(where)
    rows = []
    for chunk_id in range(1, store.chunk_count() + 1):
        row = catalog.row_of(chunk_id)
        assert row is not None, f"chunk {chunk_id} missing from the catalog"
        vector = catalog.vector_of(chunk_id)
        assert vector is not None
        rows.append((chunk_id, int(catalog._status[row]), int(catalog._acl[row]),
                     bool(mask[row]), round(float(vector.sum()), 4)))  # fmt: skip
    return rows


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    """SQLite only (the catalog's state is compared with ``SqliteStore``'s), built here so
    the tests read it whole beside the memory on it."""
    return SqliteStore(tmp_path / "cairn.db")


@pytest.fixture
def memory(store: SqliteStore, tmp_path: Path) -> Memory:
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path, embedder="static")


def test_bulk_indexing_with_a_small_park_limit_matches_an_unbounded_catalog(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, store: SqliteStore
) -> None:
    outcomes = memory.remember_many(_contents(60), principal=CURATOR)
    # Batches that would cut a version's chunks apart: the seq-group guard must hold them.
    monkeypatch.setattr(indexer_module, "SYNC_BATCH", 4)
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(indexer.embedder.dim, park_limit=5)
    memory.index_pending()
    # Archive a record after indexing: state changes still reach rows added by rescans.
    archived = outcomes[7].record
    assert archived is not None
    memory.archive(archived.id, principal=CURATOR)
    indexer.sync()
    catalog = indexer.catalog
    assert catalog.rescan_from is None and catalog.pending == {}
    assert len(catalog) == store.chunk_count() > 60

    reference = Indexer(store, indexer.embedder)
    reference.sync()
    assert reference.catalog.pending == {}
    assert _state(catalog, store) == _state(reference.catalog, store)
    query = indexer.embedder.embed_query("alpha gamma kappa")
    where = ChunkFilter(acl_ids=frozenset(a.id for a in store.acls()),
                        statuses=frozenset({"active"}))  # fmt: skip
    assert catalog.search(query, where, 20) == reference.catalog.search(query, where, 20)


def _free(lock: Any) -> bool:
    """Whether another thread can take ``lock`` now (it is let go of again at once)."""
    answer: list[bool] = []

    def attempt() -> None:
        taken = lock.acquire(blocking=False)
        if taken:
            lock.release()
        answer.append(taken)

    other = threading.Thread(target=attempt)
    other.start()
    other.join()
    return answer[0]


def test_finalists_are_read_from_the_store_after_the_indexer_lets_go_of_its_lock(
    memory: Memory, monkeypatch: pytest.MonkeyPatch, store: SqliteStore
) -> None:
    memory.remember_many(_contents(60), principal=CURATOR)
    indexer = memory.indexer
    assert indexer is not None
    # A graph over fewer dimensions than the vectors (kept whatever its measured recall:
    # this test is about where the finalists' vectors are read, not about recall).
    monkeypatch.setattr(catalog_module, "_PROJECTION_RECALL", 0.0)
    indexer.catalog = VectorCatalog(
        indexer.embedder.dim, ann_threshold=0, ann_dims=8, vectors_of=indexer.stored_vectors,
        exact_rows=0, exact_fraction=0.0,
    )  # fmt: skip
    memory.index_pending()
    assert indexer.catalog.graph_dims == 8
    reference = Indexer(store, indexer.embedder)  # exact: no graph at this size
    reference.sync()

    lock_free_while_reading: list[bool] = []
    read = store.chunk_vectors

    def watched(model: str, chunk_ids: Any) -> dict[int, bytes]:
        lock_free_while_reading.append(_free(indexer._lock))
        return read(model, chunk_ids)

    monkeypatch.setattr(store, "chunk_vectors", watched)
    where = ChunkFilter(acl_ids=frozenset(a.id for a in store.acls()),
                        statuses=frozenset({"active"}))  # fmt: skip
    query = indexer.embedder.embed_query("alpha gamma kappa")
    found = indexer.search(query, where, 5)
    assert lock_free_while_reading == [True]  # read once, with the lock let go of
    expected = reference.search(query, where, 5)
    assert [hit for hit, _ in found] == [hit for hit, _ in expected]
    assert [score for _, score in found] == pytest.approx([score for _, score in expected])


def test_reads_during_a_large_backlog_see_state_changes_of_chunks_passed_over(
    memory: Memory,
    store: SqliteStore,
) -> None:
    indexer = memory.indexer
    assert indexer is not None
    indexer.catalog = VectorCatalog(indexer.embedder.dim, park_limit=3)
    outcomes = memory.remember_many(_contents(12), principal=CURATOR)
    indexer.sync()  # 3 parked, the rest passed over
    assert indexer.catalog.parked == 3 and indexer.catalog.rescan_from is not None
    last = outcomes[-1].record
    assert last is not None
    memory.archive(last.id, principal=CURATOR)
    # Reads embed a little at a time, as the pipeline does, until nothing is left.
    while indexer.catalog.pending or indexer.catalog.rescan_from is not None:
        indexer.sync()
        indexer.catch_up(limit=2)
    catalog = indexer.catalog
    assert len(catalog) == store.chunk_count()
    archived_rows = [catalog.row_of(c.id) for c in store.chunk_changes(0)
                     if c.record_id == last.id]  # fmt: skip
    assert archived_rows and all(row is not None for row in archived_rows)
    assert {int(catalog._status[row]) for row in archived_rows if row is not None} == {4}


def test_int8_copy_error_stays_within_its_bound() -> None:
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((500, 64)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    codes, scales = catalog_module._quantize(rows)
    assert codes.dtype == np.int8 and np.abs(codes).max() == 127
    for q in rng.standard_normal((20, 64)).astype(np.float32):
        error = np.abs(rows @ q - (codes.astype(np.float32) @ q) * scales)
        assert (error <= 0.5 * scales * np.abs(q).sum() * 1.0001).all()


def test_exact_fallback_scanned_in_blocks_matches_an_exact_catalog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(catalog_module, "_SCAN_BLOCK", 64)
    rng = np.random.default_rng(12)
    vectors = rng.standard_normal((3000, DIM * 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    metas = [_meta(i, acl_id=1 + i % 3) for i in range(3000)]
    given = {m.text_hash: vectors[i] for i, m in enumerate(metas)}
    ann = VectorCatalog(DIM * 4, ann_threshold=0)  # every filtered read below is exact
    ann.apply(metas, given)
    exact = VectorCatalog(DIM * 4, ann_threshold=None)
    exact.apply(metas, given)
    assert ann.uses_ann and not exact.uses_ann
    where = dataclasses.replace(_where(), acl_ids=frozenset({2}))
    for query in vectors[:40] + 0.1 * rng.standard_normal((40, DIM * 4)).astype(np.float32):
        found, expected = ann.search(query, where, 30), exact.search(query, where, 30)
        assert [hit for hit, _ in found] == [hit for hit, _ in expected]
        assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-6)
