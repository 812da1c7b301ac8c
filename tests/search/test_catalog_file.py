"""The dense index saved at close and loaded by the next process: the same answers as an
index built from the store, the store's later changes taken in, and a saved index that is
not this store's, unreadable or tampered with never used against the store's word."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.memory.indexing import INDEX_FOLDER
from cairn.model import Acl, Content, ContentPatch, Principal, PrincipalKind, Sensitivity, Status
from cairn.retrieval import indexer as indexer_module
from cairn.retrieval.types import VECTOR_INDEX_BUSY
from cairn.search import catalog as catalog_module
from cairn.search import catalog_file
from cairn.search.catalog import VectorCatalog
from cairn.store.base import ChunkFilter
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR, chunk_meta
from tests.search.building import building_in_another_thread
from tests.timeline.events import AGENT as TIMELINE_AGENT
from tests.timeline.events import READER as TIMELINE_READER
from tests.timeline.events import T0, conversation, event

DIM = 16
WORDS = ("harbour", "ledger", "orchid", "granite", "violet", "tundra", "copper", "meadow")
READER = Principal(
    id="pat", kind=PrincipalKind.HUMAN, roles=("member",), scopes=("acme/*",),
    labels=("public",), sensitivity=Sensitivity.LOW,
)  # fmt: skip


# ---- the catalog's own state, saved and restored ------------------------------------------


def _filled(catalog: VectorCatalog, rows: int, seed: int = 5) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    metas = [
        chunk_meta(i, id=1 + i, acl_id=1 + i % 3, scope_id=1 + i % 4,
                   kind=("fact", "decision")[i % 2], status=("active", "stale")[i % 5 == 0])
        for i in range(rows)
    ]  # fmt: skip
    catalog.apply(metas, {m.text_hash: vectors[i] for i, m in enumerate(metas)})
    return {"vectors": vectors}


def _filters() -> list[ChunkFilter]:
    active = frozenset({"active"})
    return [
        ChunkFilter(acl_ids=frozenset({1, 2, 3}), statuses=active),
        ChunkFilter(acl_ids=frozenset({2}), statuses=active, scope_ids=frozenset({1, 3})),
        ChunkFilter(acl_ids=frozenset({1, 3}), statuses=active, kinds=frozenset({"decision"})),
        ChunkFilter(acl_ids=frozenset({1}), statuses=frozenset({"active", "stale"}),
                    record_ids=frozenset({"rec-3", "rec-40", "rec-41"})),
    ]  # fmt: skip


def _answers(catalog: VectorCatalog, queries: np.ndarray) -> list[list[tuple[int, float]]]:  # type: ignore[type-arg]
    return [catalog.search(q, where, 10) for q in queries for where in _filters()]


@pytest.mark.parametrize("threshold", [None, 300], ids=["exact", "graph"])
def test_a_restored_catalog_answers_as_the_saved_one(tmp_path: Path, threshold: int | None) -> None:
    saved = VectorCatalog(DIM, ann_threshold=threshold, ann_dims=None)
    _filled(saved, 900)
    assert saved.uses_ann is (threshold is not None)
    queries = np.random.default_rng(9).normal(size=(12, DIM)).astype(np.float32)
    catalog_file.save_catalog(tmp_path, saved.state(), model="m:16", fingerprint={"1": ["v", "h"]})
    loaded = catalog_file.load_catalog(tmp_path, model="m:16")
    assert loaded is not None and loaded[1] == {"1": ["v", "h"]}
    restored = VectorCatalog(DIM, ann_threshold=threshold, ann_dims=None)
    restored.restore(loaded[0])
    assert restored.seq == saved.seq and len(restored) == len(saved)
    assert restored.uses_ann is saved.uses_ann
    assert _answers(restored, queries) == _answers(saved, queries)
    # Both go on alike: a state change and new rows (a graph's tail joins it at 2,048).
    more = np.random.default_rng(11).normal(size=(2100, DIM)).astype(np.float32)
    metas = [chunk_meta(900 + i, id=901 + i, acl_id=1) for i in range(2100)]
    changes = [chunk_meta(7, id=8, acl_id=1, status="archived", seq=5000), *metas]
    for catalog in (saved, restored):
        catalog.apply(changes, {m.text_hash: more[i] for i, m in enumerate(metas)})
    assert _answers(restored, queries) == _answers(saved, queries)
    assert all(8 not in {i for i, _ in hits} for hits in _answers(restored, queries))


def test_a_catalog_restores_only_under_its_own_settings(tmp_path: Path) -> None:
    saved = VectorCatalog(DIM, ann_threshold=None)
    _filled(saved, 50)
    with pytest.raises(ValueError, match="other settings"):
        VectorCatalog(DIM, ann_threshold=100).restore(saved.state())
    used = VectorCatalog(DIM, ann_threshold=None)
    _filled(used, 5)
    with pytest.raises(ValueError, match="only a new catalog"):
        used.restore(saved.state())
    waiting = VectorCatalog(DIM)
    waiting.apply([chunk_meta(1)], {})  # no vector yet: not settled
    with pytest.raises(ValueError, match="waiting"):
        waiting.state()


def test_the_saved_files_are_private_and_replace_the_previous_ones(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    catalog = VectorCatalog(DIM, ann_threshold=100, ann_dims=None)
    _filled(catalog, 300)
    for _ in range(2):
        catalog_file.save_catalog(folder, catalog.state(), model="m", fingerprint={})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    names = sorted(p.name for p in folder.iterdir())
    # one columns file, one graph file, the lock, the manifest
    assert len(names) == 4 and names[-1] == catalog_file.MANIFEST
    assert all(stat.S_IMODE((folder / n).stat().st_mode) == 0o600 for n in names)


# ---- through Memory: saved at close, loaded by the next one --------------------------------


def _memory(folder: Path) -> Memory:
    store = SqliteStore(folder / "cairn.db")
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder.parent, folder=folder,
                    embedder="static")  # fmt: skip
    indexer = memory.indexer
    assert indexer is not None
    indexer.saved_from_rows = 50  # the default (20,000) is for stores worth saving
    return memory


def _indexed_memory(tmp_path: Path) -> Memory:
    """A memory on a new store folder holding 60 public notes, all embedded."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    memory.store_many([_content(i) for i in range(60)], principal=CURATOR)
    memory.index_pending()
    return memory


