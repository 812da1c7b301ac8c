"""A vector cache in a SQLite file, so vectors survive a restart.

A store already keeps every document vector it embedded, by text hash and model, so a daemon
that restarts embeds nothing twice. This file cache is for embedding outside a store: query
vectors, scripts and benchmarks that build a fresh store each run, or a second store over the
same texts. Use it as the mapping of :class:`~cairn.search.embedder.CachedEmbedder`::

    make_embedder("minilm", cache=DiskVectorCache(Path("~/.cache/cairn/vectors.sqlite")))

Keys are :func:`~cairn.search.embedder.content_key` digests (model name, kind and text), so
one file serves several models without mixing their spaces. Values are raw float32 bytes.
When the file holds more than ``max_items`` entries, the oldest written go first, down to
nine tenths of ``max_items``.

Entries are counted once per process and then kept count of, not counted on every write: a
query's vector is written on the read path, and with a count a write to a full 100k-entry
file took ~4.4 ms against ~0.07 without (bench/vector_cache.py). Entries other processes
write are counted when this process's own count passes ``max_items``: the file is then
counted exactly and trimmed. Trimming to nine tenths, not to the bound, is what keeps a full
file from being counted on every write.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path

from cairn.private_files import create_private_file

__all__ = ["DiskVectorCache"]

_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, value BLOB NOT NULL)"


class DiskVectorCache(MutableMapping[str, bytes]):
    """A bounded, thread-safe ``str -> bytes`` mapping in one SQLite file."""

    def __init__(self, path: Path, *, max_items: int = 100_000) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self.path = path.expanduser()
        self.max_items = max_items
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Vectors say something about the texts they came from: the file is the user's
        # alone, as the store's files are (SQLite gives its WAL the same mode).
        create_private_file(self.path)
        # One connection shared under a lock: the cache is used from request threads.
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._count: int | None = None  # entries as this process last knew them
        with self._lock:
            # WAL lets another process read while this one writes; NORMAL sync is enough
            # for a cache (a lost entry is only recomputed).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)

    def __getitem__(self, key: str) -> bytes:
        with self._lock:
            row = self._db.execute("SELECT value FROM vectors WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return bytes(row[0])

    def __setitem__(self, key: str, value: bytes) -> None:
        self.update({key: value})

    def update(  # type: ignore[override]
        self, other: Mapping[str, bytes] | Iterable[tuple[str, bytes]] = (), /
    ) -> None:
        """Write many entries in one transaction (one commit instead of one per vector)."""
        items = list(other.items() if isinstance(other, Mapping) else other)
        if not items:
            return
        with self._lock:
            self._db.execute("BEGIN")
            try:
                # Delete first so a rewritten key counts as newest (its rowid moves up).
                replaced = self._db.executemany(
                    "DELETE FROM vectors WHERE key = ?", [(k,) for k, _ in items]
                ).rowcount
                inserted = self._db.executemany(
                    "INSERT INTO vectors (key, value) VALUES (?, ?)",
                    [(key, sqlite3.Binary(value)) for key, value in items],
                ).rowcount
                self._evict(inserted - replaced)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _evict(self, added: int) -> None:
        """Trim the file to ``max_items`` once this process's count of it passes them."""
        if self._count is not None:
            self._count += added
        if self._count is None or self._count > self.max_items:
            (self._count,) = self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()
        if self._count > self.max_items:
            keep = self.max_items - self.max_items // 10
            self._db.execute(
                "DELETE FROM vectors WHERE rowid IN "
                "(SELECT rowid FROM vectors ORDER BY rowid LIMIT ?)",
                (self._count - keep,),
            )
            self._count = keep

    def __delitem__(self, key: str) -> None:
        with self._lock:
            deleted = self._db.execute("DELETE FROM vectors WHERE key = ?", (key,)).rowcount
            if self._count is not None:
                self._count -= deleted
        if not deleted:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            keys = [row[0] for row in self._db.execute("SELECT key FROM vectors ORDER BY rowid")]
        return iter(keys)

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()
