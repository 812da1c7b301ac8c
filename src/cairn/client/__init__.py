"""The Python API: one set of methods over a local store or a server.

``cairn.open(folder)`` gives a ``LocalMemory`` (``cairn.client.local``: the kernel in this
process) and ``cairn.connect(url, key)`` a ``RemoteMemory`` (``cairn.client.remote``: the
HTTP API through httpx). Both satisfy ``MemoryClient``: the same method names, parameters
and return types, the same errors, so code written against one runs against the other.

Why a client *bound to one caller* rather than ``Memory`` itself: every ``Memory`` verb takes
the ``principal=`` it acts for, because the kernel serves many callers at once (a server
holds one ``Memory`` for every key). A remote caller has no principal to pass: the server
knows it by its key. So both clients are opened with a key and act for its principal; the
local one keeps the ``Memory`` it wraps as ``.memory`` for what only the kernel offers.

This module holds ``MemoryClient``, the base class both derive from: every public method,
written once with the few rules both clients keep (which version ``get`` reads, what
``supersede`` takes, the passport ``why`` sends), so that the two refuse the same calls the
same way; each client adds only where a call goes. It imports no kernel and no HTTP library.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack

from cairn.closing import Closing
from cairn.errors import InvalidInput, PermissionDenied
from cairn.limits import check_timeline_k
from cairn.model import (
    AppendReport,
    AuditEntry,
    AuditQuery,
    Content,
    ContentPatch,
    Event,
    EventDraft,
    Principal,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    Record,
    RecordQuery,
    RecordView,
    Version,
    VersionPin,
    new_id,
)
from cairn.options import (
    DEFAULT_MODE,
    EventFilters,
    PublishChoice,
    ReadFilters,
    TimelineFilters,
    check_names,
)
from cairn.retrieval.context import ReadContextRequest, ReadContextResponse, ValidationReport
from cairn.retrieval.types import RetrievalResult, SearchResult
from cairn.retrieval.weights import check_weights
from cairn.timeline.views import TimelineHits

if TYPE_CHECKING:  # the graph's request model pulls in the graph package: typing only
    from cairn.graph.why import WhyRequest

__all__ = [
    "ENV_KEY",
    "EventFilters",
    "MemoryClient",
    "Move",
    "PublishChoice",
    "ReadFilters",
    "ReadOptions",
    "TimelineFilters",
    "WhyMode",
    "check_get",
    "check_read_filters",
    "check_supersede",
    "check_validate",
    "check_why_mode",
    "passport_headers",
]

# Where ``cairn.open`` (and the CLI) look for a key when none is given.
ENV_KEY = "CAIRN_API_KEY"

WhyMode = Literal["ask", "query"]

# the two moves of a record's lifecycle a client asks for by name
Move = Literal["archive", "restore"]


class MemoryClient(Closing):
    """What ``cairn.open`` and ``cairn.connect`` return: governed memory, acting for the
    principal of one key. Writes are proposals that the policy or a curator decides; reads
    are trimmed to what the principal may see and cite ``(record, version)``. Errors are
    ``cairn.CairnError`` subclasses (``NotFound``, ``PermissionDenied``, …) on both.

    Close it when done (``close()``, or use it in a ``with`` block).

    The public methods are written here once, with the rules both clients keep (so that the
    two refuse the same calls the same way); each client carries a call to where it goes
    (the kernel in this process, or the HTTP API) in the ``_``-named methods below them."""

    # set by each client when it is made: the key's principal
    _principal: Principal

    @property
    def principal(self) -> Principal:
        """Who this client acts for: the key's principal, with its roles, scopes and labels."""
        return self._principal

    # ---- writes ------------------------------------------------------------------------

    def remember(
        self,
        content: Content,
        *,
        draft: bool = False,
        paths: Sequence[str] = (),
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Propose a new record (``draft=True``: keep it as a draft, which anyone may).
        ``outcome.decision`` says what the policy did: approve (``outcome.record`` is
        written), queue (a curator decides) or reject."""
        return self._remember(content, draft=draft, paths=paths, reason=reason)

    def update(
        self,
        record_id: str,
        patch: ContentPatch,
        *,
        base_version_id: str | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Propose changing the fields ``patch`` sets. Pin ``base_version_id`` (the version
        you read) to be refused with ``StaleProposal`` if someone changed it since."""
        return self._update(record_id, patch, base_version_id, reason)

    def supersede(
        self,
        record_id: str,
        *,
        by: str | None = None,
        content: Content | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        """Propose replacing a record: ``by`` an existing record, or by new ``content``
        (exactly one of the two)."""
        check_supersede(by, content)
        return self._supersede(record_id, by=by, content=content, reason=reason)

    def archive(self, record_id: str, *, reason: str | None = None) -> ProposalOutcome:
        """Propose archiving a record (curators)."""
        return self._move(record_id, "archive", reason)

    def restore(self, record_id: str, *, reason: str | None = None) -> ProposalOutcome:
        """Propose restoring an archived record (curators)."""
        return self._move(record_id, "restore", reason)

    # ---- reads -------------------------------------------------------------------------

    def get(
        self, record_id: str, *, version: int | None = None, selector: VersionPin | None = None
    ) -> RecordView:
        """One record at a version: the head by default, a version ``number``, or what a
        ``selector`` pins (published, a baseline's, one by id); not both."""
        check_get(version, selector)
        return self._get(record_id, version, selector)

    def resolve(self, record_id: str) -> Record:
        """Follow the supersession chain to its end (A→B→C resolves to C)."""
        return self._resolve(record_id)

    def history(self, record_id: str, *, after: int = 0, limit: int = 1000) -> list[Version]:
        """A record's versions the principal may read, oldest first (``after``: the last
        version number seen)."""
        return self._history(record_id, after=after, limit=limit)

    def list_records(self, query: RecordQuery | None = None) -> list[Record]:
        """A page of records the principal may read (by kind, status, scope glob, time;
        ``query.after`` pages on)."""
        return self._list_records(query or RecordQuery())

    def search(self, query: str, **filters: Unpack[ReadFilters]) -> SearchResult:
        """Ranked search, trimmed by permission: ``k`` hits, each citing its version. The
        filters (``mode``, ``k``, ``scope``, …) are ``ReadFilters``'."""
        check_read_filters(filters)
        return self._search(query, filters)

    def retrieve(
        self, query: str, *, max_tokens: int = 8000, **filters: Unpack[ReadFilters]
    ) -> RetrievalResult:
        """Validated retrieval within ``max_tokens``: items with citations, contradictions
        flagged (what an agent reads before it works). Filtered as ``search`` is."""
        check_read_filters(filters)
        return self._retrieve(query, max_tokens, filters)

    def read_context(self, request: ReadContextRequest) -> ReadContextResponse:
        """Version-pinned context for one scope: ranked by ``request.query``, or the record
        ``request.record_id``."""
        return self._read_context(request)

    def validate(self, record_ids: Sequence[str]) -> ValidationReport:
        """May these cited records still be relied on (present, current, valid, active)?"""
        check_validate(record_ids)
        return self._validate(record_ids)

    def status(self) -> dict[str, int]:
        """Counts of what the principal may see (a curator of every scope: the store's)."""
        return self._status()

    # ---- review --------------------------------------------------------------------------

    def proposals(
        self,
        *,
        status: ProposalStatus = ProposalStatus.PENDING,
        limit: int = 100,
        offset: int = 0,
        after: str | None = None,
    ) -> list[Proposal]:
        """The review queue: a curator sees its scopes' proposals, anyone else its own."""
        return self._proposals(status, limit=limit, offset=offset, after=after)

    def proposal(self, proposal_id: str) -> Proposal:
        """One proposal the principal may see."""
        return self._proposal(proposal_id)

    def decide(
        self, proposal_id: str, *, approve: bool, reason: str | None = None
    ) -> ProposalOutcome:
        """Approve or reject a queued proposal (curators)."""
        return self._decide(proposal_id, approve=approve, reason=reason)

    def approve(self, proposal_id: str, *, reason: str | None = None) -> ProposalOutcome:
        """``decide(proposal_id, approve=True)``."""
        return self.decide(proposal_id, approve=True, reason=reason)

    def reject(self, proposal_id: str, *, reason: str | None = None) -> ProposalOutcome:
        """``decide(proposal_id, approve=False)``."""
        return self.decide(proposal_id, approve=False, reason=reason)

    def rebase(self, proposal_id: str) -> ProposalOutcome:
        """Re-make a stale proposal against the record's current version."""
        return self._rebase(proposal_id)

    def publish(self, scope: str, **choice: Unpack[PublishChoice]) -> ProposalOutcome:
        """Publish a baseline of a scope (curators): every active record at its head, or
        the ``record_ids`` / ``pins`` given (``PublishChoice``)."""
        check_names(choice, PublishChoice.__optional_keys__)
        return self._publish(scope, choice)

    def audit(self, query: AuditQuery | None = None) -> list[AuditEntry]:
        """A page of the audit log (curators of every scope)."""
        return self._audit(query or AuditQuery())

    # ---- the timeline and the decision graph -----------------------------------------------

    def append_events(self, events: Sequence[EventDraft]) -> AppendReport:
        """Append conversation or tool events in one batch (sending one again is a no-op)."""
        return self._append_events(events)

    def events(self, **filters: Unpack[EventFilters]) -> list[Event]:
        """Events the principal may read, in time order, a page at a time (``after``: the
        ``(ts, event_id, scope)`` of the last one seen; ``EventFilters``)."""
        check_names(filters, EventFilters.__optional_keys__)
        return self._events(filters)

    def timeline_search(self, query: str, **filters: Unpack[TimelineFilters]) -> TimelineHits:
        """The timeline summaries and grips that best match ``query`` (``TimelineFilters``)."""
        check_names(filters, TimelineFilters.__optional_keys__)
        if "k" in filters:
            check_timeline_k(filters["k"])
        return self._timeline_search(query, filters)

    def why(
        self,
        request: WhyRequest,
        *,
        role: str | None = None,
        namespaces: Sequence[str] | None = None,
        mode: WhyMode = "ask",
    ) -> dict[str, Any]:
        """Why a decision came about, for the principal's graph role (or a lower ``role``),
        reading only the label ``namespaces`` given (default: the key's labels; a key
        holding every label, ``"*"``, must name them). ``mode="query"`` lets the server's
        LLM write the answer from the same evidence."""
        # one passport for both clients, built here: the HTTP door checks the remote one and
        # the kernel the local one, so a question is answered, or refused, alike on both
        check_why_mode(mode)
        roles = self._graph_roles()
        headers = passport_headers(self._principal, roles, role=role, namespaces=namespaces)
        return self._why(request, headers, mode)

    # ---- lifetime --------------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Release the store (local) or the connection pool (remote)."""

    # ---- where each client goes: the kernel in this process, or the HTTP API ---------------
    # (called with the public methods' arguments once the rules above have been kept)

    @abstractmethod
    def _remember(
        self, content: Content, *, draft: bool, paths: Sequence[str], reason: str | None
    ) -> ProposalOutcome: ...

    @abstractmethod
    def _update(
        self, record_id: str, patch: ContentPatch, base: str | None, reason: str | None
    ) -> ProposalOutcome: ...

    @abstractmethod
    def _supersede(
        self, record_id: str, *, by: str | None, content: Content | None, reason: str | None
    ) -> ProposalOutcome: ...

    @abstractmethod
    def _move(self, record_id: str, move: Move, reason: str | None) -> ProposalOutcome: ...

    @abstractmethod
    def _get(
        self, record_id: str, version: int | None, selector: VersionPin | None
    ) -> RecordView: ...

    @abstractmethod
    def _resolve(self, record_id: str) -> Record: ...

    @abstractmethod
    def _history(self, record_id: str, *, after: int, limit: int) -> list[Version]: ...

    @abstractmethod
    def _list_records(self, query: RecordQuery) -> list[Record]: ...

    @abstractmethod
    def _search(self, query: str, filters: ReadFilters) -> SearchResult: ...

    @abstractmethod
    def _retrieve(self, query: str, max_tokens: int, filters: ReadFilters) -> RetrievalResult: ...

    @abstractmethod
    def _read_context(self, request: ReadContextRequest) -> ReadContextResponse: ...

    @abstractmethod
    def _validate(self, record_ids: Sequence[str]) -> ValidationReport: ...

    @abstractmethod
    def _status(self) -> dict[str, int]: ...

    @abstractmethod
    def _proposals(
        self, status: ProposalStatus, *, limit: int, offset: int, after: str | None
    ) -> list[Proposal]: ...

    @abstractmethod
    def _proposal(self, proposal_id: str) -> Proposal: ...

    @abstractmethod
    def _decide(
        self, proposal_id: str, *, approve: bool, reason: str | None
    ) -> ProposalOutcome: ...

    @abstractmethod
    def _rebase(self, proposal_id: str) -> ProposalOutcome: ...

    @abstractmethod
    def _publish(self, scope: str, choice: PublishChoice) -> ProposalOutcome: ...

    @abstractmethod
    def _audit(self, query: AuditQuery) -> list[AuditEntry]: ...

    @abstractmethod
    def _append_events(self, events: Sequence[EventDraft]) -> AppendReport: ...

    @abstractmethod
    def _events(self, filters: EventFilters) -> list[Event]: ...

    @abstractmethod
    def _timeline_search(self, query: str, filters: TimelineFilters) -> TimelineHits: ...

    @abstractmethod
    def _graph_roles(self) -> list[dict[str, Any]]:
        """What ``graph_roles`` lists for the principal (the roles it may ask as)."""

    @abstractmethod
    def _why(self, request: WhyRequest, passport: dict[str, str], mode: WhyMode) -> dict[str, Any]:
        """The question asked with the passport's headers (see ``passport_headers``)."""


# ``search`` and ``retrieve`` took a ``ReadOptions`` before ``ReadFilters`` served every door
ReadOptions = ReadFilters


# ---- rules both clients share ------------------------------------------------------------


def check_get(version: int | None, selector: VersionPin | None) -> None:
    """``get`` reads one version: by number or by selector, not both."""
    if version is not None and selector is not None:
        raise InvalidInput("give a version number or a selector, not both", field="version")
    if version is not None and version < 1:
        raise InvalidInput("version numbers start at 1", field="version")


def check_supersede(by: str | None, content: Content | None) -> None:
    """``supersede`` replaces a record by an existing one or by new content: one of them."""
    if (by is None) == (content is None):
        raise InvalidInput("give exactly one of by (a record id) and content", field="by")


def check_validate(record_ids: Sequence[str]) -> None:
    """``validate`` checks at least one cited record."""
    if isinstance(record_ids, str):
        raise InvalidInput("give a list of record ids, not one string", field="record_ids")
    if not record_ids:
        raise InvalidInput("name at least one record to validate", field="record_ids")


def check_read_filters(filters: ReadFilters) -> None:
    """A ranked read's filters: only the names ``ReadFilters`` declares (``candidates`` is
    the kernel's alone), and weights that leave the mode a signal. The kernel checks the
    same; checked here too so that a remote call is refused as a local one is."""
    check_names(filters, ReadFilters.__optional_keys__)
    check_weights(filters.get("weights"), filters.get("mode", DEFAULT_MODE))


def check_why_mode(mode: str) -> None:
    if mode not in ("ask", "query"):
        raise InvalidInput(f"unknown mode {mode!r}: ask or query", field="mode")


def passport_headers(
    principal: Principal,
    roles: Sequence[Mapping[str, Any]],
    *,
    role: str | None,
    namespaces: Sequence[str] | None,
) -> dict[str, str]:
    """The policy passport a graph question goes with, as the HTTP door's headers.

    ``roles`` is what ``graph_roles`` lists for the principal (the roles it may ask as, with
    their policy keys). The HTTP door demands a passport that names the role, the label
    namespaces read, the policy in force and request ids; the local client builds the same
    one and has the kernel check it, so a question is answered or refused alike on both.
    A passport cannot name ``"*"``: a key holding every label must name the namespaces.
    """
    by_name = {str(entry["role"]): entry for entry in roles}
    if role is None:
        own = [entry for entry in roles if entry["role"] in principal.roles]
        if not own:
            raise PermissionDenied(
                f"{principal.id} holds no graph role; give its key one to ask the decision graph",
                field="role",
            )
        chosen = max(own, key=lambda entry: int(entry["rank"]))
    elif role in by_name:
        chosen = by_name[role]
    else:
        raise PermissionDenied(f"{principal.id} may not ask as {role}", field="role")
    if namespaces is None:
        if "*" in principal.labels:
            raise InvalidInput(
                "this key holds every label ('*'): name the label namespaces to read, "
                "e.g. namespaces=['public', 'internal']",
                field="namespaces",
            )
        namespaces = principal.labels
    if not namespaces:
        raise InvalidInput("name at least one label namespace", field="namespaces")
    request_id = new_id("req")
    return {
        "X-User-Id": principal.id,
        "X-User-Roles": str(chosen["role"]),
        "X-User-Namespaces": ",".join(namespaces),
        "X-Policy-Version": str(chosen["policy_version"]),
        "X-Policy-Key": str(chosen["policy_key"]),
        "X-Request-Id": request_id,
        "X-Trace-Id": request_id,
    }
