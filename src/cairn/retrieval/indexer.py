"""Dense indexing: embeds chunks that have no vector yet (the outbox), caches by content hash.

Keyword search sees a write the moment it commits; vectors follow when the indexer catches
up. ``lag`` is what ``cairn status`` reports.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from cairn.background import BackgroundWorker
from cairn.search.catalog import CatalogState, Finalists, FloatArray, VectorCatalog
from cairn.search.catalog_file import Fingerprint, load_catalog, save_catalog
from cairn.search.embedder import CachedEmbedder, Embedder
from cairn.store.base import ChunkFilter, ChunkMeta, Store

__all__ = [
    "BATCH",
    "BUILT_BY_READS_UP_TO",
    "BULK_BATCH",
    "READ_PATIENCE",
    "SAVED_FROM_ROWS",
    "SAVE_GROWTH",
    "SYNC_BATCH",
    "IndexWorker",
    "Indexer",
    "Progress",
    "VectorRead",
]

# Chunk texts embedded per step of a catch-up with a limit (the background worker's, which
# stops between steps), and per step of one without (``cairn reindex``, a first build): each
# step is a pending read, a store commit and a turn with the catalog, so a large catch-up
# takes fewer, larger ones. At 100k chunks, steps of 256 stored their vectors in 2.8-3.0 s
# (391 commits), steps of 2,048 in 2.0-2.2 s (49); a step holds ~2 MB of vectors, and the
# catalog's lock for one tail flush, as before.
BATCH = 256
BULK_BATCH = 2048
# Chunk changes read per store call while mirroring: at most this many ChunkMeta (with
# their rows and vectors) exist at once. Reading 300k changes 50k at a time peaked ~70 MB
# higher than 10k at a time (metadata alone; their vectors add ~1 KB each).
SYNC_BATCH = 10_000
# A catalog is saved (``Indexer.save``) from this many rows: a smaller one is rebuilt from
# the store in about a second.
SAVED_FROM_ROWS = 20_000
# With a background worker, a read that finds the index not yet mirrored builds it itself
# only up to this many chunks (about a second); past it, it answers by keyword meanwhile.
BUILT_BY_READS_UP_TO = 50_000
# An idle worker saves the catalog again once it has grown by this share since last saved.
SAVE_GROWTH = 0.5
# How long (seconds) a read waits for another thread's turn with the index before it
# answers by keyword alone. A search or a catch-up's batch holds it for moments; a sync
# that takes in a large import (hundreds of thousands of changes) can hold it for seconds,
# and no read should wait that long. A read waits once: it then keeps its turn for its
# sync, its search and a look at what waits for a vector (``Indexer.read``).
READ_PATIENCE = 1.0
# Chunks whose stored row a saved catalog's fingerprint names (evenly spread, first and last
# included).
_FINGERPRINT_CHUNKS = 17
Progress = Callable[[int, int], None]
log = logging.getLogger("cairn.indexer")
# How many chunks a read looks at, at most, to count those that wait for a vector (from the
# oldest that waits on); past it the read says only that many wait. At 5,000 the count
# cost 0.3-1.0 of a keyword read on SQLite and 0.2-0.7 on PostgreSQL, at 10,000 0.6-1.3 on
# SQLite (bench/waiting_count.py on a busy two-core machine, docs/benchmarks.md).
WAITING_SCAN = 5_000
_K = TypeVar("_K", int, str)


def _decoded(stored: Mapping[_K, bytes]) -> dict[_K, FloatArray]:
    """Stored vectors (float32 bytes) as arrays, by the same keys."""
    return {key: np.frombuffer(blob, dtype=np.float32) for key, blob in stored.items()}


@dataclass(frozen=True)
class VectorRead:
    """A read's vector side (``Indexer.read``): ``hits``, ``(chunk id, score)`` best first;
    ``waiting``, how many of the chunks the reader may see still wait for a vector (None:
    too many chunks of a large import wait to count them on a read); ``busy``, the index
    was busy (no hits, nothing counted: keyword search answers alone). What the read says
    of it: ``vector_warnings(waiting=, busy=)``."""

    hits: tuple[tuple[int, float], ...]
    waiting: int | None = 0
    busy: bool = False


# The answer of a read that found the index busy.
_BUSY = VectorRead(hits=(), busy=True)


def _scored(found: list[tuple[int, float]] | Finalists) -> list[tuple[int, float]]:
    """A shortlist's hits, best first. Finalists of a graph over fewer dimensions are re-read
    from the store here, after the caller let go of the lock, so that a slow read (a busy
    PostgreSQL pool) holds no other search or sync up."""
    return found.scored() if isinstance(found, Finalists) else found


class Indexer:
    """The dense index of a store: embeds what waits for a vector, mirrors the store's
    chunks into an in-memory catalog and searches it.

    ``saved``: a folder where the catalog is saved (``save``) and from which the first sync
    loads it, so that a process opening a large store does not rebuild it (see
    ``search.catalog_file``); None: always built from the store."""

    def __init__(self, store: Store, embedder: Embedder, *, saved: Path | None = None) -> None:
        self.store = store
        self.embedder = embedder
        # Catch-up embeds only texts the store holds no vector for (the store is the cache,
        # by text hash), so an in-memory cache in front of the model would never be hit:
        # it would only fill with 100k document vectors (~130 MB at 256 dimensions).
        self._documents = embedder.inner if isinstance(embedder, CachedEmbedder) else embedder
        self.catalog = self._new_catalog()
        self.saved = saved
        self._restore_pending = saved is not None
        # (seq, rows) of the catalog when last loaded or saved: nothing new to save then
        self._saved_mark: tuple[int, int] | None = None
        self.saved_from_rows = SAVED_FROM_ROWS
        # Whether a sync has completed: the catalog then mirrors the store, and a sync only
        # takes in what changed since (see ``read``).
        self._mirrored = False
        # Rows of the catalog when it was last loaded, saved or tried to be saved: an idle
        # worker saves again only once it has grown by half since.
        self._tried_rows: int | None = None
        # Whether a save holds the lock (reads do not wait for it), and whether a background
        # worker keeps this index (then it, not a read, builds a large one).
        self._saving = False
        self._building = False  # the first sync (a build or a load) is under way
        self.background = False
        # A server shares one indexer between request threads; the catalog is not
        # thread-safe to mutate, so syncs, searches and the catalog side of catch-ups take
        # turns. The model itself runs under ``_embedding`` only, never under ``_lock``.
        self._lock = threading.RLock()
        self._embedding = threading.Lock()
        self.read_patience = READ_PATIENCE

    def _new_catalog(self) -> VectorCatalog:
        return VectorCatalog(self.embedder.dim, vectors_of=self.stored_vectors)

    @property
    def model(self) -> str:
        return f"{self.embedder.name}:{self.embedder.dim}"

    def lag(self) -> int:
        """How many distinct texts still wait for a vector, as this process's searches see
        it: a batch's vectors are committed to the store a moment before the catalog takes
        them in, and in that moment the store says none wait while searches still miss them."""
        stored = self.store.vector_lag(self.model)
        # Another thread may build, load or save the index (minutes at a million chunks): a
        # status read does not wait for it, the store's count is what is known meanwhile.
        # Without the lock the catalog's pending map may be a moment old, but the store's
        # count alone could say 0 while vectors wait to be taken in, and end a caller's wait.
        locked = self._lock_unless_busy()
        try:
            return max(stored, len(self.catalog.pending))
        finally:
            if locked:
                self._lock.release()

    @property
    def busy(self) -> bool:
        """Whether a read now would go on without vectors: the index is being built, loaded
        or saved, or is left for the background worker to build (see ``read``). A status
        reads it: it never waits."""
        if self._saving or self._building:
            return True
        return not self._mirrored and self._left_to_worker()

    def _lock_unless_busy(self) -> bool:
        """Take the lock, waiting in short steps, and say True; or say False, without it,
        once the index is busy (a holder of minutes) or ``read_patience`` has passed. A
        search or a catch-up holds it for moments, and short steps see a save that takes
        it next."""
        deadline = time.monotonic() + self.read_patience
        while not self._lock.acquire(timeout=0.02):
            if self.busy or time.monotonic() > deadline:
                return False
        return True

    def _left_to_worker(self) -> bool:
        """Whether the first build is the background worker's, not a read's: the store is
        too large for a read to wait on."""
        return self.background and self.store.chunk_count() > BUILT_BY_READS_UP_TO

    def catch_up(self, *, limit: int | None = None, progress: Progress | None = None) -> int:
        """Embed up to ``limit`` pending chunk texts (all when None); return how many.

        The model runs outside the catalog's lock, so reads go on while a batch embeds;
        catch-ups take turns among themselves (``_embedding``)."""
        with self._embedding:
            total = self.lag() if progress else 0
            done = 0
            while True:
                pending = self._pending(limit, done)
                if not pending:
                    break
                vectors = self._embedded(pending)
                self.store.put_vectors(
                    self.model,
                    self.embedder.dim,
                    [(h, vectors[i].tobytes()) for i, (h, _) in enumerate(pending)],
                )
                with self._lock:
                    self.catalog.add_vectors({h: vectors[i] for i, (h, _) in enumerate(pending)})
                    self._rescan()
                done += len(pending)
                if progress:
                    progress(done, max(total, done))
            # Everything is embedded now (or the limit was reached): take in what a full
            # pending left for later. A whole catch-up also waits for the graph's last
            # inserts; a limited one (the background worker's) leaves them running beside
            # its next batch, for a read or the next flush to wait for.
            with self._lock:
                self._rescan(drain=limit is None)
                if limit is None:
                    self.catalog.join_graph()
            return done

    def _pending(self, limit: int | None, done: int) -> list[tuple[str, str]]:
        """The next batch of (text hash, text) waiting for a vector, within ``limit``."""
        want = BULK_BATCH if limit is None else min(BATCH, limit - done)
        return self.store.pending_vectors(self.model, want) if want > 0 else []

    def _embedded(self, pending: Sequence[tuple[str, str]]) -> FloatArray:
        """The vectors of ``pending``'s texts, as float32 rows in its order."""
        vectors: FloatArray = self._documents.embed([text for _, text in pending])
        return vectors.astype(np.float32, copy=False)

    def _waiting_since(self) -> int | None:
        """The seq after which every chunk that waits for a vector lies, as far as this
        catalog has seen (the caller holds the lock): just before the oldest chunk it holds
        in ``pending``, or the point after which it passed chunks over, whichever is first.
        None when nothing waits."""
        catalog = self.catalog
        held = [m.seq - 1 for metas in catalog.pending.values() for m in metas]
        if catalog.rescan_from is not None:
            held.append(catalog.rescan_from)
        return min(held, default=None)

    def _waiting(self, where: ChunkFilter, since: int | None) -> int | None:
        """How many chunks ``where`` admits still wait for a vector, counted in the store
        among the chunks after ``since`` (``_waiting_since``) without the lock, so that no
        search or sync waits on the count. None when more than ``WAITING_SCAN`` chunks lie
        there: too many to count on a read.

        The number depends only on the chunks the reader may see (the store's own rule,
        older versions included), and a partial count is never given, since where a scan
        stops depends on everyone's writes. That the count was skipped says only that many
        chunks wait, or have since the oldest one that does."""
        if since is None:
            return 0
        return self.store.count_unembedded(self.model, where, since, WAITING_SCAN)

    def search(self, query: FloatArray, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
        with self._lock:
            found = self.catalog.shortlist(query, where, k)
        return _scored(found)

    def sync(self) -> None:
        """Mirror chunk inserts and state changes committed since the last sync (by anyone)."""
        with self._lock:
            self._sync()

    def read(self, query: str, where: ChunkFilter, k: int) -> VectorRead:
        """A read's vector side: the store's changes mirrored, the ``k`` chunks ``where``
        admits nearest ``query`` found, and those it admits that still wait for a vector
        counted. The read never embeds them (the background worker or `cairn reindex`
        does): keyword search, which sees them, answers beside it.

        Or ``busy``, at once, while another thread mirrors the store for the first time
        (loads a saved catalog or builds one: minutes at a million chunks) or saves it
        (seconds), so that the read goes on without vectors. With no other thread at it,
        the caller mirrors the store itself (a one-shot command must), unless a background
        worker is there to do it and the store is too large for a read to wait on
        (``BUILT_BY_READS_UP_TO``).

        What the other thread is doing is read from its flags (``busy``), not guessed from
        a lock it holds: a search, a sync or a catch-up holds the lock for moments, and a
        read waits for those rather than going on without vectors, up to ``read_patience``
        (a sync taking in a large import holds it for seconds), then is ``busy`` too. It
        waits once: the sync, the search and a look at what waits for a vector share one
        turn, since a large sync that took its turn between two of them would hold the read
        for its whole length; the count itself is made in the store after the turn."""
        if self.busy:  # known already: no query embedded for nothing
            return _BUSY
        # Before the lock: searches and syncs do not wait on the model (or an endpoint).
        query_vector = self.embedder.embed_query(query)
        started = time.monotonic()
        if not self._lock_unless_busy():
            return _BUSY
        try:
            if self.busy:  # a large store's first pass is the worker's
                return _BUSY
            # The graph cannot be searched while rows join it (in a thread of their own, a
            # catch-up's): the read waits for that within its patience, as for the lock.
            left = self.read_patience - (time.monotonic() - started)
            if not self.catalog.graph_settles_within(left):
                return _BUSY
            self._sync()
            since = self._waiting_since()
            found = self.catalog.shortlist(query_vector, where, k)
        finally:
            self._lock.release()
        return VectorRead(hits=tuple(_scored(found)), waiting=self._waiting(where, since))

    def _changes(self, since_seq: int, want: int = 0) -> list[ChunkMeta]:
        """Changes after ``since_seq``, ending on a whole seq group: the chunks of one
        version (or one record's state change) share a seq, and a batch cut inside a group
        would lose the rest of it to a cursor that resumes after that seq."""
        want = want or SYNC_BATCH
        while True:
            changes = self.store.chunk_changes(since_seq, want)
            if len(changes) < want:
                return changes
            last = changes[-1].seq
            whole = [c for c in changes if c.seq < last]
            if whole:
                return whole
            want *= 2  # one group fills the batch: read it all

    def stored_vectors(self, chunk_ids: Sequence[int]) -> dict[int, FloatArray]:
        """The stored float32 vectors of ``chunk_ids`` (those embedded): where the catalog
        re-reads its finalists once its graph holds fewer dimensions."""
        stored = self.store.chunk_vectors(self.model, chunk_ids)
        return _decoded(stored)

    def _vectors_for(self, changes: Sequence[ChunkMeta]) -> dict[str, FloatArray]:
        stored = self.store.get_vectors(self.model, [c.text_hash for c in changes])
        return _decoded(stored)

    def save(self, *, grown_by: float | None = None) -> bool:
        """Save the catalog to ``saved``, if it holds ``saved_from_rows`` rows or more, has
        changed since it was loaded or last saved (with ``grown_by``: has grown by that
        share of its rows then, or was never saved), and has every chunk it saw (none
        waiting for a vector). Returns whether it saved. Reads answer by keyword meanwhile
        (a few seconds at a million rows; see ``read``): ``Memory.close`` calls it, and an
        idle ``IndexWorker`` when the catalog has grown by half, which gives up at once
        when another process is saving, and after a failure (logged) does not try again
        before the catalog has grown by half once more."""
        if self.saved is None:
            return False
        with self._lock:
            catalog = self.catalog
            mark = (catalog.seq, len(catalog))
            last = self._saved_mark
            tried = self._tried_rows
            if (
                len(catalog) < self.saved_from_rows
                or not catalog.settled
                or mark == last
                or (grown_by is not None and tried is not None
                    and len(catalog) < (1 + grown_by) * tried)
            ):  # fmt: skip
                return False
            self._saving = True
            try:
                state = catalog.state()
                fingerprint = self._fingerprint(state.arrays["ids"], catalog.seq)
                # An idle worker does not queue behind another process's save: it tries
                # again when the catalog next grows. Closing waits its turn.
                saved = save_catalog(self.saved, state, model=self.model,
                                     fingerprint=fingerprint, wait=grown_by is None)  # fmt: skip
            except Exception as exc:
                if grown_by is None:
                    raise
                log.warning("could not save the dense index in %s: %s", self.saved, exc)
                self._tried_rows = len(catalog)
                return False
            finally:
                self._saving = False
            if saved:
                self._saved_mark, self._tried_rows = mark, len(catalog)
        return saved

    def _fingerprint(self, ids: npt.NDArray[np.int64], seq: int) -> Fingerprint:
        """Chunks the store must still hold as they were for a catalog of ``ids`` (its chunk
        ids, in row order) mirrored up to ``seq`` to be of this store: a few spread over
        ``ids`` and those of the last change it took in, each with its version, text hash and
        change number."""
        if len(ids) == 0:
            return {}
        spread = np.linspace(0, len(ids) - 1, _FINGERPRINT_CHUNKS, dtype=np.int64)
        picked = {int(ids[i]) for i in spread}
        picked |= {c.id for c in self.store.chunk_changes(seq - 1, _FINGERPRINT_CHUNKS)
                   if c.seq == seq}  # fmt: skip
        metas = self.store.chunk_metas(sorted(picked))
        return {str(i): [m.version_id, m.text_hash, str(m.seq)] for i, m in metas.items()}

    def _fits(self, state: CatalogState, saved: Fingerprint) -> bool:
        """Whether the store is the one ``state`` mirrored, as far as it went: it has got at
        least as far, and the chunks ``saved`` names hold the same version and text with a
        change number no lower (a lower one, or a store behind the saved sequence, is a
        store put back to an older copy, whose later changes the catalog would skip)."""
        seq = int(state.meta["seq"])
        if not saved or self.store.index_seq() < seq:
            return False
        now = self.store.chunk_metas(sorted(int(i) for i in saved))
        for key, (version_id, text_hash, saved_seq) in saved.items():
            meta = now.get(int(key))
            if meta is None or (meta.version_id, meta.text_hash) != (version_id, text_hash):
                return False
            if meta.seq < int(saved_seq):
                return False
        return True

    def _restore(self) -> None:
        """Take over the saved catalog, if there is one of this store and model; anything
        wrong with it is logged and the catalog is built from the store instead."""
        self._restore_pending = False
        assert self.saved is not None
        try:
            loaded = load_catalog(self.saved, model=self.model)
            if loaded is None:
                return
            state, fingerprint = loaded
            if not self._fits(state, fingerprint):
                log.warning(
                    "the saved dense index in %s is not of this store as it is; rebuilding",
                    self.saved,
                )
                return
            restored = self._new_catalog()
            restored.restore(state)
        except Exception as exc:  # a cache that cannot be used, for any reason, is rebuilt
            log.warning(
                "the saved dense index in %s cannot be used (%s); rebuilding", self.saved, exc
            )
            return
        self.catalog = restored
        self._saved_mark, self._tried_rows = (restored.seq, len(restored)), len(restored)

    def _sync(self) -> None:
        first = not self._mirrored
        self._building = first
        try:
            self._mirror()
        finally:
            if first:
                self._building = False

    def _mirror(self) -> None:
        if self._restore_pending:
            self._restore()
        while True:
            changes = self._changes(self.catalog.seq)
            if not changes:
                break
            self.catalog.apply(changes, self._vectors_for(changes))
        if self.catalog.pending:
            # another process may have embedded what we were waiting for
            stored = self.store.get_vectors(self.model, list(self.catalog.pending))
            self.catalog.add_vectors(_decoded(stored))
        self._rescan()
        self._mirrored = True

    def _rescan(self, *, drain: bool = False) -> None:
        """Re-read chunks passed over while pending was full, once it is at most half full
        (so a read pays for a re-read rarely, not on every sync). ``drain``: until none is
        left, for when every chunk has a vector and none will wait again."""
        catalog = self.catalog
        while catalog.rescan_from is not None:
            room = catalog.park_limit - catalog.parked
            if not drain and room < catalog.park_limit // 2:
                return
            start = catalog.rescan_from
            # Ask for no more than fit: the rest would only be passed over again.
            changes = self._changes(start, SYNC_BATCH if drain else max(room, 1024))
            catalog.rescan(changes, self._vectors_for(changes))
            if catalog.rescan_from == start:
                return  # nothing could be taken in (pending filled at once)


class IndexWorker(BackgroundWorker):
    """Embeds pending chunks in the background, so that no read ever has to.

    ``cairn serve`` and ``cairn mcp`` start one. It wakes when this process commits a write
    (``notify``) and every ``poll`` seconds for writes of other processes sharing the
    store, embeds ``batch`` chunk texts at a time (so that ``stop`` never waits long) and
    keeps the catalog in step. A failure is logged and retried at the next wake-up.
    """

    def __init__(self, indexer: Indexer, *, poll: float = 2.0, batch: int = 64) -> None:
        self.indexer = indexer
        self.batch = batch

        indexer.background = True

        def work() -> bool:
            indexer.sync()  # first: a large store's index is built here, not by a read
            done = indexer.catch_up(limit=batch)
            indexer.sync()
            if done == 0:
                # Idle: keep a saved copy of a catalog that has grown by half since the last
                # one (its first build included), so that a server stopped without closing
                # does not leave the next one to build it all again.
                indexer.save(grown_by=SAVE_GROWTH)
            return done > 0

        super().__init__(
            "cairn-indexer",
            work,
            poll=poll,
            failure="background indexing failed; retrying at the next wake-up",
            logger=log,
        )
