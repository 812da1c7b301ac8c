"""The file-backed vector cache: vectors survive a restart, the file stays bounded."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from cairn.search.embedder import CachedEmbedder
from cairn.search.vector_cache import DiskVectorCache
from tests.factories import CountingEmbedder


def test_vectors_survive_a_restart_and_are_not_embedded_again(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    first_model = CountingEmbedder()
    first = CachedEmbedder(first_model, DiskVectorCache(path))
    before = first.embed(["alpha", "beta"])
    query_before = first.embed_query("gamma")
    assert isinstance(first.cache, DiskVectorCache)
    first.cache.close()

    # A new process: nothing in memory, only the file.
    code = (
        "import sys, numpy as np\n"
        "from pathlib import Path\n"
        "from cairn.search.vector_cache import DiskVectorCache\n"
        "from cairn.search.embedder import content_key\n"
        "cache = DiskVectorCache(Path(sys.argv[1]))\n"
        "print(len(cache), content_key('counting', 'alpha') in cache)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["3", "True"]

    second_model = CountingEmbedder()
    second = CachedEmbedder(second_model, DiskVectorCache(path))
    np.testing.assert_array_equal(second.embed(["beta", "alpha"]), before[::-1])
    np.testing.assert_array_equal(second.embed_query("gamma"), query_before)
    second.embed(["delta"])
    assert second_model.seen == ["delta"]


def test_the_oldest_written_entries_go_first(tmp_path: Path) -> None:
    cache = DiskVectorCache(tmp_path / "v.sqlite", max_items=3)  # nine tenths of 3 is 3
    cache.update({"a": b"1", "b": b"2", "c": b"3"})
    cache["a"] = b"1'"  # rewritten: now the newest
    cache["d"] = b"4"
    assert list(cache) == ["c", "a", "d"]
    assert cache["a"] == b"1'"
    assert "b" not in cache
    cache.update([("e", b"5"), ("f", b"6"), ("g", b"7"), ("h", b"8")])
    assert list(cache) == ["f", "g", "h"]


def test_a_write_below_the_bound_does_not_count_the_file(tmp_path: Path) -> None:
    # A query's vector is written on the read path: counting the whole file on every write
    # cost ~3.5 ms at 100k entries.
    cache = DiskVectorCache(tmp_path / "v.sqlite", max_items=100)
    cache.update({f"k{i}": b"v" for i in range(10)})
    statements: list[str] = []
    cache._db.set_trace_callback(statements.append)
    cache["query"] = b"q"
    cache.update({"k1": b"rewritten", "k2": b"rewritten"})
    assert statements and not [s for s in statements if "COUNT" in s.upper()]
    assert len(cache) == 11


def test_two_processes_writing_one_file_keep_it_bounded(tmp_path: Path) -> None:
    # Each keeps its own count; passing the bound makes it count the file exactly, so the
    # other's entries are trimmed too, oldest first, down to nine tenths of the bound.
    path = tmp_path / "v.sqlite"
    first, second = DiskVectorCache(path, max_items=10), DiskVectorCache(path, max_items=10)
    first.update({f"a{i}": b"1" for i in range(6)})
    second.update({f"b{i}": b"2" for i in range(6)})  # 12 in the file: trimmed to 9
    assert list(first) == [*(f"a{i}" for i in range(3, 6)), *(f"b{i}" for i in range(6))]
    first.update({f"c{i}": b"3" for i in range(5)})  # 6 + 5 of its own: past the bound
    assert list(first) == [*(f"b{i}" for i in range(2, 6)), *(f"c{i}" for i in range(5))]
    del first["c0"]
    first.update({"d": b"4"})
    assert len(second) == 9


def test_mapping_behaviour(tmp_path: Path) -> None:
    cache = DiskVectorCache(tmp_path / "nested" / "dir" / "v.sqlite")
    assert len(cache) == 0
    with pytest.raises(KeyError):
        cache["missing"]
    cache["k"] = b"\x00\x01"
    del cache["k"]
    with pytest.raises(KeyError):
        del cache["k"]
    with pytest.raises(ValueError):
        DiskVectorCache(tmp_path / "x.sqlite", max_items=0)


def test_threads_share_one_cache(tmp_path: Path) -> None:
    cache = DiskVectorCache(tmp_path / "v.sqlite")
    embedder = CachedEmbedder(CountingEmbedder(), cache)
    texts = [f"text {i}" for i in range(200)]
    errors: list[BaseException] = []

    def work(part: list[str]) -> None:
        try:
            embedder.embed(part)
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(texts[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(cache) == 200


def test_a_configured_cache_file_keeps_query_vectors_across_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.search.embedder import content_key
    from cairn.workspace import Workspace

    monkeypatch.delenv("CAIRN_VECTOR_CACHE", raising=False)
    workspace = Workspace(tmp_path / "store")
    keys = workspace.init().keys
    (workspace.folder / "config.toml").write_text('vector_cache = "vectors.sqlite"\n')
    principal = workspace.authenticate(keys["agent"])
    query = "where the kettle lives"
    path = workspace.folder / "vectors.sqlite"

    for _restart in range(2):
        with workspace.open_memory(embedder="static") as memory:
            memory.search(query, principal=principal, mode="vector")
            assert memory.indexer is not None
            name = memory.indexer.embedder.name
        # closing the memory closed the file (SQLite folds its WAL in on the last close)
        assert not path.with_name(path.name + "-wal").exists()
        cache = DiskVectorCache(path)
        # the query's vector is in the file (once, however often it is asked)
        assert list(cache) == [content_key(name, query, kind="query")]
        cache.close()
    assert path.stat().st_mode & 0o077 == 0, "the cache file is the user's alone"


def test_an_empty_or_folder_vector_cache_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.errors import InvalidInput
    from cairn.workspace import Workspace

    workspace = Workspace(tmp_path / "store")
    workspace.init()
    # an empty variable is how a shell unsets it: no cache file, no error
    monkeypatch.setenv("CAIRN_VECTOR_CACHE", "")
    with workspace.open_memory(embedder="static") as memory:
        memory.index_pending()
    assert sorted(p.name for p in workspace.folder.iterdir() if "sqlite" in p.name) == []
    # a folder is refused by name, before anything opens
    monkeypatch.setenv("CAIRN_VECTOR_CACHE", str(tmp_path))
    with pytest.raises(InvalidInput, match="vector_cache names a folder"):
        workspace.open_memory(embedder="static")
