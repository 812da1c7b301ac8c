"""The storage protocol.

Reads take filters the kernel built; there is exactly one write method, ``commit``, which
applies change sets in one transaction. Each change set carries exactly one audit entry, so
"every committed change is audited" holds by construction, and preconditions that are
checked inside the transaction, which is how optimistic concurrency on pinned versions
works on every backend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NotRequired, Protocol, TypedDict, Unpack

from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    Content,
    Direction,
    Edge,
    Event,
    EventCursor,
    Grip,
    Neighbourhood,
    PathLink,
    Proposal,
    ProposalFilter,
    ProposalStatus,
    Record,
    RecordQuery,
    Status,
    TocNode,
    Version,
)
from cairn.options import TaskPage  # the kernel's task listing and the store's are one page

__all__ = [
    "MAX_KEYWORD_TERMS",
    "NOT_COPIES",
    "SCOPED_SEARCH_MAX_SCOPES",
    "SCOPED_SEARCH_MAX_SHARE",
    "VECTORS_FROM",
    "AclRow",
    "ChangeSet",
    "ChunkDraft",
    "ChunkFilter",
    "ChunkMeta",
    "ChunkRow",
    "Chunker",
    "Dumped",
    "EdgeFilter",
    "EdgePage",
    "EventFilter",
    "EventLog",
    "EventPage",
    "EventText",
    "ExpectNoCopies",
    "ExpectProposal",
    "ExpectPublished",
    "ExpectRecord",
    "GraphStore",
    "IndexStore",
    "KeywordQuery",
    "Precondition",
    "ProposalPage",
    "PublishedRow",
    "PutBaseline",
    "PutBatch",
    "PutEdge",
    "PutEvents",
    "PutPathLink",
    "PutProposal",
    "PutRecord",
    "PutTocNode",
    "PutVersion",
    "RecordReach",
    "RecordStore",
    "SetPublished",
    "Store",
    "StoredTask",
    "TaskPage",
    "TaskStore",
    "Timeline",
    "TocFilter",
    "TocPage",
    "Walk",
    "Write",
    "embed_input",
    "plain_term",
    "scoped_reach",
    "text_hash",
]

# ---- writes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PutRecord:
    """Insert or replace a record's state row (its content lives in its versions)."""

    record: Record


@dataclass(frozen=True)
class ChunkDraft:
    """A retrieval unit cut from a version (see ``cairn.retrieval.chunking``)."""

    chunk_key: str
    heading: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class PutVersion:
    """Append a version (and index its chunks). Versions are never changed or removed."""

    version: Version
    chunks: tuple[ChunkDraft, ...] = ()


@dataclass(frozen=True)
class PutProposal:
    proposal: Proposal


@dataclass(frozen=True)
class PutBaseline:
    baseline: Baseline


@dataclass(frozen=True)
class SetPublished:
    scope: str
    baseline_id: str


@dataclass(frozen=True)
class PutEdge:
    """Insert an edge, or replace its state (status, removal) when it exists."""

    edge: Edge


@dataclass(frozen=True)
class PutPathLink:
    link: PathLink


@dataclass(frozen=True)
class PutEvents:
    """Append events, each with an outbox row. An event already stored under its id is left
    as it is when its content is the same; with other content the whole commit fails
    (``Conflict``), so no event is ever rewritten."""

    events: tuple[Event, ...]


@dataclass(frozen=True)
class PutTocNode:
    """Store a new version of a timeline node (its grips, and the chunks that index its
    summary) and make it the node's latest; the node's earlier chunks leave the head of the
    index. Earlier versions are never changed."""

    node: TocNode
    chunks: tuple[ChunkDraft, ...] = ()


