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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import model
from cairn.client import ENV_KEY, MemoryClient, Move, WhyMode
from cairn.config import load_settings
from cairn.errors import InvalidInput, NotFound, Unauthenticated
from cairn.graph.passport import parse_passport
from cairn.memory import Memory
from cairn.options import EventFilters, PublishChoice, ReadFilters, TimelineFilters
from cairn.retrieval.context import ReadContextRequest, ReadContextResponse, ValidationReport
from cairn.retrieval.types import RetrievalResult, SearchResult
from cairn.timeline.views import TimelineHits
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


class LocalMemory(MemoryClient):
    """A ``cairn.MemoryClient`` over a ``Memory`` in this process, acting for one principal.

    ``cairn.open`` makes one. Clients opened on one store in a process share one ``Memory``
    (as a server shares one among its keys), closed when the last of them is. Wrap a
    ``Memory`` you opened yourself as ``LocalMemory(memory, principal)`` to act for a
    principal on it; ``close`` then leaves the ``Memory`` open. ``.memory`` is the kernel,
    for what only it offers (ingest, edges, rollups, …: every verb there takes
    ``principal=``).

    Each call goes to the ``Memory`` verb of the same name, with the key's principal."""

    def __init__(self, memory: Memory, principal: model.Principal) -> None:
        self.memory = memory
        self._principal = principal
        # set by ``open``: lets go of the shared Memory (once)
        self._release: Callable[[], None] | None = None

    def __repr__(self) -> str:
        where = self.memory.folder or self.memory.root
        return f"<LocalMemory {where} as {self._principal.id}>"

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    # ---- writes --------------------------------------------------------------------------

    def _remember(
        self, content: model.Content, *, draft: bool, paths: Sequence[str], reason: str | None
    ) -> model.ProposalOutcome:
        return self.memory.remember(
            content, principal=self._principal, draft=draft, paths=paths, reason=reason
        )

    def _update(
        self, record_id: str, patch: model.ContentPatch, base: str | None, reason: str | None
    ) -> model.ProposalOutcome:
        return self.memory.update(
            record_id,
            patch,
            principal=self._principal,
            base_version_id=base,
            reason=reason,
        )

    def _supersede(
        self, record_id: str, *, by: str | None, content: model.Content | None, reason: str | None
    ) -> model.ProposalOutcome:
        return self.memory.supersede(
            record_id, principal=self._principal, by=by, content=content, reason=reason
        )

    def _move(self, record_id: str, move: Move, reason: str | None) -> model.ProposalOutcome:
        verb = self.memory.archive if move == "archive" else self.memory.restore
        return verb(record_id, principal=self._principal, reason=reason)

    # ---- reads ---------------------------------------------------------------------------

    def _get(
        self, record_id: str, version: int | None, selector: model.VersionPin | None
    ) -> model.RecordView:
        return self.memory.get(
            record_id, principal=self._principal, selector=selector, version=version
        )

    def _resolve(self, record_id: str) -> model.Record:
        return self.memory.resolve(record_id, principal=self._principal)

    def _history(self, record_id: str, *, after: int, limit: int) -> list[model.Version]:
        return self.memory.history(record_id, principal=self._principal, after=after, limit=limit)

    def _list_records(self, query: model.RecordQuery) -> list[model.Record]:
        return self.memory.list_records(query, principal=self._principal)

    def _search(self, query: str, filters: ReadFilters) -> SearchResult:
        return self.memory.search(query, principal=self._principal, **filters)

    def _retrieve(self, query: str, max_tokens: int, filters: ReadFilters) -> RetrievalResult:
        return self.memory.retrieve(
            query, principal=self._principal, max_tokens=max_tokens, **filters
        )

    def _read_context(self, request: ReadContextRequest) -> ReadContextResponse:
        return self.memory.read_context(request, principal=self._principal)

    def _validate(self, record_ids: Sequence[str]) -> ValidationReport:
        return self.memory.validate(record_ids, principal=self._principal)

    def _status(self) -> dict[str, int]:
        return self.memory.status(principal=self._principal)

    # ---- review --------------------------------------------------------------------------

    def _proposals(
        self, status: model.ProposalStatus, *, limit: int, offset: int, after: str | None
    ) -> list[model.Proposal]:
        return self.memory.proposals(
            principal=self._principal, status=status, limit=limit, offset=offset, after=after
        )

    def _proposal(self, proposal_id: str) -> model.Proposal:
        return self.memory.proposal(proposal_id, principal=self._principal)

    def _decide(
        self, proposal_id: str, *, approve: bool, reason: str | None
    ) -> model.ProposalOutcome:
        return self.memory.decide(
            proposal_id, approve=approve, principal=self._principal, reason=reason
        )

    def _rebase(self, proposal_id: str) -> model.ProposalOutcome:
        return self.memory.rebase(proposal_id, principal=self._principal)

    def _publish(self, scope: str, choice: PublishChoice) -> model.ProposalOutcome:
        return self.memory.publish(scope, principal=self._principal, **choice)

    def _audit(self, query: model.AuditQuery) -> list[model.AuditEntry]:
        return self.memory.audit(query, principal=self._principal)

    # ---- the timeline and the decision graph -----------------------------------------------

    def _append_events(self, events: Sequence[model.EventDraft]) -> model.AppendReport:
        return self.memory.append_events(events, principal=self._principal)

    def _events(self, filters: EventFilters) -> list[model.Event]:
        return self.memory.events(principal=self._principal, **filters)

    def _timeline_search(self, query: str, filters: TimelineFilters) -> TimelineHits:
        return self.memory.timeline_search(query, principal=self._principal, **filters)

    def _graph_roles(self) -> list[dict[str, Any]]:
        return self.memory.graph_roles(principal=self._principal)

    def _why(self, request: WhyRequest, passport: dict[str, str], mode: WhyMode) -> dict[str, Any]:
        # the kernel checks the passport as the HTTP door checks a remote client's
        return self.memory.why(
            request, principal=self._principal, passport=parse_passport(passport), mode=mode
        )
