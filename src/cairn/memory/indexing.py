"""The dense index behind ``Memory``: the embedder loaded on first need, the outbox of
chunks to embed, and the background worker that embeds them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.memory.core import MemoryCore
from cairn.model import Principal
from cairn.search.vector_cache import DiskVectorCache

if TYPE_CHECKING:
    from cairn.retrieval.indexer import Indexer, IndexWorker
    from cairn.search.embedder import Embedder

__all__ = ["INDEX_FOLDER", "IndexVerbs"]

log = logging.getLogger("cairn.indexer")

# Where in the store folder the dense index is saved (search.catalog_file).
INDEX_FOLDER = "index"


class IndexVerbs(MemoryCore):
    """Mixed into ``Memory``: its dense indexer (None when it runs keyword-only)."""

    _embedder_spec: Embedder | str | None
    _vector_cache_file: Path | None
    _vector_cache: DiskVectorCache | None
    _indexer: Indexer | None
    _worker: IndexWorker | None

    @property
    def indexer(self) -> Indexer | None:
        """The dense indexer, or None when this memory runs keyword-only."""
        if self._indexer is None and self._embedder_spec is not None:
            # The dense index's modules (numpy, hnswlib) are imported here, when a command
            # first needs vectors, not with the kernel: most CLI commands never do, and
            # every one would pay for them at start-up.
            from cairn.retrieval.indexer import Indexer
            from cairn.search.embedder import make_embedder

            spec = self._embedder_spec
            if isinstance(spec, str):
                if self._vector_cache_file is not None:
                    self._vector_cache = DiskVectorCache(self._vector_cache_file)
                embedder = make_embedder(spec, cache=self._vector_cache)
            else:
                embedder = spec
            # A large store's dense index is saved in the store folder at close and loaded
            # by the next process (a memory with no folder rebuilds it every time).
            saved = self.folder / INDEX_FOLDER if self.folder is not None else None
            self._indexer = Indexer(self._store, embedder, saved=saved)
        return self._indexer

    def _need_indexer(self) -> Indexer:
        indexer = self.indexer
        if indexer is None:
            raise InvalidInput("vector search needs an embedder; this store runs keyword-only")
        return indexer

    def index_pending(
        self, *, limit: int | None = None, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Embed chunks written since the last run (the dense-index outbox)."""
        indexer = self._need_indexer()
        indexer.sync()
        return indexer.catch_up(limit=limit, progress=progress)

    def reindex(
        self, *, principal: Principal, progress: Callable[[int, int], None] | None = None
    ) -> int | None:
        """``index_pending`` for a caller: how many chunk texts it embedded, told only to a
        curator of every scope, as ``status`` tells the vector lag (the count is of every
        scope's writes); anyone else gets None once the index has caught up."""
        done = self.index_pending(progress=progress)
        return done if access.sees_everything(principal) else None

    def start_indexing(self, *, poll: float = 2.0) -> IndexWorker | None:
        """Embed new chunks in a background thread from now on (reads never embed); None
        when this memory runs keyword-only. ``close`` stops it."""
        indexer = self.indexer
        if indexer is None:
            return None
        if self._worker is None:
            from cairn.retrieval.indexer import IndexWorker  # loaded with Indexer (above)

            self._worker = IndexWorker(indexer, poll=poll).start()
            self._worker.notify()
        return self._worker

    def _save_index(self) -> None:
        """Save the dense index for the next process (``close`` calls it); a failure is
        logged, never raised: the next process rebuilds the index instead."""
        if self._indexer is None:
            return
        try:
            self._indexer.save()
        except Exception as exc:
            log.warning("could not save the dense index: %s", exc)

    def _committed(self) -> None:
        if self._worker is not None:
            self._worker.notify()

    def has_vectors(self) -> bool:
        """Whether this memory searches by vector as well as by keyword (without loading the
        embedder to find out)."""
        return self._indexer is not None or self._embedder_spec is not None

    def vector_lag(self) -> int:
        indexer = self.indexer
        return indexer.lag() if indexer is not None else 0

    def vector_index_busy(self) -> bool:
        """Whether searches now answer by keyword alone because the vector index is being
        built, loaded or saved (never waits to find out)."""
        indexer = self.indexer
        return indexer.busy if indexer is not None else False
