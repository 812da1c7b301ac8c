"""``Memory``: the kernel facade every door calls.

Doors parse, authenticate to a ``Principal``, call one method here and render. Writes go
through the ``Gate``; reads are trimmed to what the principal may see, and anything it may
not see is reported as not found.

This module builds a ``Memory`` and owns its store's life; its verbs live next to it, one
job a module: ``reads``, ``search``, ``context``, ``edges``, ``writes``, ``review``,
``events``, ``tasks``, ``upkeep`` and ``indexing``, on the shared ``core`` (plus the
timeline's and the graph's, in their own packages).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from cairn.closing import Closing
from cairn.errors import NotFound
from cairn.governance.gate import Gate
from cairn.governance.policy import Policy, load_policy
from cairn.graph.settings import GraphSettings
from cairn.graph.verbs import GraphVerbs
from cairn.ingest.files import IngestArea, confined_file, hash_confined
from cairn.memory.context import ContextVerbs
from cairn.memory.edges import MAX_HOPS, EdgeVerbs
from cairn.memory.events import EventVerbs
from cairn.memory.review import ReviewVerbs
from cairn.memory.tasks import MAX_TASK_BYTES, TaskVerbs
from cairn.memory.upkeep import RefreshReport, UpkeepVerbs, VacuumReport
from cairn.memory.writes import WriteVerbs
from cairn.model import RecordView, utcnow
from cairn.options import check_names
from cairn.retrieval.chunking import chunks_for
from cairn.retrieval.endpoint_rerank import EndpointReranker
from cairn.retrieval.settings import RetrievalSettings
from cairn.search.vector_cache import DiskVectorCache
from cairn.store.base import Store
from cairn.store.factory import open_store
from cairn.timeline.settings import TimelineSettings
from cairn.timeline.verbs import TimelineVerbs

if TYPE_CHECKING:
    # The dense index (numpy, hnswlib) loads when a command first needs vectors (see
    # IndexVerbs.indexer), not with the kernel: most commands never do.
    from cairn.retrieval.indexer import Indexer, IndexWorker
    from cairn.search.embedder import Embedder

__all__ = [
    "DB_FILE",
    "DEFAULT_EMBEDDER",
    "MAX_HOPS",
    "MAX_TASK_BYTES",
    "POLICY_FILE",
    "PRINCIPALS_FILE",
    "Memory",
    "MemorySettings",
    "RecordView",
    "RefreshReport",
    "VacuumReport",
    "file_hasher",
]

DB_FILE = "cairn.db"
POLICY_FILE = "policy.yaml"
PRINCIPALS_FILE = "principals.yaml"
DEFAULT_EMBEDDER = "minilm"


def file_hasher(area: IngestArea) -> Callable[[str], str | None]:
    """The hash of a linked repository file, for drift; None for a file ingest could not
    read either (outside the project, in the store folder, a dot-file)."""

    def digest(path: str) -> str | None:
        target = confined_file(area, path)
        return hash_confined(target, area) if target else None

    return digest


class MemorySettings(TypedDict, total=False):
    """How a ``Memory`` is set up besides its store and policy (``Memory(...)`` and
    ``Memory.open(...)`` take these keywords; each says what leaving it out means)."""

    clock: Callable[[], datetime]
    """What time it is (default: the system clock, in UTC); tests pin it."""
    embedder: Embedder | str | None
    """The vector model, or its name (default ``minilm``); ``None``: keyword search only."""
    vector_cache: Path | None
    """A SQLite file that keeps the vectors a named embedder computes across restarts
    (default: none, an in-memory cache); opened on the first embedding, closed with the
    memory."""
    timeline: TimelineSettings | None
    """The timeline's settings (``[timeline]``; default: the defaults)."""
    graph: GraphSettings | None
    """The decision graph's settings (``[graph]``; default: the defaults)."""
    retrieval: RetrievalSettings | None
    """Ranking's settings and the reranking endpoint (``[retrieval]``; default: the defaults)."""


