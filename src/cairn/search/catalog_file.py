"""The dense index saved to disk, so that a process opening a large store loads it in
seconds instead of rebuilding it from every stored vector (minutes at a million chunks).

A saved catalog is a folder (``index/`` in the store folder) holding:

- ``snapshot.json``: the format, the embedding model, the catalog's counters, codes and
  settings, a fingerprint of the store it mirrors, and the names of the two files below;
- ``columns-<token>.npz``: the catalog's arrays (numpy's own format, read without pickles);
- ``graph-<token>.hnsw``: its HNSW graph, when it has one (hnswlib's own format).

The two data files are written (and flushed to disk) under a new token first and
``snapshot.json`` is then replaced atomically, so a crash leaves the previous snapshot or the
new one, never half of one; the previous token's files are removed afterwards. Processes
saving into one folder take turns (``save.lock``). The folder is ``0700`` and every file
``0600``, like the rest of the store folder, which ingest never reads.

A snapshot is a cache, never a source of truth: the indexer uses it only when its model and
format match and the store passes the snapshot's fingerprint (``Indexer._fits``); the
catalog then mirrors every change committed after the snapshot's sequence number, and a
read still checks every candidate against the store's own rows (``filters.admitted``).
Anything unreadable or out of place is ignored (and logged), and the catalog is built from
the store as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from cairn.private_files import FILE_MODE, create_private_file, make_private_folder, write_private
from cairn.search.catalog import CatalogState

__all__ = ["FORMAT", "MANIFEST", "Fingerprint", "load_catalog", "save_catalog"]

log = logging.getLogger(__name__)

FORMAT = 2
MANIFEST = "snapshot.json"
_LOCK = "save.lock"
# How long a save waits for another process's to finish before giving up (the next close
# saves again): a million-row catalog takes a few seconds.
_LOCK_WAIT_SECONDS = 60.0
# chunk id (as text) -> [version id, text hash]: a few chunks the store must still hold, as
# they were, for a snapshot to be of this store (its first and last rows among them).
Fingerprint = dict[str, list[str]]


def save_catalog(
    folder: Path, state: CatalogState, *, model: str, fingerprint: Fingerprint, wait: bool = True
) -> bool:
    """Write ``state`` to ``folder`` as the current snapshot (replacing any before it);
    whether it did. Processes saving into one folder take turns, so that none removes the
    files of the snapshot another has just made current; with ``wait`` False a save finding
    another under way gives up at once (False)."""
    make_private_folder(folder)
    lock = folder / _LOCK
    create_private_file(lock)
    with lock.open("r+b") as held:
        deadline = time.monotonic() + _LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    return False
                if time.monotonic() > deadline:
                    raise TimeoutError("another process has been saving for too long") from None
                time.sleep(0.05)  # polling a lock another process holds, not synchronising
        _save(folder, state, model=model, fingerprint=fingerprint)
    return True


def _save(folder: Path, state: CatalogState, *, model: str, fingerprint: Fingerprint) -> None:
    token = secrets.token_hex(8)
    columns = folder / f"columns-{token}.npz"
    graph = folder / f"graph-{token}.hnsw" if state.graph is not None else None
    try:
        fd = os.open(columns, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **state.arrays)  # type: ignore[arg-type]
            handle.flush()
            os.fsync(handle.fileno())
        if graph is not None:
            create_private_file(graph)  # hnswlib writes into it and keeps its mode
            state.graph.save_index(str(graph))
            _fsync(graph)
        manifest = {
            "format": FORMAT,
            "model": model,
            "settings": state.settings,
            "meta": state.meta,
            "fingerprint": fingerprint,
            "columns": columns.name,
            "graph": graph.name if graph is not None else None,
        }
        write_private(folder / MANIFEST, json.dumps(manifest))
        _fsync(folder)  # the renames are durable too
    except BaseException:
        for made in (columns, graph):
            if made is not None:
                with contextlib.suppress(FileNotFoundError):
                    made.unlink()
        raise
    keep = {columns.name, graph.name if graph is not None else "", MANIFEST}
    for entry in folder.iterdir():
        # earlier snapshots' files, and a manifest's copy a crash left behind
        earlier = entry.name.startswith(("columns-", "graph-", f".{MANIFEST}."))
        if entry.name not in keep and earlier:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


def load_catalog(folder: Path, *, model: str) -> tuple[CatalogState, Fingerprint] | None:
    """The snapshot saved in ``folder`` for ``model``, and the fingerprint to check it
    against the store; None when there is none or it cannot be used (logged)."""
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        return None
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("fingerprint"), dict):
            raise ValueError("the manifest is not one this module writes")
        if manifest.get("format") != FORMAT or manifest.get("model") != model:
            log.info("the saved dense index in %s is for another model or format", folder)
            return None
        arrays = _arrays(folder / _own_name(manifest["columns"], "columns-"))
        graph = None
        if manifest["graph"] is not None:
            dims = int(manifest["meta"]["graph_dims"])
            graph = hnswlib.Index(space="ip", dim=dims)
            graph.load_index(str(folder / _own_name(manifest["graph"], "graph-")))
        state = CatalogState(
            settings=dict(manifest["settings"]),
            meta=dict(manifest["meta"]),
            arrays=arrays,
            graph=graph,
        )
        fingerprint = {
            str(k): [str(v) for v in pair] for k, pair in manifest["fingerprint"].items()
        }
    except Exception as exc:  # anything wrong with a cache file means: build it again
        log.warning("the saved dense index in %s is unreadable (%s); rebuilding it", folder, exc)
        return None
    return state, fingerprint


def _own_name(name: Any, prefix: str) -> str:
    """A file name the manifest gives, if it is one this module writes (never a path)."""
    if not isinstance(name, str) or not name.startswith(prefix) or Path(name).name != name:
        raise ValueError(f"unexpected file name in the manifest: {name!r}")
    return name


def _arrays(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    with np.load(path, allow_pickle=False) as loaded:
        return {name: loaded[name] for name in loaded.files}


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
