"""``Memory``: the kernel facade every door calls.

Doors parse, authenticate to a ``Principal``, call one method here and render. Writes go
through the ``Gate``; reads are trimmed to what the principal may see, and anything it may
not see is reported as not found.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from cairn.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from cairn.governance import access, lifecycle
from cairn.governance import links as edge_rules
from cairn.governance.gate import Gate
from cairn.governance.policy import Policy, load_policy
from cairn.graph.settings import GraphSettings
from cairn.graph.verbs import GraphVerbs
from cairn.ingest.files import (
    INGESTED_EVIDENCE,
    IngestArea,
    IngestReport,
    confined_file,
    document_for,
    expand,
    git_info,
    read_text,
)
from cairn.limits import (
    MAX_BODY_CHARS,
    MAX_BULK_DECISIONS,
    MAX_COUNTER,
    MAX_ID_CHARS,
    MAX_LIST_ITEMS,
    MAX_QUERY_CHARS,
    MAX_REQUEST_BYTES,
    MAX_SCOPE_CHARS,
    LimitExceeded,
    check_text,
    is_id,
)
from cairn.model import (
    SYSTEM_PRINCIPAL,
    SYSTEM_RELATIONS,
    AppendReport,
    AuditEntry,
    AuditQuery,
    Baseline,
    CairnModel,
    Content,
    ContentPatch,
    CreateChange,
    Direction,
    Edge,
    EdgeDraft,
    EdgeStatus,
    Event,
    EventCursor,
    EventDraft,
    LinkChange,
    Neighbourhood,
    PathLink,
    PinKind,
    Principal,
    Proposal,
    ProposalFilter,
    ProposalOutcome,
    ProposalStatus,
    PublishChange,
    Record,
    RecordQuery,
    RecordView,
    Status,
    SupersedeChange,
    TransitionChange,
    UnlinkChange,
    UpdateChange,
    Verdict,
    Version,
    VersionPin,
    utcnow,
)
from cairn.retrieval.chunking import chunks_for
from cairn.retrieval.claims import claim_relation
from cairn.retrieval.context import (
    ClaimCheck,
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    RecordCheck,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.fuse import chosen_weights
from cairn.retrieval.indexer import Indexer, IndexWorker
from cairn.retrieval.pipeline import SearchPlan, clipped, run_retrieve, run_search
from cairn.retrieval.preselect import ReadRequest, readable
from cairn.retrieval.researcher import research
from cairn.retrieval.types import (
    Item,
    Mode,
    RetrievalResult,
    SearchResult,
)
from cairn.retrieval.validate import direct_item, find_contradictions
from cairn.search.embedder import Embedder, make_embedder
from cairn.store.base import (
    ChunkFilter,
    EdgeFilter,
    EventFilter,
    Store,
    StoredTask,
)
from cairn.store.factory import open_store
from cairn.timeline.settings import TimelineSettings
from cairn.timeline.verbs import TimelineVerbs

__all__ = [
    "DB_FILE",
    "DEFAULT_EMBEDDER",
    "MAX_HOPS",
    "MAX_TASK_BYTES",
    "POLICY_FILE",
    "PRINCIPALS_FILE",
    "Memory",
    "RecordView",
    "RefreshReport",
    "VacuumReport",
    "file_hasher",
]

DB_FILE = "cairn.db"
POLICY_FILE = "policy.yaml"
PRINCIPALS_FILE = "principals.yaml"
DEFAULT_EMBEDDER = "minilm"


# A walk's reach: each hop multiplies what a walk touches, and the questions a decision graph
# answers ("why", "what depends on this") are a few steps deep.
MAX_HOPS = 4
# An agent-protocol task holds its messages and artifacts: bounded like one request.
MAX_TASK_BYTES = MAX_REQUEST_BYTES


class RefreshReport(CairnModel):
    checked: int
    marked_stale: list[str]
    reactivated: list[str]


class VacuumReport(CairnModel):
    archived: list[str]


def file_hasher(area: IngestArea) -> Callable[[str], str | None]:
    """The hash of a linked repository file, for drift; None for a file ingest could not
    read either (outside the project, in the store folder, a dot-file)."""

    def digest(path: str) -> str | None:
        target = confined_file(area, path)
        return hashlib.sha256(target.read_bytes()).hexdigest() if target else None

    return digest


class Memory(TimelineVerbs, GraphVerbs):
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
        clock: Callable[[], datetime] = utcnow,
        embedder: Embedder | str | None = DEFAULT_EMBEDDER,
        timeline: TimelineSettings | None = None,
        graph: GraphSettings | None = None,
    ) -> None:
        """``root`` is the project folder (ingest and path links read files under it);
        ``folder`` the store folder, which they never read."""
        self._store = store
        self.timeline_settings = timeline or TimelineSettings()
        # one rollup at a time in this process (the background one and a curator's)
        self._rollup_lock = threading.Lock()
        # Loading a model takes a moment: only reads that need vectors pay for it.
        self._embedder_spec = embedder
        self._indexer: Indexer | None = None
        self._policy = policy
        self.root = (root or Path.cwd()).resolve()
        self.folder = folder.resolve() if folder is not None else None
        self._init_graph(graph)
        self.clock = clock
        self._hash_path = file_hasher(IngestArea(self.root, (".",), self.folder))
        self._worker: IndexWorker | None = None
        self._gate = Gate(
            store,
            policy,
            clock=clock,
            path_hasher=self._hash_path,
            chunker=chunks_for,
            on_commit=self._committed,
        )

    @classmethod
    def open(
        cls,
        folder: Path | str,
        *,
        db: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        embedder: Embedder | str | None = DEFAULT_EMBEDDER,
        timeline: TimelineSettings | None = None,
        graph: GraphSettings | None = None,
    ) -> Memory:
        """Open the store of a cairn folder (made by ``cairn init``): the embedded SQLite
        file by default, or the database ``db`` names (``postgresql://…``)."""
        folder = Path(folder)
        if db is None and not (folder / DB_FILE).exists():
            raise NotFound(f"no cairn store in {folder}: run 'cairn init' first", field="store")
        policy = load_policy(folder / POLICY_FILE)
        store = open_store(db, folder)
        return cls(
            store,
            policy,
            root=folder.resolve().parent,
            folder=folder,
            clock=clock,
            embedder=embedder,
            timeline=timeline,
            graph=graph,
        )

    # ---- policy --------------------------------------------------------------------------

    @property
    def policy_in_force(self) -> Policy:
        """The policy this memory governs by (frozen: reading it changes nothing)."""
        return self._policy

    def govern_by(self, policy: Policy) -> None:
        """Govern by ``policy`` from now on, the gate's rulings and the graph's role
        profiles alike: a policy edited while this memory is open."""
        self._policy = self._gate.policy = policy

    # ---- indexes -------------------------------------------------------------------------

    @property
    def indexer(self) -> Indexer | None:
        """The dense indexer, or None when this memory runs keyword-only."""
        if self._indexer is None and self._embedder_spec is not None:
            spec = self._embedder_spec
            embedder = make_embedder(spec) if isinstance(spec, str) else spec
            self._indexer = Indexer(self._store, embedder)
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

    def start_indexing(self, *, poll: float = 2.0) -> IndexWorker | None:
        """Embed new chunks in a background thread from now on (reads never embed); None
        when this memory runs keyword-only. ``close`` stops it."""
        indexer = self.indexer
        if indexer is None:
            return None
        if self._worker is None:
            self._worker = IndexWorker(indexer, poll=poll).start()
            self._worker.notify()
        return self._worker

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

    # ---- retrieval -------------------------------------------------------------------------

    def _plan(
        self,
        query: str,
        *,
        mode: Mode,
        k: int,
        candidates: int | None,
        weights: Mapping[str, float] | None,
        scope: str | None,
        selector: VersionPin | None,
        kinds: Sequence[str],
        include_drafts: bool,
        created_after: datetime | None,
        created_before: datetime | None,
        record_ids: Sequence[str] | None,
    ) -> SearchPlan:
        if k < 1 or k > 1000:
            raise InvalidInput("k must be between 1 and 1000", field="k")
        _check(query, "query", MAX_QUERY_CHARS)
        if scope is not None:
            _check(scope, "scope", MAX_SCOPE_CHARS)
        if weights is not None:
            _check_weights(weights, mode)
        for kind in kinds:
            self._policy.check_kind(kind)
        if candidates is not None and not 1 <= candidates <= 10_000:
            raise InvalidInput("candidates must be between 1 and 10000", field="candidates")
        if mode not in ("hybrid", "keyword", "vector"):
            raise InvalidInput(f"unknown mode {mode!r}: hybrid, keyword or vector", field="mode")
        if mode != "keyword":
            self._need_indexer()
        request = ReadRequest(
            scope=scope,
            selector=selector or VersionPin.head(),
            kinds=tuple(kinds),
            include_drafts=include_drafts,
            valid_at=self.clock(),
            created_after=created_after,
            created_before=created_before,
            record_ids=frozenset(record_ids) if record_ids is not None else None,
        )
        return SearchPlan(
            query=query,
            mode=mode,
            k=k,
            candidates=candidates or max(50, 5 * k),
            weights=weights,
            request=request,
        )

    def search(
        self,
        query: str,
        *,
        principal: Principal,
        mode: Mode = "hybrid",
        k: int = 10,
        candidates: int | None = None,
        weights: Mapping[str, float] | None = None,
        scope: str | None = None,
        selector: VersionPin | None = None,
        kinds: Sequence[str] = (),
        include_drafts: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        record_ids: Sequence[str] | None = None,
    ) -> SearchResult:
        """Raw ranked search (no validation, no budget): permission-trimmed, fused."""
        plan = self._plan(
            query,
            mode=mode,
            k=k,
            candidates=candidates,
            weights=weights,
            scope=scope,
            selector=selector,
            kinds=kinds,
            include_drafts=include_drafts,
            created_after=created_after,
            created_before=created_before,
            record_ids=record_ids,
        )
        indexer = (lambda: self._need_indexer()) if mode != "keyword" else None
        return run_search(self._store, indexer, principal, plan)[0]

    def retrieve(
        self,
        query: str,
        *,
        principal: Principal,
        max_tokens: int = 8000,
        mode: Mode = "hybrid",
        k: int = 10,
        candidates: int | None = None,
        weights: Mapping[str, float] | None = None,
        scope: str | None = None,
        selector: VersionPin | None = None,
        kinds: Sequence[str] = (),
        include_drafts: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        record_ids: Sequence[str] | None = None,
    ) -> RetrievalResult:
        """Validated retrieval clipped to a token budget, every item cited to its version."""
        if max_tokens < 1:
            raise InvalidInput("max_tokens must be positive", field="max_tokens")
        plan = self._plan(
            query,
            mode=mode,
            k=k,
            candidates=candidates,
            weights=weights,
            scope=scope,
            selector=selector,
            kinds=kinds,
            include_drafts=include_drafts,
            created_after=created_after,
            created_before=created_before,
            record_ids=record_ids,
        )
        indexer = (lambda: self._need_indexer()) if mode != "keyword" else None
        return run_retrieve(
            self._store, indexer, principal, plan, max_tokens=max_tokens, now=self.clock()
        )

    def ping(self) -> None:
        """Raise ``StoreError`` unless the store answers (one indexed lookup)."""
        self._store.get_record("rec_ping")

    def close(self) -> None:
        self._stop_timeline()
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        self._store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- writes (all through the gate) --------------------------------------------------

    def remember(
        self,
        content: Content,
        *,
        principal: Principal,
        draft: bool = False,
        paths: Sequence[str] = (),
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Propose a new record (or record a draft, which any principal may do)."""
        change = CreateChange(content=content, draft=draft, paths=tuple(paths))
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def update(
        self,
        record_id: str,
        patch: ContentPatch,
        *,
        principal: Principal,
        base_version_id: str | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        change = UpdateChange(record_id=record_id, patch=patch)
        outcome = self._gate.submit(
            change, principal, base_version_id=base_version_id, reason=reason
        )
        return self._shown_outcome(outcome, principal)

    def supersede(
        self,
        record_id: str,
        *,
        principal: Principal,
        by: str | None = None,
        content: Content | None = None,
        patch: ContentPatch | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Supersede a record by an existing one (``by``), by new ``content``, or by a new
        record made of its current content with ``patch`` applied."""
        if patch is not None:
            if content is not None:
                raise InvalidInput("give content or patch, not both", field="patch")
            content = patch.apply(self._visible(record_id, principal).content)
        change = SupersedeChange(record_id=record_id, by=by, content=content)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def transition(
        self, record_id: str, to: Status, *, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        """Move a record along the lifecycle: approve/reject a draft, archive, restore, …"""
        change = TransitionChange(record_id=record_id, to=to)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def link(
        self, edge: EdgeDraft, *, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        """Propose a typed edge between two records the principal may read; the policy
        decides (a relation the catalog does not declare is refused)."""
        change = LinkChange(edge=edge)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def unlink(
        self, edge_id: str, *, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        """Propose removing an edge (it is marked removed; its history stays)."""
        change = UnlinkChange(edge_id=edge_id)
        return self._shown_outcome(self._gate.submit(change, principal, reason=reason), principal)

    def archive(
        self, record_id: str, *, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        return self.transition(record_id, Status.ARCHIVED, principal=principal, reason=reason)

    def restore(
        self, record_id: str, *, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        return self.transition(record_id, Status.ACTIVE, principal=principal, reason=reason)

    def decide(
        self, proposal_id: str, *, approve: bool, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        decided = self._gate.decide(
            proposal_id, approve=approve, principal=principal, reason=reason
        )
        return self._shown_outcome(decided, principal)

    def rebase(self, proposal_id: str, *, principal: Principal) -> ProposalOutcome:
        return self._gate.rebase(proposal_id, principal=principal)

    def approve_many(
        self, proposal_ids: Sequence[str], *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves many queued proposals with one reason, all in one transaction:
        if any of them cannot be approved (stale, duplicate, already decided, not visible),
        none is and the error names the first."""
        outcomes = self._gate.approve_many(proposal_ids, principal=principal, reason=reason)
        return [self._shown_outcome(o, principal) for o in outcomes]

    def approve_matching(
        self, narrow: ProposalFilter, *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves every pending proposal the filter matches (the review
        queue's filters, across all its pages) with one reason, in one transaction as
        ``approve_many``. A filter matching more than can be decided at once is refused,
        naming the limit, with nothing approved."""
        access.require_curator(principal, "approve or reject proposals")
        found = self.proposals(principal=principal, narrow=narrow, limit=MAX_BULK_DECISIONS + 1)
        if len(found) > MAX_BULK_DECISIONS:
            raise InvalidInput(
                f"more than {MAX_BULK_DECISIONS:,} proposals match; narrow the filters",
                field="filters",
            )
        if not found:
            raise InvalidInput("no pending proposal matches these filters", field="filters")
        return self.approve_many([p.id for p in found], principal=principal, reason=reason)

    def publish(
        self,
        scope: str,
        *,
        principal: Principal,
        record_ids: Sequence[str] | None = None,
        pins: dict[str, str | None] | None = None,
        name: str | None = None,
        replace: bool = False,
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Promote record versions into a new baseline and make it the scope's published one.

        With neither ``record_ids`` nor ``pins``, every active, current record of the scope
        is published at its head version.
        """
        access.require_curator(principal, "publish")
        chosen: dict[str, str | None] = dict(pins or {})
        for record_id in record_ids or ():
            chosen.setdefault(record_id, None)
        if not chosen:
            query = RecordQuery(scope=_literal_glob(scope), statuses=(Status.ACTIVE,))
            for record in self._each_visible_record(query, principal):
                if record.scope == scope and record.superseded_by is None:
                    chosen[record.id] = None
        if not chosen:
            raise Conflict(f"nothing to publish in scope {scope}: no active records", field="scope")
        change = PublishChange(scope=scope, pins=chosen, name=name, replace=replace)
        return self._gate.submit(change, principal, reason=reason)

    def store_many(
        self, contents: Sequence[Content], *, principal: Principal, draft: bool = False
    ) -> list[ProposalOutcome]:
        """Propose up to 10,000 records in one governed transaction: each passes the policy,
        the duplicate check and the permission check (duplicates are rejected item by item;
        a refusal of the caller refuses the whole batch, nothing written), and one audit
        entry names every record the batch made. Vectors are made afterwards, in the
        background, like any write's."""
        changes = [CreateChange(content=c, draft=draft) for c in contents]
        outcomes = self._gate.submit_many(changes, principal)
        return [self._shown_outcome(o, principal) for o in outcomes]

    def remember_many(
        self, contents: Sequence[Content], *, principal: Principal, draft: bool = False
    ) -> list[ProposalOutcome]:
        """``store_many`` under its earlier name."""
        return self.store_many(contents, principal=principal, draft=draft)

    # ---- reads -------------------------------------------------------------------------

    def _visible(self, record_id: str, principal: Principal) -> Record:
        record = self._store.get_record(record_id) if is_id(record_id) else None
        if record is None or not access.can_read(principal, record.scope, record.content.acl):
            raise NotFound(f"no record {record_id!r}", field="record_id")
        return record

    def get(
        self,
        record_id: str,
        *,
        principal: Principal,
        selector: VersionPin | None = None,
        version: int | None = None,
    ) -> RecordView:
        """One record at the version a selector (or an explicit version number) chooses."""
        record = self._visible(record_id, principal)
        selector = selector or VersionPin.head()
        chosen: Version | None
        if version is not None:
            chosen = self._store.get_version_by_number(record_id, version)
            missing = NotFound(f"{record_id} has no version {version}", field="version")
            selector_kind = PinKind.VERSION_REF
        elif selector.kind is PinKind.HEAD:
            chosen = self._store.get_version(record.current_version_id)
            missing = NotFound(f"no record {record_id}", field="record_id")
            selector_kind = PinKind.HEAD
        elif selector.kind is PinKind.VERSION_REF:
            _check(selector.version_id or "", "version_id", MAX_ID_CHARS)
            chosen = self._store.get_version(selector.version_id or "")
            if chosen is not None and chosen.record_id != record_id:
                chosen = None
            missing = NotFound(
                f"{record_id} has no version {selector.version_id}", field="version_id"
            )
            selector_kind = PinKind.VERSION_REF
        else:
            baseline = self._baseline_for(record.scope, selector, principal)
            version_id = baseline.pins.get(record_id)
            if version_id is None:
                raise NotFound(f"{record_id} is not in baseline {baseline.id}", field="selector")
            chosen = self._store.get_version(version_id)
            missing = NotFound(f"{record_id} is not in baseline {baseline.id}", field="selector")
            selector = VersionPin(kind=selector.kind, baseline_id=baseline.id)
            selector_kind = selector.kind
        # A version the principal may not read (its ACL was narrower then) answers exactly
        # like a version that does not exist.
        if chosen is None or not access.can_read(
            principal, chosen.content.scope, chosen.content.acl
        ):
            raise missing
        if selector_kind is PinKind.VERSION_REF:
            selector = VersionPin(kind=PinKind.VERSION_REF, version_id=chosen.id)
        resolved = self.resolve(record_id, principal=principal).id
        return RecordView(
            record=self._shown_record(record, principal),
            version=self._shown_version(chosen, principal),
            selector_used=selector,
            resolved_id=resolved,
        )

    def _baseline_for(self, scope: str, selector: VersionPin, principal: Principal) -> Baseline:
        if selector.kind is PinKind.PUBLISHED:
            baseline_id = self._store.published_baseline_id(scope)
            if baseline_id is None:
                raise NotFound(f"scope {scope} has nothing published yet", field="selector")
        else:
            baseline_id = _check(selector.baseline_id or "", "baseline_id", MAX_ID_CHARS)
        baseline = self._store.get_baseline(baseline_id)
        # A baseline of a scope the principal may not read does not exist for it.
        if baseline is None or not access.in_scope(principal, baseline.scope):
            raise NotFound(f"no baseline {baseline_id}", field="baseline_id")
        return baseline

    # ---- what a response may name ------------------------------------------------------

    def _shown_record(self, record: Record, principal: Principal) -> Record:
        """``record`` as ``principal`` may see it: the id of a successor it may not read
        is left out (the record still reads as superseded in ``validate``)."""
        if record.superseded_by is None:
            return record
        successor = self._store.get_record(record.superseded_by)
        if successor is not None and access.can_read(
            principal, successor.scope, successor.content.acl
        ):
            return record
        return record.model_copy(update={"superseded_by": None})

    def _shown_version(self, version: Version, principal: Principal) -> Version:
        """A version names the proposal that made it only to those who may see that
        proposal: its author and the scope's curators."""
        if version.proposal_id is None or version.created_by == principal.id:
            return version
        if access.is_curator(principal) and access.in_scope(principal, version.content.scope):
            return version
        return version.model_copy(update={"proposal_id": None})

    def _shown_outcome(self, outcome: ProposalOutcome, principal: Principal) -> ProposalOutcome:
        updates: dict[str, object] = {}
        if outcome.record is not None:
            record = self._shown_record(outcome.record, principal)
            if record is not outcome.record:
                updates["record"] = record
        if outcome.version is not None:
            version = self._shown_version(outcome.version, principal)
            if version is not outcome.version:
                updates["version"] = version
        return outcome.model_copy(update=updates) if updates else outcome

    def moves(self, record_id: str, *, principal: Principal) -> tuple[Status, ...]:
        """The lifecycle moves ``principal`` may propose for the record now (none for an
        agent): what a door offers, the gate still deciding."""
        return lifecycle.moves(self._visible(record_id, principal).status, principal)

    def resolve(self, record_id: str, *, principal: Principal) -> Record:
        """Follow the supersession chain to its end (A→B→C resolves to C)."""
        record = self._visible(record_id, principal)
        seen = {record.id}
        while record.superseded_by:
            nxt = self._store.get_record(record.superseded_by)
            if nxt is None or nxt.id in seen:
                break
            if not access.can_read(principal, nxt.scope, nxt.content.acl):
                break  # the reader sees the newest version it may see, never a hidden id
            seen.add(nxt.id)
            record = nxt
        return self._shown_record(record, principal)

    def history(
        self, record_id: str, *, principal: Principal, after: int = 0, limit: int = 1000
    ) -> list[Version]:
        """The versions of a record the principal may read, oldest first: at most ``limit``
        after version number ``after``."""
        if not 0 <= after <= MAX_COUNTER or not 1 <= limit <= 10_000:
            raise InvalidInput(
                f"history pages take 0 <= after <= {MAX_COUNTER} and 1 <= limit <= 10000"
            )
        self._visible(record_id, principal)
        return [
            self._shown_version(v, principal)
            for v in self._store.list_versions(record_id, after=after, limit=limit)
            if access.can_read(principal, v.content.scope, v.content.acl)
        ]

    # ---- events ----------------------------------------------------------------------

    def append_events(self, events: Sequence[EventDraft], *, principal: Principal) -> AppendReport:
        """Append a batch of events in one transaction (one audit entry for the batch).
        Sending an event again is a no-op reported in ``duplicates``; the same id with other
        content refuses the whole batch."""
        report = self._gate.append_events(events, principal)
        if report.stored:
            self._events_appended()
        return report

    def check_events(self, events: Sequence[EventDraft], *, principal: Principal) -> None:
        """Refuse what ``append_events`` would refuse of these events (any number of them),
        storing nothing: a file appended in batches is checked whole first."""
        self._gate.check_events(events, principal)

    def events(
        self,
        *,
        principal: Principal,
        scope: str | None = None,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: EventCursor | None = None,
        limit: int = 100,
    ) -> list[Event]:
        """Events the principal may read, in source-time order, a page at a time (``after``:
        the ``(ts, event_id, scope)`` of the last one seen; ``(ts, event_id)`` within one
        scope). ``scope`` is a glob."""
        if not 1 <= limit <= 10_000:
            raise InvalidInput("limit must be between 1 and 10000", field="limit")
        for value, what in ((scope, "scope"), (session_id, "session_id")):
            if value is not None:
                _check(value, what, MAX_SCOPE_CHARS)
        for moment, what in ((since, "since"), (until, "until")):
            if moment is not None and moment.tzinfo is None:
                raise InvalidInput(f"{what} needs a time zone", field=what)
        allowed = readable(self._store, principal, ReadRequest(scope=scope))
        where = EventFilter(
            acl_ids=allowed.acl_ids,
            scope_ids=allowed.scope_ids,
            session_id=session_id,
            since=since,
            until=until,
        )
        found = self._store.list_events(where, after=after, limit=limit)
        # Trimmed in the store already; the read rule is checked once more here.
        return [e for e in found if access.can_read(principal, e.scope, e.acl)]

    # ---- agent-protocol tasks ---------------------------------------------------------

    def save_task(
        self, task_id: str, context_id: str, state: int, body: bytes, *, principal: Principal
    ) -> None:
        """Keep an agent-protocol task for ``principal`` (its owner, stamped here). A task
        someone else owns is left as it is."""
        _check(task_id, "task_id", MAX_ID_CHARS)
        _check(context_id, "context_id", MAX_ID_CHARS)
        if len(body) > MAX_TASK_BYTES:
            raise InvalidInput(f"a task is at most {MAX_TASK_BYTES} bytes", field="task")
        self._store.put_task(StoredTask(task_id, context_id, principal.id, state, body))

    def task(self, task_id: str, *, principal: Principal) -> bytes | None:
        """A task's body, if the principal owns it (anyone else's is "not there")."""
        found = self._store.get_task(task_id, principal.id) if is_id(task_id) else None
        return found.body if found else None

    def tasks(
        self,
        *,
        principal: Principal,
        context_id: str | None = None,
        state: int | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[bytes]:
        """The principal's tasks, most recently saved first, a page at a time."""
        if not 1 <= limit <= 1000 or not 0 <= offset <= MAX_COUNTER:
            raise InvalidInput("task pages take 1 <= limit <= 1000 and an offset >= 0")
        found = self._store.list_tasks(
            principal.id, context_id=context_id, state=state, limit=limit, offset=offset
        )
        return [task.body for task in found]

    def delete_task(self, task_id: str, *, principal: Principal) -> None:
        if is_id(task_id):
            self._store.delete_task(task_id, principal.id)

    # ---- the graph ---------------------------------------------------------------------

    def _edge_filters(
        self,
        principal: Principal,
        types: Sequence[str] | None,
        statuses: frozenset[str] = frozenset({EdgeStatus.ACTIVE.value}),
        valid_at: datetime | None = None,
    ) -> tuple[EdgeFilter, ChunkFilter]:
        """What a principal may walk: edges under its ACLs and scopes, and records it may
        read (in any state) at either end."""
        if types is not None:
            if len(types) > MAX_LIST_ITEMS:
                raise InvalidInput(f"at most {MAX_LIST_ITEMS} relation types", field="types")
            for name in types:
                if name not in SYSTEM_RELATIONS:
                    self._policy.relation(name)
        vertices = self._everything_readable(principal)
        edges = EdgeFilter(
            acl_ids=vertices.acl_ids,
            scope_ids=vertices.scope_ids,
            types=frozenset(types) if types is not None else None,
            statuses=statuses,
            valid_at=valid_at,
        )
        return edges, vertices

    def edge(self, edge_id: str, *, principal: Principal) -> Edge:
        """One edge the principal may read, both its ends included."""
        return edge_rules.visible_edge(self._store, edge_id, principal)

    def edges(
        self,
        record_id: str,
        *,
        principal: Principal,
        types: Sequence[str] | None = None,
        include_removed: bool = False,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Edge]:
        """A page of the edges touching a record (by id, after ``after``): only edges the
        principal may read whose other end it may read too, trimmed in the store."""
        self._visible(record_id, principal)
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000", field="limit")
        statuses = {EdgeStatus.ACTIVE.value}
        if include_removed:
            statuses.add(EdgeStatus.REMOVED.value)
        where, vertices = self._edge_filters(principal, types, frozenset(statuses))
        found = self._store.list_edges(
            where, node_id=record_id, ends=vertices, after=after, limit=limit
        )
        return [e for e in found if access.can_read(principal, e.scope, e.acl)]

    def neighbours(
        self,
        anchors: Sequence[str],
        *,
        principal: Principal,
        types: Sequence[str] | None = None,
        direction: Direction = Direction.OUT,
        hops: int = 1,
        limit: int = 100,
        valid_at: datetime | None = None,
    ) -> Neighbourhood:
        """The records within ``hops`` edges of ``anchors``, walking only edges and records
        the principal may read: permission is checked on every hop, inside the store, so
        nothing is reached through something hidden. ``withheld`` counts what the walk met
        and could not take, by reason, without naming it."""
        if not 1 <= len(anchors) <= MAX_LIST_ITEMS:
            raise InvalidInput(f"give 1 to {MAX_LIST_ITEMS} anchors", field="anchors")
        if not 1 <= hops <= MAX_HOPS:
            raise InvalidInput(f"hops must be between 1 and {MAX_HOPS}", field="hops")
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be between 1 and 1000", field="limit")
        for anchor in anchors:
            self._visible(anchor, principal)
        where, vertices = self._edge_filters(principal, types, valid_at=valid_at)
        either_way = frozenset(r.name for r in self._policy.relations if not r.directed)
        found = self._store.neighbours(
            anchors,
            edges=where,
            vertices=vertices,
            direction=direction,
            hops=hops,
            limit=limit,
            either_way=either_way,
        )
        # Trimmed in the store already; the read rule is checked once more here.
        shown = tuple(e for e in found.edges if access.can_read(principal, e.scope, e.acl))
        return found.model_copy(update={"edges": shown})

    def _visible_records(self, query: RecordQuery, principal: Principal) -> list[Record]:
        """One page of records the principal may read: trimmed and bounded in the store."""
        for kind in query.kinds:
            self._policy.check_kind(kind)
        rows = self._store.query_records(
            query, scope_globs=principal.scopes, readable=self._everything_readable(principal)
        )
        # The store already trimmed by ACL in the index; the rule is checked once more here.
        return [r for r in rows if access.can_read(principal, r.scope, r.content.acl)]

    def _each_visible_record(self, query: RecordQuery, principal: Principal) -> Iterator[Record]:
        """Every record the principal may read that ``query`` matches, a page at a time."""
        page = query.model_copy(update={"offset": 0, "limit": 1000})
        while True:
            found = self._visible_records(page, principal)
            yield from found
            if len(found) < page.limit:
                return
            page = page.model_copy(update={"after": found[-1].id})

    def list_records(self, query: RecordQuery, *, principal: Principal) -> list[Record]:
        """A page of records the principal may read (``query.after`` and ``query.offset``
        page on), bounded in the store."""
        return [self._shown_record(r, principal) for r in self._visible_records(query, principal)]

    def proposal(self, proposal_id: str, *, principal: Principal) -> Proposal:
        proposal = self._store.get_proposal(proposal_id) if is_id(proposal_id) else None
        if proposal is None or not access.can_see_proposal(principal, proposal):
            raise NotFound(f"no proposal {proposal_id}", field="proposal_id")
        return proposal

    def proposals(
        self,
        *,
        principal: Principal,
        status: ProposalStatus | None = ProposalStatus.PENDING,
        limit: int = 100,
        offset: int = 0,
        after: str | None = None,
        narrow: ProposalFilter | None = None,
    ) -> list[Proposal]:
        """The review queue: curators see the proposals of their scopes, anyone else only
        their own. A page, by id, bounded in the store (``after``: the last id seen);
        ``narrow`` filters it by change, kind, scope, author, rule and age."""
        curates = access.is_curator(principal)
        found = self._store.list_proposals(
            status=status,
            limit=limit,
            offset=offset,
            after=after,
            proposer=principal.id,
            scope_globs=principal.scopes if curates else None,
            narrow=narrow,
        )
        return [p for p in found if access.can_see_proposal(principal, p)]

    def is_stale(self, proposal: Proposal) -> bool:
        return self._gate.is_stale(proposal)

    def audit(self, query: AuditQuery, *, principal: Principal) -> list[AuditEntry]:
        """The audit log names records, proposals and baselines of every scope, so only a
        curator of every scope (``"*"``) reads it."""
        access.require_curator(principal, "read the audit log")
        if not access.sees_everything(principal):
            raise PermissionDenied(
                "the audit log covers every scope: only a curator of every scope ('*') may read it"
            )
        return self._store.list_audit(query)

    def baselines(self, scope: str | None, *, principal: Principal) -> list[Baseline]:
        """Baselines of the scopes the principal reads, each with only the pins of records
        it may read."""
        if scope is not None:
            _check(scope, "scope", MAX_SCOPE_CHARS)
        shown: list[Baseline] = []
        for baseline in self._store.list_baselines(scope):
            if not access.in_scope(principal, baseline.scope):
                continue
            records = self._store.get_records(list(baseline.pins))
            pins: dict[str, str] = {}
            for record_id, version_id in baseline.pins.items():
                record = records.get(record_id)
                if record is None or not access.can_read(
                    principal, record.scope, record.content.acl
                ):
                    continue
                # The pinned version must be readable too: its ACL may be narrower.
                version = self._store.get_version(version_id)
                if version is not None and access.can_read(
                    principal, version.content.scope, version.content.acl
                ):
                    pins[record_id] = version_id
            curates = access.is_curator(principal)
            shown.append(
                baseline.model_copy(
                    update={
                        "pins": pins,
                        # the publish proposal is the curators' (and its proposer's) to see
                        "proposal_id": baseline.proposal_id
                        if curates or baseline.created_by == principal.id
                        else None,
                    }
                )
            )
        return shown

    def record_ids(self, prefix: str, *, principal: Principal, limit: int = 100) -> list[str]:
        """Ids of records the principal may read that start with ``prefix``, in order, at
        most ``limit`` (for completions: one bounded query on the index)."""
        _check(prefix, "prefix", MAX_ID_CHARS)
        where = self._everything_readable(principal)
        return self._store.record_ids(where, prefix, max(0, min(limit, 1000)))

    def default_scope(self, *, principal: Principal) -> str:
        """Where a write that names no scope goes: the principal's own default scope (or
        its one plain scope), never a scope cairn makes up. Without one the write is
        refused, naming the scopes it may write."""
        home = principal.home_scope()
        if home is not None:
            return home
        scopes = ", ".join(principal.scopes) or "none"
        raise InvalidInput(
            f"no scope given, and {principal.id} has no default scope (its scopes are "
            f'{scopes}): name the scope, e.g. "scope": "acme/app"; an operator can set '
            f"default_scope for {principal.id} in principals.yaml",
            field="scope",
        )

    def record_kinds(self) -> tuple[str, ...]:
        """The record kinds this store's policy knows (doors list them in forms and schemas;
        the policy file, not the code, says which exist)."""
        return tuple(self._policy.all_kinds)

    def published_baseline_id(self, scope: str, *, principal: Principal) -> str | None:
        """The baseline ``scope``'s published pointer names, if the principal may see it."""
        _check(scope, "scope", MAX_SCOPE_CHARS)
        pointer = self._store.published_baseline_id(scope)
        if pointer is None:
            return None
        visible = {b.id for b in self.baselines(scope, principal=principal)}
        return pointer if pointer in visible else None

    def scopes(self, prefix: str, *, principal: Principal, limit: int = 100) -> list[str]:
        """Scopes starting with ``prefix`` that hold a record the principal may read, in
        order, at most ``limit`` (for completions)."""
        _check(prefix, "prefix", MAX_SCOPE_CHARS)
        where = self._everything_readable(principal)
        names = self._store.scopes()
        found: list[str] = []
        for scope_id in sorted(where.scope_ids or (), key=lambda i: names[i]):
            if len(found) >= limit:
                break
            if names[scope_id].startswith(prefix) and self._store.record_ids(
                dataclasses.replace(where, scope_ids=frozenset({scope_id})), "", 1
            ):
                found.append(names[scope_id])
        return found

    def _everything_readable(self, principal: Principal) -> ChunkFilter:
        """The filter admitting the head of every record the principal may read, in any
        state (drafts, archived and superseded ones too)."""
        where = readable(self._store, principal, ReadRequest(include_drafts=True))
        return dataclasses.replace(
            where, statuses=frozenset(s.value for s in Status), include_superseded=True
        )

    def status(self, *, principal: Principal) -> dict[str, int]:
        """Counts of what ``principal`` may see. A curator of every scope gets the store's
        row counts, its chunk count and the vector index's lag (chunks not embedded yet);
        anyone else the records it may read, by status, and the proposals it may see."""
        if access.sees_everything(principal):
            counts = self._store.counts()
            counts["chunks"] = self._store.chunk_count()
            if self.indexer is not None:
                counts["vector_lag"] = self.vector_lag()
            return counts
        by_status = self._store.count_records(self._everything_readable(principal))
        counts = {"records": sum(by_status.values())}
        counts.update({f"records.{name}": n for name, n in sorted(by_status.items())})
        curates = access.is_curator(principal)
        seen = self._store.count_proposals(
            proposer=principal.id, scope_globs=principal.scopes if curates else None
        )
        counts["proposals"] = sum(seen.values())
        for status in ProposalStatus:
            counts[f"proposals.{status.value}"] = seen.get(status.value, 0)
        return counts

    def ingest(
        self,
        paths: Sequence[str],
        *,
        principal: Principal,
        scope: str,
        kind: str = "document",
        progress: Callable[[int, int, str], None] | None = None,
    ) -> IngestReport:
        """Ingest files as evidence records (see ``cairn.ingest.files``), from the ingest
        roots the policy opens to the principal's roles only."""
        _check(scope, "scope", MAX_SCOPE_CHARS)
        report = IngestReport()
        area = IngestArea(self.root, self._policy.ingest_roots(principal.roles), self.folder)
        files = expand(paths, area)
        git = git_info(files[0].parent if files else self.root, self.root)
        known = self._ingested_by_path(scope)
        creates: list[CreateChange] = []
        for n, path in enumerate(files, start=1):
            if progress:
                progress(n, len(files), path.name)
            try:
                text = read_text(path, MAX_BODY_CHARS)
            except OSError:
                text = None
            if text is None:  # not UTF-8 text, or larger than a record's body may be
                report.skipped.append(path.relative_to(self.root).as_posix())
                continue
            content = document_for(path, text, scope=scope, git=git, kind=kind)
            relative = content.provenance.path or path.name
            existing = known.get(relative)
            if existing is None:
                creates.append(CreateChange(content=content, paths=(relative,)))
                continue
            if existing.content.content_hash() == content.content_hash():
                report.unchanged.append(existing.id)
                continue
            patch = ContentPatch(
                title=content.title, body=content.body, provenance=content.provenance
            )
            # The kernel's own provenance (ingested evidence) is kept: kernel_provenance.
            outcome = self._gate.submit(
                UpdateChange(record_id=existing.id, patch=patch),
                principal,
                reason="re-ingest",
                kernel_provenance=True,
            )
            _file_outcome(report, self._shown_outcome(outcome, principal), updated=True)
        outcomes = (
            self._gate.submit_many(creates, principal, kernel_provenance=True) if creates else []
        )
        for outcome in outcomes:
            _file_outcome(report, outcome, updated=False)
        return report

    def _ingested_by_path(self, scope: str) -> dict[str, Record]:
        linked = [link.record_id for link in self._store.list_path_links()]
        found: dict[str, Record] = {}
        for record in self._store.get_records(linked).values():
            path = record.content.provenance.path
            if (
                record.scope == scope
                and path
                and record.content.provenance.source_kind == INGESTED_EVIDENCE
                and record.status not in (Status.ARCHIVED, Status.REJECTED)
            ):
                found[path] = record
        return found

    # ---- reads built on retrieval ---------------------------------------------------------

    def read_context(
        self, request: ReadContextRequest, *, principal: Principal
    ) -> ReadContextResponse:
        """Version-pinned, permission-trimmed context for a scope: what an agent reads before it
        works (a query ranks the scope's records; a ``record_id`` fetches one directly)."""
        if request.record_id is not None:
            view = self.get(request.record_id, principal=principal, selector=request.selector)
            if view.record.scope != request.scope:
                raise NotFound(f"no record {request.record_id} in {request.scope}")
            item = direct_item(view.record, view.version, "direct_fetch", scope=view.record.scope)
            return ReadContextResponse(
                scope=request.scope, selector_used=view.selector_used, items=(item,)
            )
        result = self.retrieve(
            request.query or "",
            principal=principal,
            max_tokens=request.max_tokens,
            mode=request.mode,
            k=request.k,
            scope=request.scope,
            selector=request.selector,
            include_drafts=request.include_drafts,
        )
        warnings = list(result.warnings)
        if request.selector.kind is PinKind.PUBLISHED and (
            # a scope the principal may not read reads exactly like one never published
            not access.in_scope(principal, request.scope)
            or self._store.published_baseline_id(request.scope) is None
        ):
            warnings.append(f"nothing is published in {request.scope} yet")
        return ReadContextResponse(
            scope=request.scope,
            selector_used=result.selector_used,
            items=result.items,
            contradictions=result.contradictions,
            token_budget_exceeded=result.token_budget_exceeded,
            excluded_count=result.excluded_count,
            warnings=tuple(warnings),
            trace=result.trace,
        )

    def validate(self, record_ids: Sequence[str], *, principal: Principal) -> ValidationReport:
        """May these cited records still be relied on? (exists, current, valid, active)"""
        now = self.clock()
        checks: list[RecordCheck] = []
        items: list[Item] = []
        for record_id in record_ids:
            record = self._store.get_record(record_id) if is_id(record_id) else None
            if record is None or not access.can_read(principal, record.scope, record.content.acl):
                checks.append(
                    RecordCheck(record_id=record_id, valid=False, problems=("not_found",))
                )
                continue
            problems: list[str] = []
            if record.superseded_by:
                problems.append("superseded")
            if record.status is not Status.ACTIVE:
                problems.append(record.status.value)
            content = record.content
            if content.valid_to is not None and content.valid_to <= now:
                problems.append("expired")
            if content.valid_from is not None and content.valid_from > now:
                problems.append("not_yet_valid")
            checks.append(
                RecordCheck(
                    record_id=record_id,
                    valid=not problems,
                    status=record.status.value,
                    version_id=record.current_version_id,
                    resolved_id=self.resolve(record_id, principal=principal).id,
                    confidence_label=content.confidence.value,
                    problems=tuple(problems),
                )
            )
            version = self._store.get_version(record.current_version_id)
            if version is not None:
                items.append(direct_item(record, version, "direct_fetch", scope=record.scope))
        contradictions = find_contradictions(items)
        return ValidationReport(
            checked_at=now, records=tuple(checks), contradictions=tuple(contradictions)
        )

    def for_path(
        self, path: str, *, principal: Principal, k: int = 10, max_tokens: int = 8000
    ) -> RetrievalResult:
        """Records tied to a repository path (or anything under a directory), drafts
        included so that handoff notes are seen."""
        wanted = path.strip("/")
        record_ids = {
            link.record_id
            for link in self._store.list_path_links()
            if link.path == wanted or link.path.startswith(wanted + "/")
        }
        items: list[Item] = []
        for record in self._store.get_records(sorted(record_ids)).values():
            if not access.can_read(principal, record.scope, record.content.acl):
                continue
            if record.status not in (Status.ACTIVE, Status.DRAFT) or record.superseded_by:
                continue
            version = self._store.get_version(record.current_version_id)
            if version is not None:
                items.append(direct_item(record, version, "relationship_path", scope=record.scope))
        items.sort(key=lambda i: (i.status != "active", i.title))
        return clipped(path, items[:k], max_tokens)

    def for_symbol(
        self, symbol: str, *, principal: Principal, k: int = 10, max_tokens: int = 8000
    ) -> RetrievalResult:
        """Records that mention a code symbol, drafts included."""
        return self.retrieve(
            symbol,
            principal=principal,
            mode="keyword",
            k=k,
            max_tokens=max_tokens,
            include_drafts=True,
        )

    def validate_claims(
        self, text: str, *, principal: Principal, scope: str | None = None
    ) -> ClaimsReport:
        """Check each sentence of an agent's claims against memory: supported,
        contradicted (never resolved) or unknown, with the evidence cited."""
        claims = [c.strip() for c in re.split(r"(?<=[.!?])\s+|\n+", text) if c.strip()]
        if not claims:
            raise InvalidInput("no claims to validate", field="text")
        checked: list[ClaimCheck] = []
        for claim in claims[:20]:
            found = self.retrieve(
                claim,
                principal=principal,
                k=3,
                scope=scope,
                mode="hybrid" if self.indexer else "keyword",
            )
            evidence = tuple(found.items)
            verdict = "unknown"
            for item in evidence:
                relation = claim_relation(claim, item.title + ". " + item.content)
                if relation != "unknown":
                    verdict = relation
                    break
            checked.append(ClaimCheck(claim=claim, verdict=verdict, evidence=evidence))
        return ClaimsReport(claims=tuple(checked))

    def research(
        self,
        question: str,
        *,
        principal: Principal,
        scope: str | None = None,
        max_tokens: int = 4000,
    ) -> ResearchAnswer:
        """The Researcher: plan, retrieve, retry ≤ 3 times, summarise with citations."""
        if not question.strip():
            raise InvalidInput("the question is empty", field="question")

        def attempt(query: str, **options: Any) -> RetrievalResult:
            if options.get("mode") != "keyword" and self.indexer is None:
                options["mode"] = "keyword"
            return self.retrieve(query, principal=principal, scope=scope, **options)

        return research(question, attempt, now=self.clock(), max_tokens=max_tokens)

    # ---- maintenance ---------------------------------------------------------------------

    def refresh(self, *, principal: Principal) -> RefreshReport:
        """Re-hash linked files: changed files make active records stale; files that match
        their linked hash again re-activate records that drift made stale."""
        access.require_curator(principal, "refresh drift")
        by_record: dict[str, list[PathLink]] = {}
        for link in self._store.list_path_links():
            by_record.setdefault(link.record_id, []).append(link)
        stale: list[str] = []
        reactivated: list[str] = []
        for record_id, links in by_record.items():
            record = self._store.get_record(record_id)
            if record is None:
                continue
            checked = [
                link.model_copy(update={"drifted": self._hash_path(link.path) != link.content_hash})
                for link in links
            ]
            drifted = [link.path for link in checked if link.drifted]
            reason = f"refresh requested by {principal.id}"
            if record.status is Status.ACTIVE and drifted:
                self._gate.relink(
                    record,
                    checked,
                    Status.STALE,
                    principal=SYSTEM_PRINCIPAL,
                    reason=f"{reason}: changed {', '.join(drifted)}",
                )
                stale.append(record_id)
            elif (
                record.status is Status.STALE
                and not drifted
                and any(link.drifted for link in links)
            ):
                self._gate.relink(
                    record,
                    checked,
                    Status.ACTIVE,
                    principal=SYSTEM_PRINCIPAL,
                    reason=f"{reason}: linked files match again",
                )
                reactivated.append(record_id)
        return RefreshReport(checked=len(by_record), marked_stale=stale, reactivated=reactivated)

    def vacuum(self, *, principal: Principal) -> VacuumReport:
        """Archive drafts, rejected and stale records kept past the policy's retention."""
        access.require_curator(principal, "vacuum")
        retention = self._policy.retention
        limits = {
            Status.DRAFT: timedelta(days=retention.draft_days),
            Status.REJECTED: timedelta(days=retention.rejected_days),
            Status.STALE: timedelta(days=retention.stale_days),
        }
        now = self.clock()
        archived: list[str] = []
        query = RecordQuery(statuses=tuple(limits), limit=1000)
        while page := self._store.query_records(query, scope_globs=()):
            query = query.model_copy(update={"after": page[-1].id})
            for record in page:
                if now - record.status_changed_at < limits[record.status]:
                    continue
                self._gate.submit(
                    TransitionChange(record_id=record.id, to=Status.ARCHIVED),
                    SYSTEM_PRINCIPAL,
                    reason=f"retention: {record.status.value} since "
                    f"{record.status_changed_at:%Y-%m-%d} (vacuum by {principal.id})",
                )
                archived.append(record.id)
        return VacuumReport(archived=archived)


_SIGNALS: dict[str, tuple[str, ...]] = {
    "hybrid": ("keyword", "vector"),
    "keyword": ("keyword",),
    "vector": ("vector",),
}


def _literal_glob(text: str) -> str:
    """``text`` as a scope glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _check_weights(weights: Mapping[str, float], mode: Mode) -> None:
    for name, weight in weights.items():
        if name not in ("keyword", "vector"):
            raise InvalidInput(
                f"unknown weight {name!r}: weights name 'keyword' and 'vector'", field="weights"
            )
        if not math.isfinite(weight) or weight < 0:
            raise InvalidInput(
                f"the weight of {name!r} must be a finite number of at least 0", field="weights"
            )
    chosen = chosen_weights(weights)
    if sum(chosen[name] for name in _SIGNALS[mode]) <= 0:
        raise InvalidInput(f"every weight used by {mode} search is 0", field="weights")


def _check(value: str, what: str, limit: int) -> str:
    """A plain string a verb takes, within ``cairn.limits``; refusals are ``InvalidInput``."""
    try:
        return check_text(value, what, limit)
    except LimitExceeded as exc:
        raise InvalidInput(str(exc), field=what) from None


def _file_outcome(report: IngestReport, outcome: ProposalOutcome, *, updated: bool) -> None:
    if outcome.decision is Verdict.APPROVE:
        record_id = outcome.record.id if outcome.record else ""
        (report.updated if updated else report.created).append(record_id)
    elif outcome.decision is Verdict.QUEUE:
        report.queued.append(outcome.proposal.id)
    else:
        report.rejected.append(outcome.proposal.id)
