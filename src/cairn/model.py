"""Domain types: one vocabulary for the kernel, the doors and the store.

These models are values (frozen); edits go through ``model_copy``. Store rows stay private
to ``cairn.store``; everything crossing a module boundary is one of these.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import re
import threading
import time
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    model_validator,
)

from cairn.limits import (
    MAX_BODY_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_CONTEXT_ITEMS,
    MAX_COUNTER,
    MAX_ID_CHARS,
    MAX_KIND_CHARS,
    MAX_LIST_ITEMS,
    MAX_NAME_CHARS,
    MAX_QUERY_CHARS,
    MAX_REASON_CHARS,
    MAX_SCOPE_CHARS,
    MAX_TITLE_CHARS,
    WHITE_SPACE,
    JsonLimit,
    TextLimit,
    is_stored,
)

__all__ = [
    "BUILTIN_KINDS",
    "KIND_MARKER",
    "RELATION_PATTERN",
    "SCOPE_PATTERN",
    "SYSTEM_PRINCIPAL",
    "SYSTEM_RELATIONS",
    "Acl",
    "AppendReport",
    "AuditEntry",
    "AuditQuery",
    "Baseline",
    "Body",
    "Bullet",
    "CairnModel",
    "Change",
    "Confidence",
    "Content",
    "ContentPatch",
    "ContextText",
    "CreateChange",
    "Direction",
    "Edge",
    "EdgeDraft",
    "EdgeStatus",
    "Event",
    "EventCursor",
    "EventDraft",
    "EventKind",
    "EventRole",
    "Grip",
    "Id",
    "JsonDict",
    "Kind",
    "LinkChange",
    "Metadata",
    "Name",
    "Names",
    "Neighbour",
    "Neighbourhood",
    "Origin",
    "PathLink",
    "PinKind",
    "Principal",
    "PrincipalKind",
    "Proposal",
    "ProposalFilter",
    "ProposalOutcome",
    "ProposalStatus",
    "Provenance",
    "PublishChange",
    "QueryText",
    "Question",
    "Reason",
    "Record",
    "RecordQuery",
    "RecordView",
    "RelationName",
    "RepoPath",
    "RepoPaths",
    "Role",
    "ScopePath",
    "Sensitivity",
    "ShortText",
    "Status",
    "SupersedeChange",
    "Timestamp",
    "Title",
    "TocLevel",
    "TocNode",
    "TransitionChange",
    "UnlinkChange",
    "UpdateChange",
    "Verdict",
    "Version",
    "VersionPin",
    "content_hash",
    "event_cursor",
    "exactly_one_of",
    "new_id",
    "utcnow",
]

BUILTIN_KINDS: tuple[str, ...] = (
    "decision", "belief", "episode", "skill", "fact", "document", "event",
)  # fmt: skip


class CairnModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def exactly_one_of(first: str, second: str, message: str) -> Any:
    """A model check that exactly one of the optional fields ``first`` and ``second`` is
    given (not ``None``), refusing the model with ``message`` otherwise. Assign it to a
    private name in the class body, as a method decorated ``model_validator`` would be."""

    def check(model: BaseModel) -> BaseModel:
        if (getattr(model, first) is None) == (getattr(model, second) is None):
            raise ValueError(message)
        return model

    return model_validator(mode="after")(check)


def utcnow() -> datetime:
    return datetime.now(UTC)


_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _not_a_number(value: object) -> object:
    # pydantic would read 1700000000 (or "0.5") as a Unix time: the contract is RFC 3339.
    if isinstance(value, bool | int | float) or (
        isinstance(value, str) and _NUMBER.fullmatch(value)
    ):
        raise ValueError("must be an RFC 3339 date-time with a time zone, not a number")
    return value


def _aware(value: datetime, info: ValidationInfo) -> datetime:
    if is_stored(info):
        # Stores written before times were required to be aware: one rule, UTC.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            "a date-time needs a time zone, e.g. 2026-01-31T12:00:00Z or 2026-01-31T14:00:00+02:00"
        )
    try:
        # Stores and indexes keep times in UTC: 9999-12-31T23:59:59-01:00 has no UTC time.
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            "the date-time is out of range: in UTC it falls before year 1 or after year 9999"
        ) from None
    return value


# Every time a caller gives cairn: RFC 3339 with a time zone. Times without one are refused
# rather than guessed at, since comparing them with the aware times cairn keeps would fail.
Timestamp = Annotated[datetime, BeforeValidator(_not_a_number), AfterValidator(_aware)]

# Text fields, with the limits of ``cairn.limits``.
Name = Annotated[str, TextLimit(MAX_NAME_CHARS, min_chars=1)]
ShortText = Annotated[str, TextLimit(MAX_NAME_CHARS * 4)]
Names = Annotated[tuple[Name, ...], Field(max_length=MAX_LIST_ITEMS)]
RepoPath = Annotated[str, TextLimit(MAX_NAME_CHARS * 4, min_chars=1)]
RepoPaths = Annotated[tuple[RepoPath, ...], Field(max_length=MAX_LIST_ITEMS)]
# What callers name and say in requests (the doors declare these in their schemas).
Id = Annotated[str, TextLimit(MAX_ID_CHARS, min_chars=1), Field(examples=["rec_01J…"])]
Reason = Annotated[str, TextLimit(MAX_REASON_CHARS)]
QueryText = Annotated[str, TextLimit(MAX_QUERY_CHARS)]
# Text that must say something: at least one character that is not white space.
Question = Annotated[str, TextLimit(MAX_QUERY_CHARS, not_blank=True)]


# ULIDs (https://github.com/ulid/spec): 48 bits of milliseconds and 80 random bits, written
# as 26 Crockford base-32 characters. Made here rather than by a ULID library because a
# batch of writes makes four ids per record and the library's took a tenth of the batch.
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(a + b for a in _CROCKFORD for b in _CROCKFORD)  # 10 bits, two characters
_SHIFTS = tuple(range(120, -10, -10))  # 130 bits: 128 of the id, two zero bits on top
_RANDOM_BITS = 80
_id_lock = threading.Lock()
_id_last = [0, 0]  # the last id's millisecond and random part


def new_id(prefix: str) -> str:
    """A sortable id: a ULID behind a short type prefix (``rec_01J…``), readable in logs.
    Ids made in one process increase strictly, also within a millisecond (the previous
    random part plus one, as the spec's monotonic generators do)."""
    now = time.time_ns() // 1_000_000
    with _id_lock:
        ms, rand = _id_last
        if now > ms:
            ms, rand = now, int.from_bytes(os.urandom(10))
        else:  # the same millisecond, or the clock stepped back: count up
            rand += 1
            if rand >> _RANDOM_BITS:
                ms, rand = ms + 1, int.from_bytes(os.urandom(10))
        _id_last[:] = (ms, rand)
    value = ms << _RANDOM_BITS | rand
    return prefix + "_" + "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


class Status(StrEnum):
    """Where a record is in its life: draft, active, stale (its source changed), archived …"""

    DRAFT = "draft"
    ACTIVE = "active"
    STALE = "stale"
    REJECTED = "rejected"
    ARCHIVED = "archived"


class Origin(StrEnum):
    SYSTEM = "system"
    AGENT = "agent"
    HUMAN = "human"


class Confidence(StrEnum):
    INFERRED = "inferred"
    SUPPORTED = "supported"
    VERIFIED = "verified"


class Sensitivity(StrEnum):
    """How sensitive a record is; a principal reads up to its own level."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return {"low": 0, "medium": 1, "high": 2}[self.value]


class PrincipalKind(StrEnum):
    """Who a principal is: an agent, a human, or the system itself."""

    AGENT = "agent"
    HUMAN = "human"
    SYSTEM = "system"


class Role(StrEnum):
    AGENT = "agent"
    CURATOR = "curator"
    ADMIN = "admin"


class Acl(CairnModel):
    """Who may read a record. Empty ``roles`` means any role; every label must be held.
    Curators of the record's scope read it whatever its ACL says (``governance.access``)."""

    roles: Names = ()
    labels: Names = ("internal",)
    sensitivity: Sensitivity = Sensitivity.LOW


class Provenance(CairnModel):
    """Where a record came from. ``source_kind`` is stamped by the kernel (ingest sets
    ``INGESTED_EVIDENCE``); a caller's own value is dropped. The rest are the caller's claims."""

    source: ShortText | None = None
    source_kind: ShortText | None = None
    source_repo: ShortText | None = None
    commit_sha: ShortText | None = None
    path: ShortText | None = None
    tool: ShortText | None = None


JsonDict = dict[str, Any]


# A scope is a path of segments that are neither empty nor padded with white space.
_SCOPE_SEGMENT = rf"[^/\x00{WHITE_SPACE}](?:[^/\x00]*[^/\x00{WHITE_SPACE}])?"
SCOPE_PATTERN = rf"^{_SCOPE_SEGMENT}(?:/{_SCOPE_SEGMENT})*$"
_SCOPE = re.compile(SCOPE_PATTERN)


def _scope_is_a_path(value: str, info: ValidationInfo) -> str:
    if not is_stored(info) and not _SCOPE.match(value):
        raise ValueError("scope must be a path like 'acme/product' with no empty segments")
    return value


# A record kind. Which kinds exist is the policy's to say, so a door that knows the policy
# declares them (the HTTP API's OpenAPI document turns this marker into an enum).
KIND_MARKER = "x-cairn-record-kind"
Kind = Annotated[
    str, TextLimit(MAX_KIND_CHARS, min_chars=1), Field(json_schema_extra={KIND_MARKER: True})
]
ScopePath = Annotated[
    str,
    TextLimit(MAX_SCOPE_CHARS, min_chars=1),
    AfterValidator(_scope_is_a_path),
    Field(examples=["acme/product"], json_schema_extra={"pattern": SCOPE_PATTERN}),
]
Title = Annotated[str, TextLimit(MAX_TITLE_CHARS, not_blank=True)]
Body = Annotated[str, TextLimit(MAX_BODY_CHARS)]
ContextText = Annotated[str, TextLimit(MAX_CONTEXT_CHARS)]


def _key_sorted(value: Any) -> Any:
    """``value`` with the keys of every object in it in sorted order."""
    if isinstance(value, dict):
        return {key: _key_sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_key_sorted(item) for item in value]
    return value


def _sorted_metadata(value: JsonDict) -> JsonDict:
    return _key_sorted(value) if value else value  # most are empty


# Plain JSON within the metadata limits (depth, keys, sizes): see ``cairn.limits``. Written
# out with its keys sorted, however it was built: the same metadata has one spelling, which
# a store's JSON comparisons (a filter on a nested value) rely on.
Metadata = Annotated[JsonDict, JsonLimit(), PlainSerializer(_sorted_metadata)]


class Content(CairnModel):
    """The versioned part of a record: everything a version snapshots."""

    kind: Kind
    scope: ScopePath
    title: Title
    body: Body = ""
    tags: Names = ()
    metadata: Metadata = Field(default_factory=dict)
    acl: Acl = Field(default_factory=Acl)
    origin: Origin = Origin.AGENT
    confidence: Confidence = Confidence.INFERRED
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    # Text that helps find this record without being part of it, such as the turns around
    # a conversation turn. It is indexed for search, never shown, cited or hashed.
    context: Annotated[tuple[ContextText, ...], Field(max_length=MAX_CONTEXT_ITEMS)] = ()

    @model_validator(mode="after")
    def _validity_ordered(self) -> Content:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be after valid_from")
        return self

    def content_hash(self) -> str:
        return content_hash(self.kind, self.title, self.body)


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@functools.lru_cache(maxsize=4096)  # a batch asks for each new record's hash more than once
def content_hash(kind: str, title: str, body: str) -> str:
    """Hash of what a reader would call "the same memory": kind, title and body, whitespace
    and case folded, so trivially re-typed duplicates are caught."""
    digest = hashlib.sha256()
    for part in (kind, _normalise(title), _normalise(body)):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class ContentPatch(CairnModel):
    """A partial update: fields left ``None`` keep the current version's value."""

    title: Title | None = None
    body: Body | None = None
    tags: Names | None = None
    metadata: Metadata | None = None
    acl: Acl | None = None
    confidence: Confidence | None = None
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    provenance: Provenance | None = None
    # Set by cairn from who proposes the edit (the new version is theirs); a value a caller
    # gives is replaced, like a new record's origin.
    origin: Origin | None = None

    def apply(self, base: Content) -> Content:
        changes = self.model_dump(exclude_none=True)
        merged = base.model_dump() | changes
        return Content.model_validate(merged)

    def is_empty(self) -> bool:
        """True when the patch changes no field a caller chooses (``origin`` is cairn's)."""
        return not self.model_dump(exclude_none=True, exclude={"origin"})


class Version(CairnModel):
    """One version of a record: its content as of that version, never changed afterwards. Cite it
    as ``(record_id, number)``."""

    id: str
    record_id: str
    number: int
    content: Content
    content_hash: str
    created_at: datetime
    created_by: str
    proposal_id: str | None = None


class Record(CairnModel):
    """A record with its current (head) version's content."""

    id: str
    kind: str
    scope: str
    status: Status
    current_version_id: str
    current_version: int
    superseded_by: str | None = None
    created_at: datetime
    updated_at: datetime
    status_changed_at: datetime
    created_by: str
    content: Content


class PathLink(CairnModel):
    """A record's tie to a repository file, with the content hash seen when it was linked."""

    record_id: str
    path: str
    content_hash: str | None
    drifted: bool = False


# The characters that make a scope a glob rather than one scope.
_GLOB_CHARS = frozenset("*?[")


class Principal(CairnModel):
    """Who asks. ``scopes`` are globs; none given means no scope at all (fail closed):
    every scope is written out as ``"*"``. ``default_scope`` is where a write that names
    no scope goes (see ``home_scope``); it must lie within ``scopes``."""

    id: str
    kind: PrincipalKind = PrincipalKind.AGENT
    roles: tuple[str, ...] = (Role.AGENT.value,)
    scopes: tuple[str, ...] = ()
    labels: tuple[str, ...] = ("public", "internal")
    sensitivity: Sensitivity = Sensitivity.LOW
    purpose: str | None = None
    default_scope: ScopePath | None = None

    @model_validator(mode="after")
    def _default_scope_is_ours(self) -> Principal:
        # A principal with no scopes reaches nothing whatever its default says (fail closed);
        # refusing to load it would take every other principal of the file down with it.
        if (
            self.default_scope is not None
            and self.scopes
            and not any(fnmatch.fnmatchcase(self.default_scope, glob) for glob in self.scopes)
        ):
            raise ValueError(
                f"default_scope {self.default_scope!r} is outside the principal's scopes"
            )
        return self

    def home_scope(self) -> str | None:
        """Where a write that names no scope goes: ``default_scope`` when set, else the
        first of ``scopes`` that is one scope rather than a glob, else none (the writer must
        name one: nothing is invented)."""
        if self.default_scope is not None:
            return self.default_scope
        return next((s for s in self.scopes if not _GLOB_CHARS & set(s)), None)

    def has_role(self, role: Role) -> bool:
        return role.value in self.roles

    def can_curate(self) -> bool:
        return self.has_role(Role.CURATOR) or self.has_role(Role.ADMIN)


SYSTEM_PRINCIPAL = Principal(
    id="system",
    kind=PrincipalKind.SYSTEM,
    roles=(Role.ADMIN.value, Role.CURATOR.value),
    scopes=("*",),
    labels=("*",),
    sensitivity=Sensitivity.HIGH,
)


# ---- proposals ---------------------------------------------------------------------------


# ---- edges: typed, permissioned links between records ---------------------------------

# Relation names are upper snake case (CAUSAL_PRECEDES, ALIAS_OF): one spelling everywhere.
RELATION_PATTERN = r"^[A-Z][A-Z0-9_]{0,63}$"
RelationName = Annotated[str, Field(pattern=RELATION_PATTERN, examples=["DEPENDS_ON"])]

# The kernel's own bookkeeping links, in the same model as the links people propose. No one
# proposes or removes them: the gate writes them as a side effect of what it records.
SYSTEM_RELATIONS: tuple[str, ...] = ("SUPERSEDES", "ACCEPTED_AS", "REBASED_TO")


class EdgeStatus(StrEnum):
    ACTIVE = "active"
    REMOVED = "removed"


class EdgeDraft(CairnModel):
    """A link a caller proposes from record ``src`` to record ``dst``. Without ``acl`` the
    edge is read under the source record's ACL; choosing another one needs a curator."""

    type: RelationName
    src: Id
    dst: Id
    metadata: Metadata = Field(default_factory=dict)
    acl: Acl | None = None
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    # Stamped by the kernel from who proposes (a caller's own value is replaced).
    origin: Origin = Origin.AGENT

    @model_validator(mode="after")
    def _validity_ordered(self) -> EdgeDraft:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be after valid_from")
        return self


class Edge(CairnModel):
    """A typed link. It lives in the scope of its source and is read under its own ACL; a
    walk over the graph also needs the reader to see the vertex at the other end. Removing
    an edge (unlink) marks it removed; the row and its audit trail stay."""

    id: str
    type: str
    src: str
    dst: str
    scope: str
    acl: Acl
    metadata: Metadata = Field(default_factory=dict)
    valid_from: Timestamp | None = None
    valid_to: Timestamp | None = None
    origin: Origin
    status: EdgeStatus = EdgeStatus.ACTIVE
    created_at: Timestamp
    created_by: str
    proposal_id: str | None = None
    removed_at: Timestamp | None = None
    removed_by: str | None = None


class Direction(StrEnum):
    OUT = "out"
    IN = "in"
    BOTH = "both"


class Neighbour(CairnModel):
    """A record reached by a walk, at the fewest hops it was reached in."""

    record_id: str
    hops: int


class Neighbourhood(CairnModel):
    """What a walk reached and the edges it took. ``withheld`` counts, by reason, the edges
    a walk met but did not take because the reader may not see the edge (``edges``) or the
    record at its far end (``vertices``): counts and reasons only, never an id."""

    anchors: tuple[str, ...]
    nodes: tuple[Neighbour, ...]
    edges: tuple[Edge, ...]
    withheld: dict[str, int] = Field(default_factory=dict)
    # More records were reachable than the walk's limit: the nearest ones were kept.
    truncated: bool = False


class CreateChange(CairnModel):
    op: Literal["create"] = "create"
    content: Content
    draft: bool = False
    paths: RepoPaths = ()


class UpdateChange(CairnModel):
    op: Literal["update"] = "update"
    record_id: str
    patch: ContentPatch


class SupersedeChange(CairnModel):
    """Supersede ``record_id`` by an existing record, or by a new one built from ``content``."""

    op: Literal["supersede"] = "supersede"
    record_id: str
    by: str | None = None
    content: Content | None = None

    _one_replacement = exactly_one_of(
        "by", "content", "supersede needs exactly one of 'by' (a record id) or 'content'"
    )


class TransitionChange(CairnModel):
    """A lifecycle move: approve a draft, re-approve a stale record, archive, restore, …"""

    op: Literal["transition"] = "transition"
    record_id: str
    to: Status


class PublishChange(CairnModel):
    """Promote record versions into a new baseline and point the scope's published at it.

    ``pins`` maps record id → version id; ``None`` for a version id means "its head".
    Records of the previous published baseline are carried over unless ``replace``.
    """

    op: Literal["publish"] = "publish"
    scope: str
    pins: dict[str, str | None] = Field(default_factory=dict)
    name: str | None = None
    replace: bool = False


class LinkChange(CairnModel):
    """Add a typed edge between two records."""

    op: Literal["link"] = "link"
    edge: EdgeDraft


class UnlinkChange(CairnModel):
    """Remove an edge (it is marked removed, never deleted)."""

    op: Literal["unlink"] = "unlink"
    edge_id: Id


Change = Annotated[
    CreateChange
    | UpdateChange
    | SupersedeChange
    | TransitionChange
    | PublishChange
    | LinkChange
    | UnlinkChange,
    Field(discriminator="op"),
]


class ProposalStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    REBASED = "rebased"


class Proposal(CairnModel):
    """A change someone asked for (create, update, archive …), pinned to the version it was made
    against, with what the policy or a curator decided."""

    id: str
    change: Change
    scope: str
    record_id: str | None
    base_version_id: str | None
    base_baseline_id: str | None = None
    principal_id: str
    principal_roles: tuple[str, ...]
    status: ProposalStatus
    created_at: datetime
    reason: str | None = None
    rule: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    rebased_from: str | None = None
    rebased_to: str | None = None
    result_record_id: str | None = None
    result_version_id: str | None = None


class AuditEntry(CairnModel):
    seq: int | None = None
    id: str
    at: datetime
    actor: str
    actor_roles: tuple[str, ...]
    action: str
    subject_id: str | None
    proposal_id: str | None = None
    rule: str | None = None
    reason: str | None = None
    from_status: str | None = None
    to_status: str | None = None
    details: JsonDict = Field(default_factory=dict)


class Baseline(CairnModel):
    id: str
    scope: str
    name: str | None
    pins: dict[str, str]
    created_at: datetime
    created_by: str
    proposal_id: str | None = None


class PinKind(StrEnum):
    """Which version a read pins: the head, the published one, a baseline's, or one by id."""

    PUBLISHED = "published"
    BASELINE_REF = "baseline_ref"
    HEAD = "head"
    VERSION_REF = "version_ref"


class VersionPin(CairnModel):
    """Which version of each record a read returns: the head, the published one, the one a
    baseline pinned, or one version by id. (Not "selector": the decision graph's pipeline
    has a selector stage of its own.)"""

    kind: PinKind = PinKind.HEAD
    baseline_id: str | None = None
    version_id: str | None = None

    @model_validator(mode="after")
    def _refs_present(self) -> VersionPin:
        if self.kind is PinKind.BASELINE_REF and not self.baseline_id:
            raise ValueError("selector baseline_ref needs baseline_id")
        if self.kind is PinKind.VERSION_REF and not self.version_id:
            raise ValueError("selector version_ref needs version_id")
        return self

    @classmethod
    def head(cls) -> VersionPin:
        return cls(kind=PinKind.HEAD)

    @classmethod
    def published(cls) -> VersionPin:
        return cls(kind=PinKind.PUBLISHED)


class RecordView(CairnModel):
    """One record as a selector sees it: its state, the chosen version, and how it was chosen
    (what ``get`` returns; cite it as ``(record.id, version.number)``)."""

    record: Record
    version: Version
    selector_used: VersionPin
    resolved_id: str


class Verdict(StrEnum):
    """What the policy made of a proposal. (Not "decision", which is a record kind.)"""

    APPROVE = "approve"
    QUEUE = "queue"
    REJECT = "reject"


class ProposalOutcome(CairnModel):
    """What the gate did with a proposal, with enough for the caller to act next."""

    proposal: Proposal
    decision: Verdict
    record: Record | None = None
    version: Version | None = None
    edge: Edge | None = None
    feedback: str | None = None


class RecordQuery(CairnModel):
    """Which records to list: by kind, status, scope glob, creation time and metadata, a page at a
    time."""

    kinds: Annotated[tuple[Kind, ...], Field(max_length=MAX_LIST_ITEMS)] = ()
    statuses: tuple[Status, ...] = ()
    scope: Name | None = None  # glob
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    metadata: Metadata = Field(default_factory=dict)
    limit: int = Field(default=100, ge=1, le=10_000)
    offset: int = Field(default=0, ge=0, le=MAX_COUNTER)
    # Keyset paging: only records whose id sorts after this one (the last id of a page).
    after: Id | None = None


class ProposalFilter(CairnModel):
    """Narrows the review queue; every field left out matches everything. ``kind`` is the
    record kind a proposal concerns (its new content's, or its target record's)."""

    op: Name | None = None
    kind: Kind | None = None
    scope: Name | None = None  # glob
    author: Name | None = None
    rule: Name | None = None
    created_before: Timestamp | None = None  # older than this


class AuditQuery(CairnModel):
    """Which audit entries to list: by actor, action, subject, proposal and time, a page
    at a time."""

    actor: Name | None = None
    action: Name | None = None
    subject_id: Name | None = None
    proposal_id: Name | None = None
    rule: Name | None = None
    since: Timestamp | None = None
    until: Timestamp | None = None
    limit: int = Field(default=100, ge=1, le=100_000)
    # Keyset paging: only entries after this sequence number (the last seq of a page).
    after_seq: int | None = Field(default=None, ge=0, le=MAX_COUNTER)


# ---- events: the append-only log of what agents and people said and did ----------------


class EventRole(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


# Event kinds are open (session_start, user_message, tool_call, compaction, note, …) but
# spelt one way: lower snake case.
EventKind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$", examples=["user_message"])]


class EventDraft(CairnModel):
    """An event as its producer sends it. ``event_id`` is the producer's: sending the same
    event twice stores it once, and the same id with other content is refused."""

    event_id: Id
    ts: Timestamp
    session_id: Name
    scope: ScopePath
    agent: Name | None = None
    role: EventRole
    kind: EventKind
    text: Body = ""
    metadata: Metadata = Field(default_factory=dict)

    def digest(self) -> str:
        """What makes two sendings of ``event_id`` the same event: the producer's fields
        (never what the kernel stamped)."""
        payload = self.model_dump(mode="json", include=set(EventDraft.model_fields))
        return hashlib.sha256(
            json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()


class Event(EventDraft):
    """A stored event: the producer's fields, and what the kernel stamps (who may read it,
    who appended it, when, and its place in the log). Events are never edited; corrections
    are new events."""

    acl: Acl
    appended_at: Timestamp
    appended_by: str
    seq: int | None = None


# A position in the event log's source-time order: ``(ts, event_id)`` within one scope,
# ``(ts, event_id, scope)`` across scopes (the same id may stand at the same time in two).
EventCursor = tuple[datetime, str] | tuple[datetime, str, str]


def event_cursor(
    ts: datetime | None, event_id: str | None, scope: str | None = None
) -> EventCursor | None:
    """The cursor after a page's last event, from its ``ts`` and ``event_id`` and, when
    given, its scope; None without both the ts and the id (the first page)."""
    if ts is None or event_id is None:
        return None
    return (ts, event_id) if scope is None else (ts, event_id, scope)


class AppendReport(CairnModel):
    """What an append did: the ids it stored, and those it had already (sent again)."""

    stored: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()


# ---- the timeline: a time hierarchy over events ------------------------------------------


class TocLevel(StrEnum):
    YEAR = "year"
    MONTH = "month"
    WEEK = "week"
    DAY = "day"
    SEGMENT = "segment"


class Grip(CairnModel):
    """Evidence for a bullet: an excerpt of one event's text and the range of events the
    bullet stands for (``event_id_start`` to ``event_id_end`` in source-time order, within one
    scope). ``event_id`` is the event whose text holds the excerpt; ``ts`` its time."""

    grip_id: str
    excerpt: str
    event_id_start: str
    event_id_end: str
    event_id: str
    ts: Timestamp
    source: str


class Bullet(CairnModel):
    """One line of a node's summary, with the grips that support it (at least one)."""

    text: str
    grip_ids: tuple[str, ...]


class TocNode(CairnModel):
    """One node of the timeline at one version. A node changes only by getting a new
    version; ``retired`` marks a segment that later events merged into another.

    ``starts_at``/``ends_at`` are the node's span (a calendar period for year to day, the
    first and last event for a segment); ``children`` are the ids of the nodes one level
    down, in time order."""

    node_id: str
    version: int
    level: TocLevel
    key: str
    scope: str
    acl: Acl
    agent: str | None = None
    parent_id: str | None = None
    starts_at: Timestamp
    ends_at: Timestamp
    first_ts: Timestamp | None = None
    last_ts: Timestamp | None = None
    event_count: int = 0
    title: str
    bullets: tuple[Bullet, ...] = ()
    keywords: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    grips: tuple[Grip, ...] = ()
    sessions: tuple[str, ...] = ()
    summarizer: str = "extractive"
    retired: bool = False
    built_at: Timestamp

    def digest(self) -> str:
        """What makes two builds of a node the same: everything but its version and when it
        was built."""
        payload = self.model_dump(mode="json", exclude={"version", "built_at"})
        return hashlib.sha256(
            json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