@dataclass(frozen=True)
class PutBatch:
    """What a batch of new records writes, one table at a time: the batch's proposals
    (accepted, rejected or queued), the records it made with their first versions (and
    chunks), its bookkeeping edges and path links. Every row is new: an id already stored
    fails the whole commit (``Conflict``), which is the "must not exist yet" precondition
    of each record. A store writes each table's rows with one statement."""

    proposals: tuple[Proposal, ...] = ()
    records: tuple[Record, ...] = ()
    versions: tuple[PutVersion, ...] = ()
    edges: tuple[Edge, ...] = ()
    links: tuple[PathLink, ...] = ()

    @classmethod
    def of(cls, writes: Iterable[Write]) -> PutBatch:
        """The batch of ``writes``, each a new row: what accepting, queueing or rejecting
        new records writes (proposals, records, versions, edges, path links)."""
        proposals: list[Proposal] = []
        records: list[Record] = []
        versions: list[PutVersion] = []
        edges: list[Edge] = []
        links: list[PathLink] = []
        for write in writes:
            if isinstance(write, PutProposal):
                proposals.append(write.proposal)
            elif isinstance(write, PutRecord):
                records.append(write.record)
            elif isinstance(write, PutVersion):
                versions.append(write)
            elif isinstance(write, PutEdge):
                edges.append(write.edge)
            elif isinstance(write, PutPathLink):
                links.append(write.link)
            else:
                raise TypeError(f"a batch of new rows cannot hold {type(write).__name__}")
        return cls(tuple(proposals), tuple(records), tuple(versions), tuple(edges), tuple(links))


Write = (
    PutRecord
    | PutVersion
    | PutProposal
    | PutBaseline
    | SetPublished
    | PutEdge
    | PutPathLink
    | PutEvents
    | PutTocNode
    | PutBatch
)


# ---- preconditions -----------------------------------------------------------------------


@dataclass(frozen=True)
class ExpectRecord:
    """The record's head must still be ``version_id`` (``None``: it must not exist yet),
    when given, its status must still be ``status``, and with ``unsuperseded`` nothing may
    have superseded it (a supersession changes neither head nor status)."""

    record_id: str
    version_id: str | None
    status: Status | None = None
    unsuperseded: bool = False


# A record in these states holds its content without counting as a copy of it: content
# rejected or archived may be proposed again.
NOT_COPIES: tuple[Status, ...] = (Status.REJECTED, Status.ARCHIVED)


@dataclass(frozen=True)
class ExpectNoCopies:
    """No record of ``scope`` holding content of one of ``content_hashes`` may have come
    since the duplicate check, which saw ``holders`` (records in ``NOT_COPIES`` states
    aside): a copy committed meanwhile refuses the change. Which record it is, the error
    never says: the caller may not be allowed to read it."""

    scope: str
    content_hashes: frozenset[str]
    holders: frozenset[str]


@dataclass(frozen=True)
class ExpectProposal:
    proposal_id: str
    status: ProposalStatus


@dataclass(frozen=True)
class ExpectPublished:
    scope: str
    baseline_id: str | None


Precondition = ExpectRecord | ExpectProposal | ExpectPublished | ExpectNoCopies


@dataclass(frozen=True)
class ChangeSet:
    audit: AuditEntry
    writes: tuple[Write, ...] = ()
    expects: tuple[Precondition, ...] = field(default_factory=tuple)


# ---- agent-protocol tasks ----------------------------------------------------------------


@dataclass(frozen=True)
class StoredTask:
    """An agent-protocol task as a door saved it: its serialised body, and who owns it."""

    id: str
    context_id: str
    owner: str
    state: int
    body: bytes


# ---- whole-store dump rows (cairn.store.transfer) -------------------------------------------


@dataclass(frozen=True)
class PublishedRow:
    """A scope's published pointer, as stored."""

    scope: str
    baseline_id: str
    updated_at: datetime


# One stored row of any memory table, in the order ``import_rows`` needs them: records,
# versions, proposals, audit (with seq), baselines (with pins), published, edges, path links.
Dumped = (
    Record | Version | Proposal | AuditEntry | Baseline | PublishedRow | Edge | PathLink | Event
)


# ---- the retrieval index ----------------------------------------------------------------


