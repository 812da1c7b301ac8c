"""Dense indexing: embeds chunks that have no vector yet (the outbox), caches by content hash.

Keyword search sees a write the moment it commits; vectors follow when the indexer catches
up. ``lag`` is what ``cairn status`` reports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from cairn.search.catalog import FloatArray, VectorCatalog
from cairn.search.embedder import Embedder
from cairn.store.base import ChunkFilter, Store

BATCH = 256
Progress = Callable[[int, int], None]


class Indexer:
    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.catalog = VectorCatalog(embedder.dim)
        # A server shares one indexer between request threads; the catalog is not
        # thread-safe to mutate, so syncs and catch-ups take turns.
        self._lock = threading.RLock()

    @property
    def model(self) -> str:
        return f"{self.embedder.name}:{self.embedder.dim}"

    def lag(self) -> int:
        return self.store.vector_lag(self.model)

    def catch_up(self, *, limit: int | None = None, progress: Progress | None = None) -> int:
        """Embed up to ``limit`` pending chunk texts (all when None); return how many."""
        with self._lock:
            return self._catch_up(limit, progress)

    def _catch_up(self, limit: int | None, progress: Progress | None) -> int:
        total = self.lag() if progress else 0
        done = 0
        while limit is None or done < limit:
            want = BATCH if limit is None else min(BATCH, limit - done)
            pending = self.store.pending_vectors(self.model, want)
            if not pending:
                break
            vectors = self.embedder.embed([text for _, text in pending]).astype(np.float32)
            self.store.put_vectors(
                self.model,
                self.embedder.dim,
                [(h, vectors[i].tobytes()) for i, (h, _) in enumerate(pending)],
            )
            self.catalog.add_vectors({h: vectors[i] for i, (h, _) in enumerate(pending)})
            done += len(pending)
            if progress:
                progress(done, max(total, done))
        return done

    def search(self, query: FloatArray, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
        with self._lock:
            return self.catalog.search(query, where, k)

    def sync(self) -> None:
        """Mirror chunk inserts and state changes committed since the last sync (by anyone)."""
        with self._lock:
            self._sync()

    def _sync(self) -> None:
        while True:
            changes = self.store.chunk_changes(self.catalog.seq)
            if not changes:
                break
            stored = self.store.get_vectors(self.model, [c.text_hash for c in changes])
            vectors: dict[str, FloatArray] = {
                h: np.frombuffer(blob, dtype=np.float32) for h, blob in stored.items()
            }
            self.catalog.apply(changes, vectors)
        if self.catalog.pending:
            # another process may have embedded what we were waiting for
            stored = self.store.get_vectors(self.model, list(self.catalog.pending))
            self.catalog.add_vectors(
                {h: np.frombuffer(blob, dtype=np.float32) for h, blob in stored.items()}
            )
