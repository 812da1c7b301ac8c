"""The decision graph's verbs on ``Memory``: load a graph through the gate, answer "why"
for a role, and hand back an answer's trace and downloads to whoever may see them."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.governance import access
from cairn.governance.gate import GraphLink
from cairn.graph import why as why_pipeline
from cairn.graph.fixtures import GraphPlan, edge_acl
from cairn.graph.llm import ChatAnswerer
from cairn.graph.passport import GraphView, Passport, view_for
from cairn.graph.preselect import CandidateSet, PolicyTrace
from cairn.graph.settings import GraphSettings
from cairn.graph.traces import BUNDLE_FILES, TraceFolder, make_zip
from cairn.limits import is_id, shown_id
from cairn.model import (
    CairnModel,
    Content,
    EdgeStatus,
    Principal,
    ProposalOutcome,
    Record,
    Status,
    new_id,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from cairn.governance.gate import Gate
    from cairn.governance.policy import Policy
    from cairn.store.base import Store

__all__ = ["GraphIngestReport", "GraphVerbs"]

# Candidate sets kept per process, by anchor, snapshot and view (never shared across roles).
CACHE_SIZE = 256
GRAPH_KINDS = ("decision", "event")


class GraphIngestReport(CairnModel):
    vertices_created: int = 0
    vertices_updated: int = 0
    vertices_unchanged: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    edges_unchanged: int = 0

    @property
    def changed(self) -> bool:
        return bool(
            self.vertices_created or self.vertices_updated or self.edges_created
            or self.edges_updated
        )  # fmt: skip


def _same(stored: Content, planned: Content) -> bool:
    fields = ("kind", "scope", "title", "body", "tags", "metadata", "acl", "valid_from")
    return all(getattr(stored, f) == getattr(planned, f) for f in fields)


class GraphVerbs:
    """Mixed into ``Memory``: the graph through the kernel's one store and gate."""

    _store: Store
    _gate: Gate
    _policy: Policy
    folder: Path | None
    clock: Callable[[], datetime]
    graph_settings: GraphSettings
    _graph_cache: OrderedDict[tuple[Any, ...], tuple[CandidateSet, PolicyTrace]]
    _graph_cache_lock: threading.Lock
    _traces: TraceFolder | None
    _answerer: ChatAnswerer | None

    def _init_graph(self, settings: GraphSettings | None) -> None:
        self.graph_settings = settings or GraphSettings()
        self._graph_cache = OrderedDict()
        self._graph_cache_lock = threading.Lock()
        self._traces = (
            TraceFolder(
                self.folder / "traces",
                keep_days=self.graph_settings.trace_days,
                per_day=self.graph_settings.traces_per_day,
            )
            if self.folder is not None
            else None
        )
        key = self.graph_settings.llm_key
        self._answerer = ChatAnswerer.from_spec(
            self.graph_settings.llm,
            timeout=self.graph_settings.llm_timeout,
            api_key=key.get_secret_value() if key is not None else None,
        )

    # ---- loading a graph -------------------------------------------------------------

    def _graph_records(self, key: str, scope_globs: tuple[str, ...]) -> list[Record]:
        """The live decisions and events keyed ``key`` in scopes ``scope_globs`` admits."""
        found = self._store.records_by_graph_key(key, GRAPH_KINDS, scope_globs)
        return [r for r in found if r.status not in (Status.ARCHIVED, Status.REJECTED)]

    def graph_ingest(
        self, plan: GraphPlan, *, principal: Principal, reason: str = "graph ingest"
    ) -> GraphIngestReport:
        """Write a checked graph (``cairn.graph.fixtures.plan_graph``) through the gate in
        one transaction: new vertices, new versions of changed ones, then the edges that
        are not there yet, and new edges in place of changed ones (another ACL, or other
        metadata). A second run of the same graph writes nothing and says so."""
        access.require_curator(principal, "ingest a decision graph")
        counts = dict.fromkeys(GraphIngestReport.model_fields, 0)
        creates: list[Content] = []
        updates: list[tuple[str, Content]] = []
        where: dict[str, str | int] = {}  # key → stored record id, or index into creates
        acls = {}
        for vertex in plan.vertices:
            acls[vertex.key] = vertex.content.acl
            # Only the curator's own scopes are looked in: a key elsewhere is not its to
            # see, and no answer here may say whether one exists.
            found = self._graph_records(vertex.key, principal.scopes)
            stored = found[0] if found else None
            if stored is not None and (stored.kind, stored.scope) != (
                vertex.content.kind, vertex.content.scope,
            ):  # fmt: skip
                raise InvalidInput(
                    f"{vertex.file}: {vertex.key} is stored as a {stored.kind} in "
                    f"{stored.scope}; a vertex keeps its kind and domain (archive it and give "
                    "the new one another id)",
                    field="fixtures",
                )
            if stored is None:
                where[vertex.key] = len(creates)
                creates.append(vertex.content)
                counts["vertices_created"] += 1
                continue
            where[vertex.key] = stored.id
            if _same(stored.content, vertex.content):
                counts["vertices_unchanged"] += 1
            else:
                updates.append((stored.id, vertex.content))
                counts["vertices_updated"] += 1
        links: list[GraphLink] = []
        unlinks: list[str] = []
        edges_of: dict[str, list[Any]] = {}
        for edge in plan.edges:
            src, dst = where[edge.draft.src], where[edge.draft.dst]
            acl = edge_acl(edge, acls[edge.draft.src], acls[edge.draft.dst])
            stale: list[str] = []
            if isinstance(src, str) and isinstance(dst, str):
                if src not in edges_of:
                    edges_of[src] = self._store.list_edges(None, node_id=src, limit=10_000)
                present = [
                    e for e in edges_of[src]
                    if e.type == edge.draft.type and e.src == src and e.dst == dst
                    and e.status is EdgeStatus.ACTIVE
                ]  # fmt: skip
                if any(e.acl == acl and e.metadata == edge.draft.metadata for e in present):
                    counts["edges_unchanged"] += 1
                    continue
                # The edge is there with another ACL (its own fields, or its ends', changed)
                # or other metadata: it is replaced. Keeping it would leave an ACL tightened
                # in the fixtures unapplied while the ingest said it had nothing to do.
                stale = [e.id for e in present]
            unlinks += stale
            links.append(
                GraphLink(draft=edge.draft.model_copy(update={"acl": acl}), src=src, dst=dst)
            )
            counts["edges_updated" if stale else "edges_created"] += 1
        if creates or updates or links:
            self._gate.submit_graph(
                creates, updates, links, principal, reason=reason, unlinks=unlinks
            )
        return GraphIngestReport(**counts)

    def graph_load(
        self,
        creates: Sequence[Content],
        links: Sequence[GraphLink],
        *,
        principal: Principal,
        reason: str = "graph load",
    ) -> list[ProposalOutcome]:
        """Write new vertices and the edges between them through the gate in one
        transaction, without ``graph_ingest``'s look for vertices already stored: a bulk
        load into a store known not to hold them (an edge's end is a stored record's id or
        the index of one of ``creates``). Refused whole unless the policy approves all."""
        return self._gate.submit_graph(creates, [], links, principal, reason=reason)

    # ---- answering -------------------------------------------------------------------

    def graph_roles(self, *, principal: Principal) -> list[dict[str, Any]]:
        """The role profiles the principal may ask as (its own and the ones ranked below),
        each with the ``policy_key`` and ``policy_version`` a passport names."""
        graph = self._policy.graph
        own = graph.best_role(principal.roles)
        if own is None:
            return []
        ceiling = graph.roles[own].rank
        return [
            {
                "role": name,
                "rank": profile.rank,
                "description": profile.description,
                "policy_version": graph.version,
                "policy_key": graph.policy_key(name),
                "profile": profile.model_dump(mode="json"),
            }
            for name, profile in sorted(graph.roles.items(), key=lambda item: item[1].rank)
            if profile.rank <= ceiling
        ]

    def graph_view(
        self, *, principal: Principal, role: str | None = None, passport: Passport | None = None
    ) -> GraphView:
        return view_for(self._policy.graph, principal, role=role, passport=passport)

    def _anchor_id(self, anchor: str, view: GraphView) -> str:
        """A record id, or the graph key of a decision or event the view may read."""
        if anchor.startswith("rec_"):
            return anchor
        if not is_id(anchor):
            raise NotFound(f"no decision or event {anchor!r}", field="anchor")
        found = self._graph_records(anchor, view.reader.scopes)
        for record in found:
            if view.reads(record.scope, record.content.acl):
                return record.id
        raise NotFound(f"no decision or event {anchor!r}", field="anchor")

    def _snapshot_etag(self, anchor_id: str) -> str:
        """Changes whenever anything is written (every write is audited): the newest audit
        entry's id, with the anchor's head version."""
        record = self._store.get_record(anchor_id)
        head = record.current_version_id if record else "none"
        return f"{head}:{self._store.audit_head()}"

    def why(
        self,
        request: why_pipeline.WhyRequest,
        *,
        principal: Principal,
        role: str | None = None,
        passport: Passport | None = None,
        mode: Literal["ask", "query"] = "ask",
    ) -> dict[str, Any]:
        """Why ``request.anchor`` came about, for the principal's role (or a lower one it
        asks as): the answer, its evidence and its meta, after the pre-selector has kept
        only what the role may walk and read. ``mode="query"`` has the configured LLM write
        the answer from the same evidence (falling back to the template). The answer's
        trace bundle is kept for ``graph.trace_days`` days."""
        view = self.graph_view(principal=principal, role=role, passport=passport)
        if request.hops > view.max_hops:
            raise PermissionDenied(
                f"the {view.role} role walks at most {view.max_hops} hop(s)", field="hops"
            )
        anchor_id = self._anchor_id(request.anchor, view)
        etag = self._snapshot_etag(anchor_id)
        cache_key = (
            anchor_id, etag, view.policy_key, view.reader.labels, view.reader.sensitivity,
            view.reader.scopes, view.domains, view.edges, request.hops, view.holder.roles,
        )  # fmt: skip

        def cached() -> tuple[CandidateSet, PolicyTrace] | None:
            with self._graph_cache_lock:
                hit = self._graph_cache.get(cache_key)
                if hit is not None:
                    self._graph_cache.move_to_end(cache_key)
                return hit

        def remember(walked: tuple[CandidateSet, PolicyTrace]) -> None:
            with self._graph_cache_lock:
                self._graph_cache[cache_key] = walked
                while len(self._graph_cache) > CACHE_SIZE:
                    self._graph_cache.popitem(last=False)

        trace_id = new_id("trc")
        now = self.clock()
        answer = why_pipeline.answer(
            self._store, view, request, anchor_id, mode=mode, trace_id=trace_id, now=now,
            snapshot_etag=etag, answerer=self._answerer, cached=cached, remember=remember,
        )  # fmt: skip
        if self._traces is not None:
            anchor = self._store.get_record(anchor_id)
            self._traces.save(
                trace_id,
                owner=principal.id,
                scope=anchor.scope if anchor else "",
                files=answer.files,
                now=now,
            )
        return answer.body

    # ---- traces ----------------------------------------------------------------------

    def _trace_files(self, trace_id: str, principal: Principal) -> tuple[dict[str, Any], bool]:
        """The trace's files and whether the principal reads it as an auditor (a curator of
        every scope): the asker gets its own copy, anyone else "not found". The audit copy
        names withheld ids and holds evidence from every scope the asker could read, so a
        curator of only some scopes (the anchor's among them) is not given it."""
        found = self._traces.load(trace_id) if self._traces is not None else None
        if found is None:
            raise NotFound(f"no trace {shown_id(trace_id)}", field="trace_id")
        auditor = access.sees_everything(principal)
        if not auditor and found.owner != principal.id:
            raise NotFound(f"no trace {shown_id(trace_id)}", field="trace_id")
        files = dict(found.files)
        asker = files.pop("_meta.asker.json", None)
        if not auditor:
            files["_meta.json"] = asker
        return files, auditor

    def trace(self, trace_id: str, *, principal: Principal) -> dict[str, Any]:
        """An answer's trace files: the audit copy (which names withheld ids in its policy
        trace) to a curator of every scope; to the asker, its own copy, holding only the
        files of the downloads its answer allows (no ``bundle_full`` files where that
        download is refused)."""
        files, auditor = self._trace_files(trace_id, principal)
        if not auditor:
            allowed = {"_meta.json"} | {
                member
                for artifact in files["_meta.json"]["downloads"]["artifacts"]
                if artifact["allowed"]
                for member in BUNDLE_FILES.get(artifact["name"], ())
            }
            files = {name: body for name, body in files.items() if name in allowed}
        return {"trace_id": trace_id, "view": "audit" if auditor else "asker", "files": files}

    def trace_download(self, trace_id: str, name: str, *, principal: Principal) -> bytes:
        """The ``bundle_view`` or ``bundle_full`` zip of an answer, when the answer's meta
        allows it; refused with the reason the meta gives otherwise."""
        if name not in BUNDLE_FILES:
            raise InvalidInput("downloads are bundle_view and bundle_full", field="name")
        files, _ = self._trace_files(trace_id, principal)
        meta = files["_meta.json"]
        for artifact in meta["downloads"]["artifacts"]:
            if artifact["name"] == name and not artifact["allowed"]:
                raise PermissionDenied(
                    f"{name} is not allowed for this answer: {artifact['reason']}", field="name"
                )
        return make_zip(files, name)