# Keyword search is confined to the reader's scopes inside the index when they are few and
# hold a small part of the store: the search then costs what those scopes hold. A broad
# reader is filtered after the match instead, since confining it to most of the index
# costs more than it saves (Store.keyword_reach reports which way a read goes).
SCOPED_SEARCH_MAX_SCOPES = 64
SCOPED_SEARCH_MAX_SHARE = 0.25


def scoped_reach(
    scope_ids: frozenset[int] | None,
    chunks_in: Callable[[list[int]], int],
    chunk_count: Callable[[], int],
) -> tuple[list[int], int] | None:
    """The scopes a keyword search is confined to inside the index (sorted) and how many
    chunks they hold (``chunks_in``, a store's kept per-scope count); None when the search
    filters after the match instead. The one rule both stores follow."""
    if not scope_ids or len(scope_ids) > SCOPED_SEARCH_MAX_SCOPES:
        return None
    scopes = sorted(scope_ids)
    reach = chunks_in(scopes)
    if reach > SCOPED_SEARCH_MAX_SHARE * chunk_count():
        return None
    return scopes, reach


def embed_input(title: str, heading: str, text: str) -> str:
    """The text a chunk's vector is computed from; its hash keys the vector cache, so the
    same passage under the same title is embedded once across versions and records."""
    return "\n".join(part for part in (title, heading, text) if part)


def text_hash(title: str, heading: str, text: str) -> str:
    return hashlib.sha256(embed_input(title, heading, text).encode()).hexdigest()


# ``index_meta`` keys under which a store keeps, per model (``VECTORS_FROM + model``), where
# its scan for chunks waiting for a vector may start (PostgreSQL's ``cairn_vectors_from``
# spells it too).
VECTORS_FROM = "vectors_from:"


# At most this many terms reach an index: more only slows the search (the kernel keeps the
# rarest, see ``cairn.search.fts.select_terms``).
MAX_KEYWORD_TERMS = 64


def plain_term(term: str) -> str:
    """``term`` without what no database takes as a parameter (NUL, lone surrogates)."""
    return term.encode("utf-8", "ignore").decode("utf-8").replace("\x00", "")


@dataclass(frozen=True)
class KeywordQuery:
    """What a keyword search looks for: chunks holding any of ``terms`` (words as a person
    typed them, already stripped of stopwords), ranked by how well they match. Each store
    turns it into its own engine's syntax; no query syntax crosses the interface, so no
    text a caller typed can be read as an operator."""

    terms: tuple[str, ...]

    def __post_init__(self) -> None:
        clean = (plain_term(t) for t in self.terms)
        kept = tuple(t for t in dict.fromkeys(clean) if t.strip())
        object.__setattr__(self, "terms", kept[:MAX_KEYWORD_TERMS])


@dataclass(frozen=True)
class ChunkFilter:
    """Which chunks a read may see, decided before ranking (``retrieval.preselect``).

    ``None`` means "no restriction on this axis"; empty sets match nothing.
    """

    acl_ids: frozenset[int]
    statuses: frozenset[str]
    scope_ids: frozenset[int] | None = None
    kinds: frozenset[str] | None = None
    head_only: bool = True
    version_ids: frozenset[str] | None = None
    record_ids: frozenset[str] | None = None
    include_superseded: bool = False
    valid_at: datetime | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    source_kinds: frozenset[str] | None = None
    # a time range at the source, [source_after, source_before)
    source_after: datetime | None = None
    source_before: datetime | None = None


@dataclass(frozen=True)
class EdgeFilter:
    """Which edges a read may see: the reader's ACLs and scopes (as for chunks), the
    relation types asked for (``None``: any) and the states (a walk takes active ones)."""

    acl_ids: frozenset[int]
    scope_ids: frozenset[int] | None
    types: frozenset[str] | None = None
    statuses: frozenset[str] = frozenset({"active"})
    valid_at: datetime | None = None


@dataclass(frozen=True)
class EventFilter:
    """Which events a read may see (the reader's ACLs and scopes, as for chunks) and which it
    asks for: one session, a source-time range ``[since, until)``."""

    acl_ids: frozenset[int]
    scope_ids: frozenset[int] | None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    agent: str | None = None