class Memory(
    ContextVerbs,
    WriteVerbs,
    ReviewVerbs,
    EdgeVerbs,
    EventVerbs,
    TaskVerbs,
    UpkeepVerbs,
    TimelineVerbs,
    GraphVerbs,
    Closing,
):
    """cairn's one kernel: every door (the CLI, HTTP, MCP, A2A, gRPC, the web console and
    Python code) reads and writes through a ``Memory``. Writes become proposals that the
    policy or a curator decides, all audited; reads are trimmed to what the principal may
    see and cite ``(record, version)``. Open one with ``Memory.open(folder)`` or
    ``Workspace(folder).open_memory()``; ``close()`` it when done."""

    def __init__(
        self,
        store: Store,
        policy: Policy,
        *,
        root: Path | None = None,
        folder: Path | None = None,
        **settings: Unpack[MemorySettings],
    ) -> None:
        """``root`` is the project folder (ingest and path links read files under it);
        ``folder`` the store folder, which they never read. ``settings``: ``MemorySettings``."""
        check_names(settings, MemorySettings.__optional_keys__)
        self._store = store
        self.retrieval_settings = settings.get("retrieval") or RetrievalSettings()
        self._ranking = self.retrieval_settings.ranking()
        key = self.retrieval_settings.reranker_key
        self._reranker = EndpointReranker.from_spec(
            self.retrieval_settings.reranker,
            timeout=self.retrieval_settings.reranker_timeout,
            top=self.retrieval_settings.rerank_top,
            api_key=key.get_secret_value() if key is not None else None,
        )
        self.timeline_settings = settings.get("timeline") or TimelineSettings()
        # one rollup at a time in this process (the background one and a curator's)
        self._rollup_lock = threading.Lock()
        # Loading a model takes a moment: only reads that need vectors pay for it.
        self._embedder_spec = settings.get("embedder", DEFAULT_EMBEDDER)
        self._vector_cache_file = settings.get("vector_cache")
        self._vector_cache: DiskVectorCache | None = None
        self._indexer: Indexer | None = None
        self._policy = policy
        self.root = (root or Path.cwd()).resolve()
        self.folder = folder.resolve() if folder is not None else None
        self._init_graph(settings.get("graph"))
        self.clock = settings.get("clock", utcnow)
        self._hash_path = file_hasher(IngestArea(self.root, (".",), self.folder))
        self._worker: IndexWorker | None = None
        self._gate = Gate(
            store,
            policy,
            clock=self.clock,
            path_hasher=self._hash_path,
            chunker=chunks_for,
            on_commit=self._committed,
        )

    @classmethod
    def open(
        cls, folder: Path | str, *, db: str | None = None, **settings: Unpack[MemorySettings]
    ) -> Memory:
        """Open the store of a cairn folder (made by ``cairn init``): the embedded SQLite
        file by default, or the database ``db`` names (``postgresql://…``)."""
        folder = Path(folder)
        if db is None and not (folder / DB_FILE).exists():
            raise NotFound(f"no cairn store in {folder}: run 'cairn init' first", field="store")
        policy = load_policy(folder / POLICY_FILE)
        store = open_store(db, folder)
        return cls(store, policy, root=folder.resolve().parent, folder=folder, **settings)

    # ---- policy --------------------------------------------------------------------------

    @property
    def policy_in_force(self) -> Policy:
        """The policy this memory governs by (frozen: reading it changes nothing)."""
        return self._policy

    def govern_by(self, policy: Policy) -> None:
        """Govern by ``policy`` from now on, the gate's rulings and the graph's role
        profiles alike: a policy edited while this memory is open."""
        self._policy = self._gate.policy = policy

    # ---- the store's life ----------------------------------------------------------------

    def ping(self) -> None:
        """Raise ``StoreError`` unless the store answers (one indexed lookup)."""
        self._store.get_record("rec_ping")

    def close(self) -> None:
        """Stop the background workers and close the store."""
        self._stop_timeline()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self._save_index()
        if self._reranker is not None:
            self._reranker.close()
        if self._vector_cache is not None:
            self._vector_cache.close()
        self._store.close()
