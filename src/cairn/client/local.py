"""``cairn.open``: a local store, through a ``Memory`` in this process, acting for one key.

``LocalMemory`` is a thin wrapper: each method calls the ``Memory`` verb of the same name
with the key's principal, so everything the kernel rules (proposals, the policy, permission
trimming, citations) holds exactly as on every other door. The key is checked once, when the
store is opened; it is not kept. (Unlike a server, a process that can open the store's files
is not kept out by a key: here the key says *who* acts, which the policy and the audit log
go by.)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from cairn.client import (
    ENV_KEY,
    MemoryClient,
    WhyMode,
    check_get,
    check_supersede,
    check_timeline_k,
    check_validate,
    check_weights,
    check_why_mode,
    passport_headers,
)
from cairn.config import load_settings
from cairn.errors import InvalidInput, NotFound, Unauthenticated
from cairn.graph.passport import parse_passport
from cairn.memory import Memory
from cairn.model import (
    AppendReport,
    AuditEntry,
    AuditQuery,
    Content,
    ContentPatch,
    Event,
    EventCursor,
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
)
from cairn.retrieval.context import ReadContextRequest, ReadContextResponse, ValidationReport
from cairn.retrieval.types import Mode, RetrievalResult, SearchResult
from cairn.timeline.views import TeleportHit
from cairn.workspace import Workspace

if TYPE_CHECKING:
    from cairn.graph.why import WhyRequest

__all__ = ["LocalMemory", "open"]

# Addresses ``open`` takes as a database rather than a folder.
_DB_SCHEMES = ("postgresql", "postgres", "sqlite")


def open(
    path_or_url: str | os.PathLike[str] = ".cairn",
    *,
    key: str | None = None,
    db: str | None = None,
    embedder: str | None = None,
) -> LocalMemory:
    """Open a local cairn store for the principal of ``key``.

    ``path_or_url`` is the store folder ``cairn init`` made (default ``.cairn``), or a
    database URL (``postgresql://…``, ``sqlite:///…``), whose policy and principals are then
    read from the store folder the settings name (``CAIRN_STORE``, default ``.cairn``).
    ``db`` is the database of a folder given by path (default: ``CAIRN_DB`` or the folder's
    ``config.toml``, else the folder's own SQLite file). Without ``key``, ``CAIRN_API_KEY`` is
    read; with
    neither, or with a key the store does not know, ``Unauthenticated`` is raised (cairn fails
    closed). ``embedder`` is the vector model (default: ``CAIRN_EMBEDDER``, the store's
    ``config.toml``, else ``minilm``). As under ``cairn serve``, vectors are made and new
    events rolled up into the timeline by background threads: a read never waits for them,
    and a record is found by its words at once. Clients opened on one store share one
    kernel and its threads; closing the last of them closes it.

    For a server, use ``cairn.connect(url, key)``: it returns a client with the same methods.
    """
    if key is None:
        key = os.environ.get(ENV_KEY)
    if not key:
        raise Unauthenticated(f"no API key: pass key=... or set {ENV_KEY}", field="key")
    target = os.fspath(path_or_url)
    folder: Path | None = Path(target)
    scheme = target.partition("://")[0].lower() if "://" in target else None
    if scheme in ("http", "https"):
        raise InvalidInput(
            f"{target} is a server: use cairn.connect(url, key) for it", field="path_or_url"
        )
    if scheme is not None:
        if scheme not in _DB_SCHEMES:
            raise InvalidInput(
                f"cannot open {scheme}:// addresses: give a folder, postgresql://… or sqlite:///…",
                field="path_or_url",
            )
        if db is not None:
            raise InvalidInput("give the database once: as path_or_url or as db", field="db")
        folder, db = None, target
    settings = load_settings(store=folder, db=db)
    workspace = Workspace(settings.store, db=settings.db)
    if not workspace.exists():
        raise NotFound(f"no cairn store in {settings.store}: run 'cairn init' first", field="store")
    principal = workspace.authenticate(key)
    memory, release = _share(workspace, embedder or settings.embedder)
    client = LocalMemory(memory, principal)
    client._release = release
    return client


@dataclass
class _Shared:
    memory: Memory
    clients: int = 0


# One kernel per store in a process, shared by every client opened on it (as a server holds
# one Memory for all its keys): one connection pool, one index worker, one timeline worker,
# instead of one of each per key racing the others.
_open_stores: dict[tuple[Path, str | None, str], _Shared] = {}
_open_lock = threading.Lock()


def _share(workspace: Workspace, embedder: str) -> tuple[Memory, Callable[[], None]]:
    """The store's shared ``Memory`` (opened, with its background workers, on first use) and
    the function that lets go of it; the last to let go closes it."""
    key = (workspace.folder.resolve(), workspace.db, embedder)
    with _open_lock:
        found = _open_stores.get(key)
        if found is None:
            memory = workspace.open_memory(embedder=embedder)
            try:
                # as `cairn serve` does: vectors are made, and the timeline rolled up, in the
                # background
                memory.start_indexing()
                memory.start_timeline()
            except BaseException:
                memory.close()
                raise
            found = _open_stores[key] = _Shared(memory)
        found.clients += 1
    shared = found

    def release() -> None:
        with _open_lock:
            shared.clients -= 1
            if shared.clients > 0:
                return
            if _open_stores.get(key) is shared:
                del _open_stores[key]
        shared.memory.close()

    return shared.memory, release


class LocalMemory:
    """A ``cairn.MemoryClient`` over a ``Memory`` in this process, acting for one principal.

    ``cairn.open`` makes one. Clients opened on one store in a process share one ``Memory``
    (as a server shares one among its keys), closed when the last of them is. Wrap a
    ``Memory`` you opened yourself as ``LocalMemory(memory, principal)`` to act for a
    principal on it; ``close`` then leaves the ``Memory`` open. ``.memory`` is the kernel,
    for what only it offers (ingest, edges, rollups, …: every verb there takes
    ``principal=``)."""

    def __init__(self, memory: Memory, principal: Principal) -> None:
        self.memory = memory
        self._principal = principal
        # set by ``open``: lets go of the shared Memory (once)
        self._release: Callable[[], None] | None = None

    def __repr__(self) -> str:
        where = self.memory.folder or self.memory.root
        return f"<LocalMemory {where} as {self._principal.id}>"

    @property
    def principal(self) -> Principal:
        """Who this client acts for: the key's principal."""
        return self._principal

    # ---- writes --------------------------------------------------------------------------

    def remember(
        self,
        content: Content,
        *,
        draft: bool = False,
        paths: Sequence[str] = (),
        reason: str | None = None,
    ) -> ProposalOutcome:
        return self.memory.remember(
            content, principal=self._principal, draft=draft, paths=paths, reason=reason
        )

    def update(
        self,
        record_id: str,
        patch: ContentPatch,
        *,
        base_version_id: str | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        return self.memory.update(
            record_id,
            patch,
            principal=self._principal,
            base_version_id=base_version_id,
            reason=reason,
        )

    def supersede(
        self,
        record_id: str,
        *,
        by: str | None = None,
        content: Content | None = None,
        reason: str | None = None,
    ) -> ProposalOutcome:
        check_supersede(by, content)
        return self.memory.supersede(
            record_id, principal=self._principal, by=by, content=content, reason=reason
        )

    def archive(self, record_id: str, *, reason: str | None = None) -> ProposalOutcome:
        return self.memory.archive(record_id, principal=self._principal, reason=reason)

    def restore(self, record_id: str, *, reason: str | None = None) -> ProposalOutcome:
        return self.memory.restore(record_id, principal=self._principal, reason=reason)

    # ---- reads ---------------------------------------------------------------------------

    def get(
        self, record_id: str, *, version: int | None = None, selector: VersionPin | None = None
    ) -> RecordView:
        check_get(version, selector)
        return self.memory.get(
            record_id, principal=self._principal, selector=selector, version=version
        )

    def resolve(self, record_id: str) -> Record:
        return self.memory.resolve(record_id, principal=self._principal)

    def history(self, record_id: str, *, after: int = 0, limit: int = 1000) -> list[Version]:
        return self.memory.history(record_id, principal=self._principal, after=after, limit=limit)

    def list_records(self, query: RecordQuery | None = None) -> list[Record]:
        return self.memory.list_records(query or RecordQuery(), principal=self._principal)

    def search(
        self,
        query: str,
        *,
        mode: Mode = "hybrid",
        k: int = 10,
        scope: str | None = None,
        selector: VersionPin | None = None,
        kinds: Sequence[str] = (),
        include_drafts: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        record_ids: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> SearchResult:
        check_weights(weights)
        return self.memory.search(
            query,
            principal=self._principal,
            mode=mode,
            k=k,
            scope=scope,
            selector=selector,
            kinds=kinds,
            include_drafts=include_drafts,
            created_after=created_after,
            created_before=created_before,
            record_ids=record_ids,
            weights=weights,
        )

    def retrieve(
        self,
        query: str,
        *,
        max_tokens: int = 8000,
        mode: Mode = "hybrid",
        k: int = 10,
        scope: str | None = None,
        selector: VersionPin | None = None,
        kinds: Sequence[str] = (),
        include_drafts: bool = False,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        record_ids: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> RetrievalResult:
        check_weights(weights)
        return self.memory.retrieve(
            query,
            principal=self._principal,
            max_tokens=max_tokens,
            mode=mode,
            k=k,
            scope=scope,
            selector=selector,
            kinds=kinds,
            include_drafts=include_drafts,
            created_after=created_after,
            created_before=created_before,
            record_ids=record_ids,
            weights=weights,
        )

    def read_context(self, request: ReadContextRequest) -> ReadContextResponse:
        return self.memory.read_context(request, principal=self._principal)

    def validate(self, record_ids: Sequence[str]) -> ValidationReport:
        check_validate(record_ids)
        return self.memory.validate(record_ids, principal=self._principal)

    def status(self) -> dict[str, int]:
        return self.memory.status(principal=self._principal)

    # ---- review --------------------------------------------------------------------------

    def proposals(
        self,
        *,
        status: ProposalStatus = ProposalStatus.PENDING,
        limit: int = 100,
        offset: int = 0,
        after: str | None = None,
    ) -> list[Proposal]:
        return self.memory.proposals(
            principal=self._principal, status=status, limit=limit, offset=offset, after=after
        )

    def proposal(self, proposal_id: str) -> Proposal:
        return self.memory.proposal(proposal_id, principal=self._principal)

    def decide(
        self, proposal_id: str, *, approve: bool, reason: str | None = None
    ) -> ProposalOutcome:
        return self.memory.decide(
            proposal_id, approve=approve, principal=self._principal, reason=reason
        )

    def approve(self, proposal_id: str, *, reason: str | None = None) -> ProposalOutcome:
        return self.decide(proposal_id, approve=True, reason=reason)

    def reject(self, proposal_id: str, *, reason: str | None = None) -> ProposalOutcome:
        return self.decide(proposal_id, approve=False, reason=reason)

    def rebase(self, proposal_id: str) -> ProposalOutcome:
        return self.memory.rebase(proposal_id, principal=self._principal)

    def publish(
        self,
        scope: str,
        *,
        record_ids: Sequence[str] | None = None,
        pins: Mapping[str, str | None] | None = None,
        name: str | None = None,
        replace: bool = False,
        reason: str | None = None,
    ) -> ProposalOutcome:
        return self.memory.publish(
            scope,
            principal=self._principal,
            record_ids=record_ids,
            pins=dict(pins) if pins is not None else None,
            name=name,
            replace=replace,
            reason=reason,
        )

    def audit(self, query: AuditQuery | None = None) -> list[AuditEntry]:
        return self.memory.audit(query or AuditQuery(), principal=self._principal)

    # ---- the timeline and the decision graph -----------------------------------------------

    def append_events(self, events: Sequence[EventDraft]) -> AppendReport:
        return self.memory.append_events(events, principal=self._principal)

    def events(
        self,
        *,
        scope: str | None = None,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: EventCursor | None = None,
        limit: int = 100,
    ) -> list[Event]:
        return self.memory.events(
            principal=self._principal,
            scope=scope,
            session_id=session_id,
            since=since,
            until=until,
            after=after,
            limit=limit,
        )

    def timeline_search(
        self,
        query: str,
        *,
        scope: str | None = None,
        k: int = 10,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[TeleportHit]:
        check_timeline_k(k)
        return self.memory.timeline_search(
            query, principal=self._principal, scope=scope, k=k, since=since, until=until
        )

    def why(
        self,
        request: WhyRequest,
        *,
        role: str | None = None,
        namespaces: Sequence[str] | None = None,
        mode: WhyMode = "ask",
    ) -> dict[str, Any]:
        # The same passport a remote client sends, checked by the kernel as the HTTP door
        # checks it: a question is answered, or refused, alike on both.
        check_why_mode(mode)
        roles = self.memory.graph_roles(principal=self._principal)
        headers = passport_headers(self._principal, roles, role=role, namespaces=namespaces)
        return self.memory.why(
            request, principal=self._principal, passport=parse_passport(headers), mode=mode
        )

    # ---- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


if TYPE_CHECKING:  # mypy checks that LocalMemory has every method of the protocol, typed alike

    def _is_a_client(client: LocalMemory) -> MemoryClient:
        return client