class EventPage(TypedDict, total=False):
    """Which page of events a listing returns: at most ``limit`` (default 100) after the
    position ``after`` of the last one seen, or with ``before`` the ones before that
    position instead, nearest first (``EventLog.list_events``)."""

    after: EventCursor | None
    before: EventCursor | None
    limit: int


@dataclass(frozen=True)
class EventText:
    """What a scan reads of an event: its id, scope, time and session, and the start of its
    text (never its metadata)."""

    event_id: str
    scope: str
    ts: datetime
    session_id: str
    text: str


@dataclass(frozen=True)
class TocFilter:
    """Which timeline nodes a read may see (the reader's ACLs and scopes, as for events) and
    which it asks for. Only latest versions are listed; retired segments are left out unless
    ``include_retired``."""

    acl_ids: frozenset[int]
    scope_ids: frozenset[int] | None
    levels: frozenset[str] | None = None
    parent_id: str | None = None
    partition_key: str | None = None
    node_ids: frozenset[str] | None = None
    include_retired: bool = False


class TocPage(TypedDict, total=False):
    """Which page of timeline nodes a listing returns: at most ``limit`` (default 100) after
    the ``(starts_at, node_id)`` of the last one seen, or by last event, newest first."""

    after: tuple[datetime, str] | None
    limit: int
    newest_first: bool


class Walk(TypedDict):
    """How a walk over edges goes (``GraphStore.neighbours``): only over edges ``edges``
    admits, only through records whose head chunks ``vertices`` admits, ``direction`` for
    directed relations (those of the ``either_way`` types are walked both ways), at most
    ``hops`` steps and ``limit`` records."""

    edges: EdgeFilter
    vertices: ChunkFilter
    direction: Direction
    hops: int
    limit: int
    either_way: NotRequired[frozenset[str]]


class EdgePage(TypedDict, total=False):
    """Which edges a listing returns (``GraphStore.list_edges``): those touching ``node_id``
    when given, with ``ends`` only edges between records whose head chunks it admits (so a
    listing never names a record the reader may not see); by id after ``after``, at most
    ``limit`` (default 100)."""

    node_id: str | None
    ends: ChunkFilter | None
    after: str | None
    limit: int


class RecordReach(TypedDict):
    """Which records a query may reach (``RecordStore.query_records``): those in a scope one
    of ``scope_globs`` matches (none given: any scope) and, with ``readable``, only those
    whose head chunks it admits (the reader's ACL and scopes, checked in the index)."""

    scope_globs: Sequence[str]
    readable: NotRequired[ChunkFilter | None]


class ProposalPage(TypedDict, total=False):
    """Which proposals a listing returns (``RecordStore.list_proposals``): those of
    ``status`` (default: any), a page of ``limit`` (default 100) after the id ``after`` and
    ``offset`` more; with ``proposer`` and/or ``scope_globs``, only those proposed by
    ``proposer`` or in a scope a glob matches, and of those only the ones ``narrow`` admits."""

    status: ProposalStatus | None
    limit: int
    offset: int
    after: str | None
    proposer: str | None
    scope_globs: Sequence[str] | None
    narrow: ProposalFilter | None


@dataclass(frozen=True)
class ChunkMeta:
    """A chunk's filter columns: what the in-memory vector catalog mirrors."""

    id: int
    record_id: str
    version_id: str
    text_hash: str
    kind: str
    scope_id: int
    acl_id: int
    status: str
    is_head: bool
    superseded: bool
    valid_from: datetime | None
    valid_to: datetime | None
    created_at: datetime
    seq: int
    # What the chunk's text comes from ("record"; the timeline adds its own kinds) and when
    # that happened at its source (a record's validity start, else when it was written).
    source_kind: str = "record"
    source_time: datetime | None = None


@dataclass(frozen=True)
class ChunkRow:
    meta: ChunkMeta
    version_no: int
    chunk_key: str
    heading: str
    start: int
    end: int
    text: str
    title: str