def _notes_and_a_conversation(tmp_path: Path) -> Memory:
    """A memory on a new store folder holding 60 public notes and a rolled-up conversation
    (timeline search finds it by "nightly build"), none of it embedded yet."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    memory.append_events(conversation("a", T0, 12), principal=TIMELINE_AGENT)
    memory.rollup(principal=CURATOR)
    memory.store_many([_content(i) for i in range(60)], principal=CURATOR)
    return memory


def _content(i: int, *, public: bool = True) -> Content:
    rng = np.random.default_rng(i)
    words = " ".join(rng.choice(WORDS, size=5))
    return Content(
        kind="fact", scope=f"acme/team-{i % 3}", title=f"{words} {i}",
        body=f"Note {i}: {words} and {rng.choice(WORDS)} again.",
        acl=Acl(labels=("public",) if public else ("secret",), sensitivity=Sensitivity.LOW),
    )  # fmt: skip


def _search(memory: Memory, query: str, who: Principal = CURATOR) -> list[tuple[str, str]]:
    found = memory.search(query, principal=who, mode="vector", k=10)
    return [(hit.record_id, hit.version_id) for hit in found.hits]


QUERIES = ("harbour ledger orchid", "granite violet meadow", "copper tundra", "Note 57")


@pytest.fixture
def saved_store(tmp_path: Path) -> Path:
    """A store folder whose dense index was saved at close: 200 public and 40 secret notes."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    memory.store_many([_content(i) for i in range(200)], principal=CURATOR)
    memory.store_many([_content(i, public=False) for i in range(200, 240)], principal=CURATOR)
    memory.index_pending()
    _search(memory, "warm")
    memory.close()
    assert (folder / INDEX_FOLDER / catalog_file.MANIFEST).is_file()
    return folder


def _rebuilt(folder: Path, scratch: Path) -> Path:
    """A copy of the store folder without its saved index: searched, it builds from the store."""
    copy = scratch / "rebuilt"
    shutil.copytree(folder, copy)
    shutil.rmtree(copy / INDEX_FOLDER)
    return copy


