"""The timeline's verbs on ``Memory``: each checks its arguments, works out what the
principal may read, and delegates to ``timeline.reads`` or ``timeline.rollup``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Unpack

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.limits import MAX_QUERY_CHARS, MAX_SCOPE_CHARS, check_input, check_timeline_k
from cairn.model import SYSTEM_PRINCIPAL, Principal, TocNode
from cairn.options import TimelineFilters, check_names
from cairn.retrieval.preselect import ReadRequest, readable
from cairn.timeline import reads
from cairn.timeline.rollup import (
    CONSUMER,
    RollupProgress,
    RollupReport,
    rebuild_all,
    run_rollup,
)
from cairn.timeline.settings import TimelineSettings
from cairn.timeline.summarize import Summarizer, make_summarizer
from cairn.timeline.views import (
    ExpandedGrip,
    NodePage,
    RecentContext,
    ScanReport,
    TimelineHits,
    TimelineStatus,
)
from cairn.timeline.worker import RollupWorker

if TYPE_CHECKING:
    from cairn.governance.gate import Gate
    from cairn.retrieval.indexer import Indexer
    from cairn.store.base import Store

__all__ = ["TimelineVerbs"]


class TimelineVerbs:
    """Mixed into ``Memory``: the timeline through the kernel's one store and gate."""

    _store: Store
    _gate: Gate
    timeline_settings: TimelineSettings
    _rollups: RollupWorker | None = None
    _rollup_lock: threading.Lock

    @property
    def indexer(self) -> Indexer | None:  # provided by Memory
        raise NotImplementedError

    def _summarizer(self) -> Summarizer:
        return make_summarizer(self.timeline_settings)

    def _reader(self, principal: Principal, scope: str | None = None) -> reads.Reader:
        if scope is not None:
            check_input(scope, "scope", MAX_SCOPE_CHARS)
        chosen = readable(self._store, principal, ReadRequest(scope=scope))
        return reads.Reader(chosen.acl_ids, chosen.scope_ids)

    # ---- building ----------------------------------------------------------------------

    def rollup(
        self,
        *,
        principal: Principal,
        piece: int = 20_000,
        max_pieces: int | None = None,
        on_progress: Callable[[RollupProgress], None] | None = None,
    ) -> RollupReport:
        """Bring the timeline up to date with the events appended since the last rollup
        (the system's job, or a curator of every scope's; it resumes where a stopped run
        left off)."""
        _require_builder(principal)
        if not 1 <= piece <= 100_000:
            raise InvalidInput("piece must be between 1 and 100000", field="piece")
        with self._rollup_lock:
            return run_rollup(
                self._store,
                self._gate,
                self.timeline_settings,
                self._summarizer(),
                SYSTEM_PRINCIPAL,
                piece=piece,
                max_pieces=max_pieces,
                on_progress=on_progress,
            )

    def start_timeline(self) -> RollupWorker | None:
        """Roll up new events in the background from now on (``cairn serve``): woken by
        appends through this memory and every ``rollup_every_seconds`` for other
        processes'. None when the settings turn it off. ``close`` stops it."""
        every = self.timeline_settings.rollup_every_seconds
        if every <= 0:
            return None
        if self._rollups is None:
            self._rollups = RollupWorker(
                lambda: self.rollup(principal=SYSTEM_PRINCIPAL, max_pieces=1),
                lambda: self._store.outbox_lag(CONSUMER),
                poll=every,
            ).start()
            self._rollups.notify()
        return self._rollups

    def _stop_timeline(self) -> None:
        if self._rollups is not None:
            self._rollups.stop()
            self._rollups = None

    def _events_appended(self) -> None:
        if self._rollups is not None:
            self._rollups.notify()

    def rebuild_timeline(
        self,
        *,
        principal: Principal,
        on_progress: Callable[[RollupProgress], None] | None = None,
    ) -> RollupReport:
        """Rebuild every node from the stored events (after a change of settings or
        summarizer): unchanged nodes stay as they are, changed ones get a new version."""
        _require_builder(principal)
        with self._rollup_lock:
            report = rebuild_all(
                self._store,
                self._gate,
                self.timeline_settings,
                self._summarizer(),
                SYSTEM_PRINCIPAL,
                on_progress=on_progress,
            )
        caught_up = self.rollup(principal=principal, on_progress=on_progress)
        report.events += caught_up.events
        report.nodes_written += caught_up.nodes_written
        return report

    def compact(self, *, principal: Principal) -> dict[str, int | str]:
        """Compact the store's indexes and reclaim free space (curators)."""
        access.require_curator(principal, "compact the store")
        return self._store.compact()

    def timeline_status(self, *, principal: Principal) -> TimelineStatus:
        """How far the timeline lags the event log. It counts every scope's events and
        nodes, so only a curator of every scope (``"*"``) reads it, as for the audit log."""
        access.require_curator_of_every_scope(
            principal, "read the timeline's status", "the timeline's status counts every scope"
        )
        indexer = self.indexer
        return TimelineStatus(
            lag=self._store.outbox_lag(CONSUMER),
            nodes=self._store.toc_counts(),
            vector_lag=indexer.lag() if indexer is not None else 0,
            vector_index_busy=indexer.busy if indexer is not None else False,
        )

    # ---- reads -------------------------------------------------------------------------

    def timeline_root(self, *, principal: Principal, scope: str | None = None) -> list[TocNode]:
        """The years the principal may see, oldest first (``scope`` is a glob)."""
        return reads.root(self._store, self._reader(principal, scope))

    def timeline_node(
        self, node_id: str, *, principal: Principal, version: int | None = None
    ) -> TocNode:
        """One node with its summary and children's ids, latest or at ``version``."""
        return reads.get_node(self._store, self._reader(principal), node_id, version)

    def timeline_browse(
        self, node_id: str, *, principal: Principal, after: str | None = None, limit: int = 20
    ) -> NodePage:
        return reads.browse(self._store, self._reader(principal), node_id, after=after, limit=limit)

    def expand_grip(
        self, grip_id: str, *, principal: Principal, before: int = 3, after: int = 3
    ) -> ExpandedGrip:
        return reads.expand_grip(
            self._store, self._reader(principal), grip_id, before=before, after=after
        )

    def timeline_search(
        self, query: str, *, principal: Principal, **filters: Unpack[TimelineFilters]
    ) -> TimelineHits:
        """Teleport: the nodes and grips that best match ``query``, without walking the tree
        (``TimelineFilters``)."""
        check_names(filters, TimelineFilters.__optional_keys__)
        k, since, until = filters.get("k", 10), filters.get("since"), filters.get("until")
        check_input(query, "query", MAX_QUERY_CHARS)
        check_timeline_k(k)
        _aware(since, "since")
        _aware(until, "until")
        return reads.teleport(
            self._store,
            self._reader(principal, filters.get("scope")),
            query,
            indexer=self.indexer,
            k=k,
            since=since,
            until=until,
        )

    def timeline_recent(
        self,
        *,
        principal: Principal,
        scope: str | None = None,
        session_id: str | None = None,
        max_tokens: int = 2000,
    ) -> RecentContext:
        """What an agent starting work should read first, within ``max_tokens``."""
        if session_id is not None:
            check_input(session_id, "session_id", MAX_SCOPE_CHARS)
        return reads.recent_context(
            self._store,
            self._reader(principal, scope),
            max_tokens=max_tokens,
            session_id=session_id,
        )

    def timeline_scan(
        self,
        query: str,
        *,
        principal: Principal,
        scope: str | None = None,
        node_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        k: int = 10,
    ) -> ScanReport:
        """Read raw events for ``query`` over a node's span (or ``since``..``until``)."""
        check_input(query, "query", MAX_QUERY_CHARS)
        check_timeline_k(k)
        _aware(since, "since")
        _aware(until, "until")
        reader = self._reader(principal, scope)
        if node_id is not None:
            node = reads.get_node(self._store, reader, node_id)
            since, until = node.starts_at, node.ends_at
            if node.first_ts is not None and node.last_ts is not None:
                since, until = node.first_ts, max(node.ends_at, node.last_ts)
        if since is None or until is None:
            raise InvalidInput("give a node_id, or since and until", field="since")
        return reads.scan(self._store, reader, query, since=since, until=until, k=k)


def _require_builder(principal: Principal) -> None:
    """A rollup or rebuild runs over every scope's events and reports what it did in
    counts of them, so it is the system's job or a curator of every scope's."""
    if principal != SYSTEM_PRINCIPAL:
        access.require_curator_of_every_scope(
            principal, "build the timeline", "a rollup reports counts of every scope's events"
        )


def _aware(moment: datetime | None, what: str) -> None:
    if moment is not None and moment.tzinfo is None:
        raise InvalidInput(f"{what} needs a time zone", field=what)