@dataclass(frozen=True)
class AclRow:
    id: int
    roles: tuple[str, ...]
    labels: tuple[str, ...]
    sensitivity: int


# How the kernel cuts a version into chunks (``cairn.retrieval.chunking.chunks_for``).
Chunker = Callable[[Content], Sequence[ChunkDraft]]


# ---- the protocol ------------------------------------------------------------------------


class RecordStore(Protocol):
    """Records, versions, proposals, baselines and the audit log. Nothing but ``commit``
    writes them, and only the gate calls ``commit``."""

    def commit(self, changesets: Sequence[ChangeSet]) -> list[int]:
        """Apply every change set in one transaction; return the audit sequence numbers.

        Raises ``Conflict`` (nothing written) when a precondition no longer holds.
        """
        ...

    def get_record(self, record_id: str) -> Record | None: ...

    def get_records(self, record_ids: Sequence[str]) -> dict[str, Record]: ...

    def get_version(self, version_id: str) -> Version | None: ...

    def get_version_by_number(self, record_id: str, number: int) -> Version | None: ...

    def list_versions(
        self, record_id: str, *, after: int = 0, limit: int | None = None
    ) -> list[Version]: ...

    def query_records(self, query: RecordQuery, **reach: Unpack[RecordReach]) -> list[Record]:
        """At most ``query.limit`` records matching ``query`` that ``reach`` admits, ordered
        by id, after ``query.after`` and ``query.offset``, bounded in the store."""
        ...

    def records_by_graph_key(
        self, key: str, kinds: Sequence[str], scope_globs: Sequence[str]
    ) -> list[Record]:
        """The records of ``kinds`` in scopes ``scope_globs`` admits (none: none) whose
        head version's graph key (``metadata.graph_id``) is ``key``, by id, at most ten: an
        index lookup on both stores."""
        ...

    def find_by_hashes(self, scope: str, content_hashes: Sequence[str]) -> list[Record]:
        """The records of ``scope`` whose head content has one of ``content_hashes``, by id."""
        ...

    def get_proposal(self, proposal_id: str) -> Proposal | None: ...

    def list_proposals(self, **listing: Unpack[ProposalPage]) -> list[Proposal]:
        """Proposals by id, bounded in the store, as ``listing`` says."""
        ...

    def count_proposals(
        self, *, proposer: str, scope_globs: Sequence[str] | None = None
    ) -> dict[str, int]: ...

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]: ...

    def count_audit(self) -> int: ...

    def audit_head(self) -> int:
        """The sequence number of the newest audit entry (0 for none): every write is
        audited, so it moves whenever the store changes."""
        ...

    def get_baseline(self, baseline_id: str) -> Baseline | None: ...

    def published_baseline_id(self, scope: str) -> str | None: ...

    def list_baselines(self, scope: str | None = None) -> list[Baseline]: ...

    def list_path_links(self, record_id: str | None = None) -> list[PathLink]: ...

    def counts(self) -> dict[str, int]:
        """Row counts by table and by record status, for ``cairn status``."""
        ...

    def iter_all(self) -> Iterator[Dumped]:
        """Every stored row, in ``import_rows`` order, from one consistent snapshot."""
        ...

    def import_rows(self, rows: Iterable[Dumped], *, chunker: Chunker | None = None) -> int:
        """Load a dump (``iter_all`` of another store) into this one; return the row count.

        Only ``cairn.store.transfer`` calls it. It is not a way around the gate: it replays
        a history the gate already wrote and audited, keeping ids, versions and audit seqs,
        and it refuses (``Conflict``) unless this store is empty, all in one transaction.
        A dump holds no derived index: ``chunker`` re-cuts every version into the chunks
        the retrieval index holds (without one, imported versions are not searchable).
        """
        ...

    def close(self) -> None: ...