def test_the_next_memory_loads_the_saved_index_and_takes_in_later_changes(
    saved_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _memory(saved_store)  # changes the store after the index was saved
    made = writer.store_many([_content(i) for i in range(240, 260)], principal=CURATOR)
    writer.index_pending()
    gone = made[3].record
    assert gone is not None
    writer.transition(gone.id, Status.ARCHIVED, principal=CURATOR, reason="done")
    writer._indexer = None
    writer.close()
    loaded = _memory(saved_store)
    rebuilt = _memory(_rebuilt(saved_store, tmp_path))
    taken: list[int] = []
    original = VectorCatalog.apply

    def counting(self: VectorCatalog, changes: Any, vectors: Any) -> None:
        taken.append(len(changes))
        original(self, changes, vectors)

    monkeypatch.setattr(VectorCatalog, "apply", counting)
    _search(loaded, QUERIES[0])
    # What it read from the store: the 20 new chunks and the archived one, not all 260.
    assert 0 < sum(taken) <= 21
    for query in QUERIES:
        assert _search(loaded, query) == _search(rebuilt, query)
        assert gone.id not in {hit for hit, _ in _search(loaded, query)}
    loaded_indexer = loaded.indexer
    assert loaded_indexer is not None and len(loaded_indexer.catalog) == 260
    loaded.close()
    rebuilt.close()


def test_a_saved_index_of_another_store_or_unreadable_is_not_used(
    saved_store: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other" / ".cairn"
    other.mkdir(parents=True)
    memory = _memory(other)
    memory.store_many([_content(i + 1000) for i in range(60)], principal=CURATOR)
    memory.index_pending()
    expected = {q: _search(memory, q) for q in QUERIES}
    memory._indexer = None
    memory.close()
    shutil.copytree(saved_store / INDEX_FOLDER, other / INDEX_FOLDER)
    reopened = _memory(other)
    assert {q: _search(reopened, q) for q in QUERIES} == expected
    reopened._indexer = None
    reopened.close()
    columns = next((other / INDEX_FOLDER).glob("columns-*.npz"))
    columns.write_bytes(columns.read_bytes()[:1000])  # cut short
    shutil.copyfile(saved_store / "cairn.db", other / "cairn.db")  # now the store matches
    for suffix in ("-wal", "-shm"):
        (other / f"cairn.db{suffix}").unlink(missing_ok=True)
    truncated = _memory(other)
    rebuilt = _memory(_rebuilt(saved_store, tmp_path))
    assert [_search(truncated, q) for q in QUERIES] == [_search(rebuilt, q) for q in QUERIES]
    truncated.close()
    rebuilt.close()


def test_a_tampered_saved_index_leaks_nothing(saved_store: Path) -> None:
    """Every row of the saved index is given the reader's ACL: vector recall then offers the
    secret notes, and the store's own rows still keep them out."""
    columns = next((saved_store / INDEX_FOLDER).glob("columns-*.npz"))
    with np.load(columns) as held:
        arrays = {name: held[name] for name in held.files}
    store = SqliteStore(saved_store / "cairn.db")
    rows = store.chunk_rows(arrays["ids"].tolist())
    store.close()
    public_acl = {rows[int(i)].meta.acl_id for i in arrays["ids"][:200]}
    assert len(public_acl) == 1
    arrays["acl"][:] = next(iter(public_acl))
    os.chmod(columns, 0o600)
    with columns.open("wb") as handle:
        np.savez(handle, **arrays)
    memory = _memory(saved_store)
    secret = {rows[int(i)].meta.record_id for i in arrays["ids"][200:]}
    for i in range(200, 240, 4):
        query = _content(i, public=False).body
        seen = {hit for hit, _ in _search(memory, query, READER)}
        assert seen and not seen & secret
    indexer = memory.indexer
    assert indexer is not None and len(indexer.catalog) == 240  # the tampered index was used
    memory._indexer = None
    memory.close()


_LOAD_AND_SEARCH = """
import json, sys
import numpy as np
from pathlib import Path
from cairn.search import catalog_file
from cairn.search.catalog import VectorCatalog
from cairn.store.base import ChunkFilter
loaded = catalog_file.load_catalog(Path(sys.argv[1]), model="m")
catalog = VectorCatalog(16, ann_threshold=None, ann_dims=None)
catalog.restore(loaded[0])
where = ChunkFilter(acl_ids=frozenset({1, 2, 3}), statuses=frozenset({"active", "stale"}),
                    record_ids=frozenset({"rec-3", "rec-40", "rec-41"}),
                    version_ids=frozenset({"ver-3", "ver-40", "ver-41"}))
query = np.asarray(json.loads(sys.argv[2]), dtype=np.float32)
print(json.dumps([i for i, _ in catalog.search(query, where, 10)]))
"""


def test_another_process_reads_the_saved_ids_alike(tmp_path: Path) -> None:
    """Version and record ids are kept as hashes: the saved ones must match another
    process's (Python salts its own ``hash`` of a str per process)."""
    catalog = VectorCatalog(DIM, ann_threshold=None, ann_dims=None)
    _filled(catalog, 100)
    catalog_file.save_catalog(tmp_path, catalog.state(), model="m", fingerprint={})
    query = np.ones(DIM, dtype=np.float32)
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    found = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_SEARCH, str(tmp_path), json.dumps(query.tolist())],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    # rec-3, rec-40, rec-41 (chunk ids 4, 41, 42; the first two are active or stale)
    assert sorted(json.loads(found)) == [4, 41, 42]


def test_a_store_put_back_to_an_older_copy_is_not_mirrored_from_a_later_save(
    saved_store: Path, tmp_path: Path
) -> None:
    """The store is backed up, changed (state only: texts and versions stay), the index saved
    again, then the backup restored and written to: the saved index has seen changes the
    store no longer has, and would skip the store's new ones, which reuse their numbers."""
    backup = tmp_path / "backup.db"
    shutil.copyfile(saved_store / "cairn.db", backup)
    memory = _memory(saved_store)
    ids = [hit for hit, _ in _search(memory, "Note 3")]
    for record_id in ids[:4]:
        memory.transition(record_id, Status.ARCHIVED, principal=CURATOR, reason="old")
    _search(memory, "warm")
    memory.close()  # saved, having seen the archiving
    for suffix in ("", "-wal", "-shm"):
        (saved_store / f"cairn.db{suffix}").unlink(missing_ok=True)
    shutil.copyfile(backup, saved_store / "cairn.db")
    writer = _memory(saved_store)
    writer._indexer = None  # writes only, as a CLI would
    made = writer.store_many([_content(i) for i in range(300, 310)], principal=CURATOR)
    record = made[0].record
    assert record is not None
    writer.transition(ids[0], Status.ARCHIVED, principal=CURATOR, reason="again")
    writer.close()
    reader = _memory(saved_store)
    rebuilt = _memory(_rebuilt(saved_store, tmp_path))
    for memory_ in (reader, rebuilt):
        memory_.index_pending()
    for query in (*QUERIES, _content(300).body):
        assert _search(reader, query) == _search(rebuilt, query)
    assert record.id in {hit for hit, _ in _search(reader, _content(300).body)}
    reader.close()
    rebuilt.close()


def test_an_older_version_made_to_look_current_in_the_saved_index_stays_hidden(
    tmp_path: Path,
) -> None:
    """A record made secret by a new version: its older, public version is flagged current in
    the saved file; the store's rows still say it is not, and its head is not readable."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    made = memory.store_many([_content(i) for i in range(60)], principal=CURATOR)
    target = made[7].record
    assert target is not None
    secret = Acl(labels=("secret",), sensitivity=Sensitivity.LOW)
    memory.update(target.id, ContentPatch(acl=secret, body="now secret"), principal=CURATOR,
                  reason="restricted")  # fmt: skip
    memory.index_pending()
    assert target.id not in {hit for hit, _ in _search(memory, _content(7).body, READER)}
    memory.close()
    columns = next((folder / INDEX_FOLDER).glob("columns-*.npz"))
    with np.load(columns) as held:
        arrays = {name: held[name] for name in held.files}
    arrays["head"][:] = True
    arrays["superseded"][:] = False
    arrays["acl"][:] = arrays["acl"][0]  # a public note's
    with columns.open("wb") as handle:
        np.savez(handle, **arrays)
    tampered = _memory(folder)
    for mode in ("vector", "hybrid"):
        found = tampered.search(_content(7).body, principal=READER, mode=mode, k=10)
        assert target.id not in {hit.record_id for hit in found.hits}
    retrieved = tampered.retrieve(_content(7).body, principal=READER, mode="vector")
    assert target.id not in {item.record_id for item in retrieved.items}
    indexer = tampered.indexer
    assert indexer is not None and len(indexer.catalog) == 61  # the tampered file was used
    tampered._indexer = None
    tampered.close()


def test_timeline_search_checks_the_store_too(tmp_path: Path) -> None:
    """Timeline search reads the same saved index: a node of a scope the reader cannot see,
    given the reader's scope and ACL in the saved file, is still not returned."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    memory.append_events(conversation("a", T0, 30), principal=TIMELINE_AGENT)
    insider = TIMELINE_AGENT.model_copy(update={"id": "other-bot", "scopes": ("other/*",)})
    secret_line = event("z9", T0 + timedelta(minutes=9), "zebra quartz plan", scope="other/secret")
    memory.append_events([*conversation("z", T0, 4, scope="other/secret"), secret_line],
                         principal=insider)  # fmt: skip
    memory.rollup(principal=CURATOR)
    memory.store_many([_content(i) for i in range(60)], principal=CURATOR)  # worth saving
    memory.index_pending()
    memory.close()
    columns = next((folder / INDEX_FOLDER).glob("columns-*.npz"))
    with np.load(columns) as held:
        arrays = {name: held[name] for name in held.files}
    store = SqliteStore(folder / "cairn.db")
    names = store.scopes()
    metas = store.chunk_metas(arrays["ids"].tolist())
    store.close()
    secret = {m.record_id for m in metas.values() if names[m.scope_id] == "other/secret"}
    acme = next(m for m in metas.values() if names[m.scope_id].startswith("acme/"))

    def found(memory: Memory, who: Principal) -> set[str]:
        return {
            hit.node_id for hit in memory.timeline_search("zebra quartz plan", principal=who).hits
        }

    untouched = _memory(folder)
    assert found(untouched, CURATOR) & secret  # the secret scope's nodes are found
    assert not found(untouched, TIMELINE_READER) & secret
    untouched._indexer = None
    untouched.close()
    arrays["acl"][:] = acme.acl_id
    arrays["scope"][:] = acme.scope_id
    with columns.open("wb") as handle:
        np.savez(handle, **arrays)
    tampered = _memory(folder)
    assert not found(tampered, TIMELINE_READER) & secret
    indexer = tampered.indexer
    assert indexer is not None and len(indexer.catalog) == len(arrays["ids"])
    tampered._indexer = None
    tampered.close()


def test_an_idle_worker_saves_a_grown_index_without_waiting_for_close(tmp_path: Path) -> None:
    """A server stopped without closing still leaves a saved index: the background worker
    saves one once idle, and again only when the index has grown by half."""
    folder = tmp_path / ".cairn"
    folder.mkdir()
    memory = _memory(folder)
    manifest = folder / INDEX_FOLDER / catalog_file.MANIFEST
    worker = memory.start_indexing(poll=60)  # woken by commits, not by the poll
    assert worker is not None
    try:
        memory.store_many([_content(i) for i in range(60)], principal=CURATOR)
        assert worker.wait_idle(60)
        assert manifest.is_file()  # saved by the worker, the memory still open
        first = json.loads(manifest.read_text())["meta"]["rows"]
        memory.store_many([_content(i) for i in range(60, 80)], principal=CURATOR)  # +1/3
        assert worker.wait_idle(60)
        assert json.loads(manifest.read_text())["meta"]["rows"] == first
        memory.store_many([_content(i) for i in range(80, 100)], principal=CURATOR)  # +2/3
        assert worker.wait_idle(60)
        assert json.loads(manifest.read_text())["meta"]["rows"] == 100
    finally:
        memory.close()
    assert json.loads(manifest.read_text())["meta"]["rows"] == 100


T = TypeVar("T")


def _answers_at_once(read: Callable[[], T]) -> T:
    """``read()``, which must not wait for the index's lock: run in a thread and given ten
    seconds, where the thread holding the lock would keep it for a minute."""
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(read)
        try:
            return answer.result(timeout=10)  # an error inside the read is raised here
        except TimeoutError:
            raise AssertionError("the read waited for the index") from None


def test_a_read_does_not_wait_while_another_thread_builds_the_index(tmp_path: Path) -> None:
    """While the first mirroring of the store (a build, or a load) runs in another thread, a
    read answers by keyword at once and says so, and so do the statuses and a timeline
    search; once built, reads use vectors again."""
    memory = _notes_and_a_conversation(tmp_path)
    indexer = memory.indexer
    assert indexer is not None
    with building_in_another_thread(indexer):
        answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
        assert answered.trace.vector_index_busy and answered.items  # keyword answered
        assert any("index is busy" in warning for warning in answered.warnings)
        by_keyword = memory.retrieve("Note 7", principal=CURATOR, mode="keyword")
        assert [(i.version_id, i.scores.confidence) for i in answered.items] == [
            (i.version_id, i.scores.confidence) for i in by_keyword.items
        ]  # scored as the keyword read it was
        assert memory.search("Note 7", principal=CURATOR, mode="vector").hits == ()
        status = _answers_at_once(lambda: memory.status(principal=CURATOR))
        assert status["vector_index_busy"] == 1 and status["vector_lag"] > 0
        timeline = _answers_at_once(lambda: memory.timeline_status(principal=CURATOR))
        assert timeline.vector_index_busy
        found = memory.timeline_search("nightly build", principal=CURATOR)
        assert found.hits and all("vector" not in hit.signals for hit in found.hits)
        assert any("index is busy" in warning for warning in found.warnings)
    memory.index_pending()
    after = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    assert not after.trace.vector_index_busy
    assert any("vector_match" in item.why_included for item in after.items)
    assert memory.status(principal=CURATOR)["vector_index_busy"] == 0
    assert not memory.timeline_status(principal=CURATOR).vector_index_busy
    found = memory.timeline_search("nightly build", principal=CURATOR)
    assert found.warnings == () and any("vector" in hit.signals for hit in found.hits)
    memory._indexer = None
    memory.close()


def test_a_read_does_not_wait_for_a_save_and_a_failed_idle_save_waits_for_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memory = _indexed_memory(tmp_path)
    indexer = memory.indexer
    assert indexer is not None
    assert (
        memory.retrieve("Note 7", principal=CURATOR, mode="hybrid").trace.vector_index_busy is False
    )
    saving, finish = threading.Event(), threading.Event()
    real_save = indexer_module.save_catalog

    def slow_save(*args: Any, **kwargs: Any) -> bool:
        saving.set()
        assert finish.wait(60)
        return real_save(*args, **kwargs)

    monkeypatch.setattr(indexer_module, "save_catalog", slow_save)
    saver = threading.Thread(target=indexer.save)
    saver.start()
    try:
        assert saving.wait(60)
        answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
        assert answered.trace.vector_index_busy and answered.items
        status = _answers_at_once(lambda: memory.status(principal=CURATOR))
        assert status["vector_index_busy"] == 1
    finally:
        finish.set()
        saver.join(60)
    calls: list[int] = []

    def failing_save(*args: Any, **kwargs: Any) -> bool:
        calls.append(1)
        raise OSError("read-only file system")

    monkeypatch.setattr(indexer_module, "save_catalog", failing_save)
    memory.store_many([_content(i) for i in range(60, 100)], principal=CURATOR)  # +2/3
    memory.index_pending()
    with caplog.at_level("WARNING", logger="cairn.indexer"):
        assert indexer.save(grown_by=0.5) is False
        assert indexer.save(grown_by=0.5) is False  # not tried again before it grows
    assert len(calls) == 1 and "read-only file system" in caplog.text
    with pytest.raises(OSError):
        indexer.save()  # closing tries, and says why it could not
    memory._indexer = None
    memory.close()


class _SaysWhenAsked:
    """The index's lock, which sets ``asked`` when a thread other than ``holder`` asks for
    it while it is held: so a test knows a read is waiting without sleeping."""

    def __init__(self, lock: Any) -> None:
        self._inner = lock
        self.asked = threading.Event()
        self.holder: int | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got: bool = self._inner.acquire(blocking=False)
        if got:
            return True
        if threading.get_ident() != self.holder:
            self.asked.set()
        if not blocking:
            return False
        return bool(self._inner.acquire(timeout=timeout))

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_read_waits_for_a_moment_of_the_lock_and_builds_a_small_index(tmp_path: Path) -> None:
    """Before the first mirroring, another thread holding the index's lock for a moment (a
    catch-up taking in a batch, a search) is not a build: a read of a small store waits for
    it and mirrors the store itself, instead of answering by keyword alone as if busy."""
    memory = _indexed_memory(tmp_path)
    memory._indexer = None  # a new process: nothing mirrored yet
    indexer = memory.indexer
    assert indexer is not None
    lock = _SaysWhenAsked(indexer._lock)
    indexer._lock = lock  # type: ignore[assignment]
    held = threading.Event()

    def hold_for_a_moment() -> None:
        with lock:
            lock.holder = threading.get_ident()
            held.set()
            assert lock.asked.wait(60)  # the read is waiting for the lock

    holder = threading.Thread(target=hold_for_a_moment)
    holder.start()
    try:
        assert held.wait(60)
        answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    finally:
        lock.asked.set()
        holder.join(60)
    assert not answered.trace.vector_index_busy and answered.warnings == ()
    assert any("vector_match" in item.why_included for item in answered.items)
    assert len(indexer.catalog) > 0  # mirrored by the read
    memory._indexer = None
    memory.close()


def test_a_read_waits_no_longer_than_its_patience_for_the_lock(tmp_path: Path) -> None:
    """A thread may hold the index's lock for seconds with no busy flag (a sync taking in a
    large import): a read waits ``read_patience`` for it, then answers by keyword alone and
    says so, while the lock is still held."""
    memory = _indexed_memory(tmp_path)
    indexer = memory.indexer
    assert indexer is not None
    indexer.sync()  # mirrored: nothing about the index is busy
    indexer.read_patience = 0.1
    held, done = threading.Event(), threading.Event()

    def hold_until_the_read_is_done() -> None:
        with indexer._lock:
            held.set()
            assert done.wait(60)

    holder = threading.Thread(target=hold_until_the_read_is_done)
    holder.start()
    try:
        assert held.wait(60)
        assert not indexer.busy
        answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
        still_held = holder.is_alive()
    finally:
        done.set()
        holder.join(60)
    assert still_held  # the read did not wait for the holder
    assert answered.trace.vector_index_busy and answered.warnings == (VECTOR_INDEX_BUSY,)
    assert answered.items and all(i.why_included == ("keyword_match",) for i in answered.items)
    again = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    assert not again.trace.vector_index_busy
    assert any("vector_match" in item.why_included for item in again.items)
    memory.close()


def test_a_read_waits_no_longer_than_its_patience_for_rows_joining_the_graph(
    tmp_path: Path,
) -> None:
    """Rows join the graph in a thread of their own (a catch-up's), and the graph cannot be
    searched meanwhile: a read waits ``read_patience`` for that, then answers by keyword
    alone and says so, while the rows are still joining."""
    memory = _indexed_memory(tmp_path)
    indexer = memory.indexer
    assert indexer is not None
    indexer.sync()
    indexer.read_patience = 0.1
    catalog = indexer.catalog
    joined = threading.Event()
    insert = catalog_module._Insert(catalog._indexed, catalog._indexed)
    insert.thread = threading.Thread(target=lambda: joined.wait(60))
    insert.thread.start()
    catalog._insert = insert  # as _flush_tail leaves it while hnswlib inserts
    try:
        answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
        still_joining = insert.thread.is_alive()
    finally:
        joined.set()
        insert.thread.join(60)
    assert still_joining  # the read did not wait for the rows
    assert answered.trace.vector_index_busy and answered.warnings == (VECTOR_INDEX_BUSY,)
    again = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    assert not again.trace.vector_index_busy and catalog._insert is None
    assert any("vector_match" in item.why_included for item in again.items)
    memory.close()


class _TakenWhenFirstLetGo:
    """The index's lock, taken by another thread (``holder``) the moment any other thread
    first lets go of it, and kept until ``done``: a sync of a large import (seconds, with no
    busy flag) that gets its turn right after a read's first turn, with no sleeps."""

    def __init__(self, lock: Any) -> None:
        self._inner = lock
        self.taken, self.done = threading.Event(), threading.Event()
        self.holder = threading.Thread(target=self._hold)

    def _hold(self) -> None:
        with self._inner:
            self.taken.set()
            assert self.done.wait(60)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return bool(self._inner.acquire(blocking, timeout))

    def release(self) -> None:
        self._inner.release()
        if threading.current_thread() is not self.holder and not self.taken.is_set():
            self.holder.start()
            assert self.taken.wait(60)

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("search", ["records", "timeline"])
def test_a_read_keeps_its_one_turn_with_the_index_from_sync_to_search(
    tmp_path: Path, search: str
) -> None:
    """A sync of a large import may take the index's lock the moment a read lets go of it.
    A read lets go of it once, after its sync, its count of what waits for a vector and its
    search: it answers with vectors, not held up by that sync (it would be, for the sync's
    whole length, if it took the lock again to count or to search); the next read, which
    finds the lock held, answers by keyword within its patience and says so."""
    memory = _notes_and_a_conversation(tmp_path)
    memory.index_pending()
    indexer = memory.indexer
    assert indexer is not None
    indexer.sync()  # mirrored: nothing about the index is busy
    indexer.read_patience = 0.1
    lock = _TakenWhenFirstLetGo(indexer._lock)
    indexer._lock = lock  # type: ignore[assignment]

    def read() -> tuple[tuple[str, ...], bool]:
        """The read's warnings, and whether vector search found anything."""
        if search == "records":
            answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
            assert answered.items
            return answered.warnings, any(
                "vector_match" in item.why_included for item in answered.items
            )
        found = memory.timeline_search("nightly build", principal=CURATOR)
        assert found.hits
        return found.warnings, any("vector" in hit.signals for hit in found.hits)

    with ThreadPoolExecutor(1) as pool:  # the holder keeps the lock for a minute
        try:
            first = pool.submit(read).result(timeout=10)
            assert lock.taken.is_set()  # the other thread took the lock as the read let go
            second = pool.submit(read).result(timeout=10)
            still_held = lock.holder.is_alive()
        except TimeoutError:
            raise AssertionError("the read waited for the index") from None
        finally:
            lock.done.set()
    lock.holder.join(60)
    assert first == ((), True)  # vectors searched, nothing waiting, not busy
    assert second == ((VECTOR_INDEX_BUSY,), False)  # keyword alone, within its patience
    assert still_held
    memory.close()


def test_with_a_worker_a_read_leaves_a_large_index_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _indexed_memory(tmp_path)
    memory._indexer = None  # a new process, whose worker has not started its first pass
    indexer = memory.indexer
    assert indexer is not None
    indexer.background = True
    monkeypatch.setattr(indexer_module, "BUILT_BY_READS_UP_TO", 10)
    answered = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    assert answered.trace.vector_index_busy and len(indexer.catalog) == 0  # not built here
    assert memory.status(principal=CURATOR)["vector_index_busy"] == 1  # left to the worker
    indexer.sync()  # the worker's first pass
    again = memory.retrieve("Note 7", principal=CURATOR, mode="hybrid")
    assert not again.trace.vector_index_busy
    assert memory.status(principal=CURATOR)["vector_index_busy"] == 0
    assert any("vector_match" in item.why_included for item in again.items)
    memory._indexer = None
    memory.close()


def test_an_idle_save_gives_up_while_another_process_saves(tmp_path: Path) -> None:
    catalog = VectorCatalog(DIM, ann_threshold=None)
    _filled(catalog, 50)
    folder = tmp_path / "index"
    catalog_file.save_catalog(folder, catalog.state(), model="m", fingerprint={})
    with (folder / "save.lock").open("r+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as another process would, while it saves
        assert not catalog_file.save_catalog(
            folder, catalog.state(), model="m", fingerprint={}, wait=False
        )


@pytest.mark.parametrize(
    "tampered",
    [
        {"columns": "../columns-outside.npz"},  # a path out of the folder
        {"columns": "ABSOLUTE"},  # the same file, named by its absolute path
        {"graph": "graph-../../x.hnsw"},
        {"fingerprint": [1, 2]},
        {"meta": {"graph_dims": "many"}},
    ],
    ids=["parent", "absolute", "graph-path", "fingerprint", "meta"],
)
def test_a_crafted_manifest_is_refused_not_followed(
    tmp_path: Path, tampered: dict[str, Any]
) -> None:
    """The manifest names the files to read: a name that is not one this module writes, or
    fields of the wrong shape, make the snapshot unusable (rebuilt), never read elsewhere."""
    catalog = VectorCatalog(DIM, ann_threshold=100, ann_dims=None)
    _filled(catalog, 300)
    folder = tmp_path / "index"
    catalog_file.save_catalog(
        folder, catalog.state(), model="m", fingerprint={"1": ["v", "h", "1"]}
    )
    manifest = folder / catalog_file.MANIFEST
    assert catalog_file.load_catalog(folder, model="m") is not None  # untouched, it loads
    # a well-formed columns file outside the folder, which a followed name would load
    outside = tmp_path / "columns-outside.npz"
    shutil.copyfile(next(folder.glob("columns-*.npz")), outside)
    if tampered.get("columns") == "ABSOLUTE":
        tampered = {"columns": str(outside)}
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | tampered))
    assert catalog_file.load_catalog(folder, model="m") is None
    manifest.write_text("[]")
    assert catalog_file.load_catalog(folder, model="m") is None