class IndexStore(Protocol):
    """The retrieval index the kernel keeps beside the records (derived from versions in
    the same transaction) and the vector cache. Reads take cairn's own filter types."""

    def acls(self) -> list[AclRow]: ...

    def scopes(self) -> dict[int, str]: ...

    def keyword_search(
        self, query: KeywordQuery, where: ChunkFilter, limit: int
    ) -> list[tuple[int, float]]:
        """Chunk ids and scores (higher is better) of the best ``limit`` chunks holding any
        of the query's terms, among chunks that ``where`` admits."""
        ...

    def doc_freq(self, term: str) -> int: ...

    def keyword_reach(self, where: ChunkFilter) -> int | None:
        """How many chunks a keyword search under ``where`` can touch at most, when the
        index itself restricts the search to ``where``'s scopes (its cost then grows with
        those scopes, not with the store); None when it searches the whole index."""
        ...

    def chunk_count(self) -> int: ...

    def record_ids(self, where: ChunkFilter, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` ids of records whose chunks ``where`` admits that start with
        ``prefix``, in order (completions)."""
        ...

    def count_records(self, where: ChunkFilter) -> dict[str, int]:
        """Records whose head chunks ``where`` admits, counted by status (what ``cairn
        status`` shows a principal that may not see the whole store)."""
        ...

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]: ...

    def chunk_metas(self, chunk_ids: Sequence[int]) -> dict[int, ChunkMeta]:
        """The filter columns of each of ``chunk_ids`` as stored now (any chunk: a record's
        or a timeline node's); ids the store does not hold are left out."""
        ...

    def heads_readable(self, record_ids: Collection[str], acl_ids: Collection[int]) -> set[str]:
        """Those of ``record_ids`` whose head chunks carry one of ``acl_ids``: the records
        whose older versions a reader with those ACLs may read."""
        ...

    def index_seq(self) -> int:
        """The largest change sequence number of the index (0 when empty): how far a
        mirror that has read every change has got."""
        ...

    def chunk_changes(self, since_seq: int, limit: int = 50_000) -> list[ChunkMeta]:
        """Chunks inserted or whose filter columns changed after ``since_seq``, by seq."""
        ...

    def pending_vectors(self, model: str, limit: int) -> list[tuple[str, str]]:
        """(text_hash, text to embed) of chunks with no vector for ``model`` yet."""
        ...

    def vector_lag(self, model: str) -> int: ...

    def vectors_from(self, model: str) -> int:
        """Where the scan for chunks waiting for ``model``'s vector starts: every chunk
        before it in the scan's order has one (kept by ``put_vectors`` for the next
        process)."""
        ...

    def count_unembedded(
        self, model: str, where: ChunkFilter, after_seq: int, most: int
    ) -> int | None:
        """How many chunks with a seq after ``after_seq`` that ``where`` admits have no
        vector for ``model`` yet; None when more than ``most`` chunks (whoever may see them)
        lie there, which a read does not count."""
        ...

    def put_vectors(self, model: str, dim: int, items: Sequence[tuple[str, bytes]]) -> None:
        """Cache embeddings by content hash. Derived data, not memory: no audit entry."""
        ...

    def get_vectors(self, model: str, text_hashes: Sequence[str]) -> dict[str, bytes]: ...

    def chunk_vectors(self, model: str, chunk_ids: Sequence[int]) -> dict[int, bytes]:
        """The stored vector of each of ``chunk_ids`` (by its text) for ``model``; chunks
        with none yet are left out. The catalog re-reads its finalists' float32 vectors
        here when its graph holds fewer dimensions."""
        ...


class GraphStore(Protocol):
    """Edges and walks over them. Edges are written by ``RecordStore.commit`` (``PutEdge``);
    every read here is bounded and trimmed in SQL by the filters the kernel built."""

    def get_edge(self, edge_id: str) -> Edge | None: ...

    def list_edges(self, where: EdgeFilter | None, **page: Unpack[EdgePage]) -> list[Edge]:
        """A ``page`` of the edges ``where`` admits (``None``: every edge, for the kernel's
        own checks)."""
        ...

    def neighbours(self, anchors: Sequence[str], **walk: Unpack[Walk]) -> Neighbourhood:
        """Records reachable from ``anchors`` as ``walk`` goes, nearest first. The edges it
        met but could not take are counted by reason in ``withheld``."""
        ...


class TaskStore(Protocol):
    """Agent-protocol tasks: a door's conversation state, not memory (no versions, no audit,
    not exported). Each is its owner's alone: reads and deletes name the owner."""

    def put_task(self, task: StoredTask, *, final_states: Collection[int] = ()) -> None:
        """Insert or replace; a task already owned by someone else is left unchanged, and so
        is one stored in one of ``final_states`` unless the save keeps its state."""
        ...

    def get_task(self, task_id: str, owner: str) -> StoredTask | None: ...

    def list_tasks(self, owner: str, **page: Unpack[TaskPage]) -> list[StoredTask]:
        """The owner's tasks, most recently saved first."""
        ...

    def delete_task(self, task_id: str, owner: str) -> None: ...


class EventLog(Protocol):
    """Events, appended by ``RecordStore.commit`` (``PutEvents``) and never changed, and the
    outbox that tells indexers what was appended, in commit order. An event is identified
    by its scope and its producer's id: the same id in another scope is another event."""

    def list_events(self, where: EventFilter, **page: Unpack[EventPage]) -> list[Event]:
        """Events ``where`` admits in source-time order (``ts``, ``event_id``, then
        ``scope``), a ``page`` of them. A position is ``(ts, event_id)``, or ``(ts,
        event_id, scope)`` where a read spans scopes (the same id may stand at the same time
        in two scopes)."""
        ...

    def event_texts(
        self, where: EventFilter, *, max_chars: int, **page: Unpack[EventPage]
    ) -> list[EventText]:
        """Like ``list_events``, but only each event's id, scope, time, session and the
        first ``max_chars`` characters of its text, cut in the database: what a scan reads."""
        ...

    def get_events(self, scope_id: int, event_ids: Sequence[str]) -> dict[str, Event]:
        """The events of one scope (its interned id) with these ids, by id."""
        ...

    def outbox(self, consumer: str, limit: int = 1000) -> list[tuple[int, Event]]:
        """The events appended since ``consumer`` last acknowledged, with their outbox
        positions, in commit order."""
        ...

    def ack_outbox(self, consumer: str, position: int) -> None:
        """``consumer`` has handled everything up to ``position``."""
        ...

    def outbox_lag(self, consumer: str) -> int:
        """How many events ``consumer`` has not acknowledged yet."""
        ...


class Timeline(Protocol):
    """The time hierarchy over events: node versions written by ``RecordStore.commit``
    (``PutTocNode``) and never changed, which version of each is latest, and grips."""

    def toc_nodes(self, where: TocFilter, **page: Unpack[TocPage]) -> list[TocNode]:
        """Latest versions ``where`` admits, by ``(starts_at, node_id)``, a ``page`` of them."""
        ...

    def toc_node(self, node_id: str, version: int | None = None) -> TocNode | None:
        """One node at ``version`` (default: its latest)."""
        ...

    def toc_heads(self, node_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """The latest version number and content digest of each node that exists."""
        ...

    def grips(self, grip_ids: Sequence[str]) -> dict[str, tuple[Grip, int, int]]:
        """Each grip that exists, with the scope id and ACL id of the node it came from."""
        ...

    def compact(self) -> dict[str, int | str]:
        """Merge the keyword index's segments and reclaim free space, where the backend
        leaves that to its caller (what it did, in numbers)."""
        ...

    def toc_counts(self) -> dict[str, int]:
        """How many nodes of each level the hierarchy holds (retired segments left out)."""
        ...

    def timeline_chunks(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, int, str]]:
        """For chunks indexing timeline nodes: ``(node_id, version, chunk_key)``."""
        ...


class Store(RecordStore, IndexStore, GraphStore, TaskStore, EventLog, Timeline, Protocol):
    """Everything the kernel needs from a backend; each backend implements every part, and
    one contract suite runs on each. Nothing else may write memory tables."""
