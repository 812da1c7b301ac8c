"""The pre-selector: policy before ranking. From an anchor it walks the edges the view's
role may walk, in the directions and between the domains its rules name, up to its hop
limit, and keeps only vertices and edges the view's reader may read, masked to the fields
the role may see.

Permission is decided on every hop, before the walk goes on: a vertex the reader may not
see is never passed through, so nothing behind it is reached through it, and an edge the
reader may not see is never walked (an alias edge carrying its upstream decision's
sensitivity hides the way up while the local alias event stays visible). What is withheld
leaves this module only in the ``PolicyTrace`` (ids and reasons, for the audit copy of a
trace); the ``CandidateSet`` holds only readable vertices with their allowed fields. No
withheld text is ever copied into a candidate: a candidate is built from a whitelist of
fields, never by deleting fields from a record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from cairn.errors import NotFound
from cairn.governance import access
from cairn.graph.fixtures import KEY_REFERENCES
from cairn.graph.passport import GraphView
from cairn.graph.roles import EdgeRule
from cairn.limits import is_id
from cairn.model import Acl, Direction, Edge, EdgeStatus, Principal, Record, Status
from cairn.store.base import EdgeFilter

__all__ = [
    "Candidate",
    "CandidateSet",
    "GraphReader",
    "PolicyTrace",
    "Step",
    "acl_reason",
    "preselect",
    "vertex_date",
]

# Per vertex, at most this many edges are looked at in one hop (the rest are not walked
# and the walk says it was truncated): a hub cannot make one request read the whole graph.
MAX_EDGES_PER_VERTEX = 2_000


class GraphReader(Protocol):
    """What the pre-selector reads: the kernel's store, read-only."""

    def get_record(self, record_id: str) -> Record | None: ...

    def get_records(self, record_ids: Sequence[str]) -> dict[str, Record]: ...

    def list_edges(
        self,
        where: EdgeFilter | None,
        *,
        node_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Edge]: ...


@dataclass(frozen=True)
class Candidate:
    """One readable vertex, as much of it as the role may see. ``fields`` holds only what
    the role's field rule and ``x-extra`` whitelist allow."""

    id: str
    version_id: str
    key: str | None
    kind: str
    scope: str
    title: str
    date: datetime | None
    shown: Literal["full", "headers"]
    hops: int
    via: str | None
    importance: float
    fields: dict[str, Any]


@dataclass(frozen=True)
class Step:
    """A walked edge between two candidates, with the reason text a transition carries."""

    id: str
    type: str
    src: str
    dst: str
    reason: str | None = None


@dataclass(frozen=True)
class CandidateSet:
    anchor: Candidate
    neighbours: tuple[Candidate, ...]
    steps: tuple[Step, ...]

    def all(self) -> tuple[Candidate, ...]:
        return (self.anchor, *self.neighbours)


@dataclass
class PolicyTrace:
    """What the walk met and did not take, with why: for the audit only. ``reasons`` maps a
    withheld vertex or edge id to ``acl:role_missing``, ``acl:namespace_mismatch``,
    ``acl:sensitivity_exceeded``, ``scope:out_of_domain`` or ``edge:not_allowed``;
    ``masked`` maps a candidate id to the fields its role may not see."""

    reasons: dict[str, str] = field(default_factory=dict)
    hidden_vertices: set[str] = field(default_factory=set)
    hidden_edges: set[str] = field(default_factory=set)
    edge_types_used: set[str] = field(default_factory=set)
    masked: dict[str, list[str]] = field(default_factory=dict)
    capped: list[str] = field(default_factory=list)
    neighbours_scanned: int = 0
    truncated: bool = False
    # withheld vertex id → its graph key: never shown, only scrubbed from the answer's prose
    # (a visible record's text may name a key the reader may not see)
    keys: dict[str, str] = field(default_factory=dict)

    def withhold_vertex(self, vertex_id: str, reason: str, key: str | None = None) -> None:
        self.reasons.setdefault(vertex_id, reason)
        self.hidden_vertices.add(vertex_id)
        if key:
            self.keys[vertex_id] = key

    def withhold_edge(self, edge_id: str, reason: str) -> None:
        self.reasons.setdefault(edge_id, reason)
        self.hidden_edges.add(edge_id)


def acl_reason(reader: Principal, acl: Acl) -> str | None:
    """Why ``acl`` does not admit ``reader``, in the trace's words, or ``None``. The test is
    ``governance.access.acl_allows``, split up to name the part that failed."""
    if access.acl_allows(reader, acl):
        return None
    if acl.roles and not set(acl.roles) & set(reader.roles):
        return "acl:role_missing"
    if "*" not in reader.labels and not set(acl.labels) <= set(reader.labels):
        return "acl:namespace_mismatch"
    return "acl:sensitivity_exceeded"


def vertex_date(record: Record) -> datetime | None:
    """When the decision was taken or the event happened (its fixture timestamp)."""
    raw = record.content.metadata.get("timestamp")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
    return record.content.valid_from


def _pick(source: dict[str, Any], path: str) -> tuple[bool, Any]:
    """The value at the dotted ``path`` of ``source``, if there is one."""
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _put(target: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        target = target.setdefault(part, {})
    target[parts[-1]] = value


def _importance(record: Record) -> float:
    raw = record.content.metadata.get("importance")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and 0 <= raw <= 1:
        return float(raw)
    return 0.5


def _extra_paths(extra: Any, prefix: str = "") -> list[str]:
    if not isinstance(extra, dict):
        return []
    paths: list[str] = []
    for key, value in extra.items():
        path = f"{prefix}{key}"
        paths.append(path)
        if isinstance(value, dict):
            paths += _extra_paths(value, path + ".")
    return paths


def _related(path: str, allowed: str) -> bool:
    """Whether ``path`` is shown because of the whitelisted ``allowed``: the same path,
    inside it, or a folder on the way to it."""
    return path == allowed or path.startswith(allowed + ".") or allowed.startswith(path + ".")


def candidate(
    record: Record, view: GraphView, *, hops: int, via: str | None, trace: PolicyTrace
) -> Candidate:
    """``record`` as the view's role may see it; what it may not is named in ``trace``."""
    shown = view.profile.shows(record.scope)
    meta = record.content.metadata
    date = vertex_date(record)
    fields: dict[str, Any] = {"title": record.content.title}
    if date is not None:
        fields["date"] = date.date().isoformat()
    masked: list[str] = []
    if shown == "full":
        if record.content.body:
            fields["text"] = record.content.body
        for name in ("decision_maker", "snippet"):
            if isinstance(meta.get(name), str):
                fields[name] = meta[name]
        if record.content.tags:
            fields["tags"] = list(record.content.tags)
        extra = meta.get("x-extra")
        allowed: dict[str, Any] = {}
        for path in view.profile.x_extra:
            found, value = _pick(extra if isinstance(extra, dict) else {}, path)
            if found:
                _put(allowed, path, value)
        if allowed:
            fields["x-extra"] = allowed
        masked += [
            f"x-extra.{path}"
            for path in _extra_paths(extra)
            if not any(_related(path, allowed) for allowed in view.profile.x_extra)
        ]
    else:
        hidden = {
            "text": bool(record.content.body),
            "decision_maker": bool(meta.get("decision_maker")),
            "snippet": bool(meta.get("snippet")),
            "tags": bool(record.content.tags),
            "x-extra": bool(meta.get("x-extra")),
        }
        masked += [name for name, present in hidden.items() if present]
    if masked:
        trace.masked[record.id] = masked
    return Candidate(
        id=record.id,
        version_id=record.current_version_id,
        key=meta.get("graph_id") if isinstance(meta.get("graph_id"), str) else None,
        kind=record.kind,
        scope=record.scope,
        title=record.content.title,
        date=date,
        shown=shown,
        hops=hops,
        via=via,
        importance=_importance(record),
        fields=fields,
    )


def _with_references(
    store: GraphReader,
    found: dict[str, Candidate],
    view: GraphView,
    trace: PolicyTrace,
    now: datetime,
) -> dict[str, Candidate]:
    """``found`` with each event's ``KEY_REFERENCES`` (an alias event's
    ``alias_of_decision``) named again from the edge that keeps it: by the graph key of the
    vertex at its far end, where the role's whitelist shows the field and that vertex is a
    candidate of the same answer; masked (and said so in ``trace``) otherwise. A key is an
    id, so a readable alias event never names a decision the reader may not read."""
    kept: dict[str, Candidate] = {}
    for cid, c in found.items():
        if c.kind != "event" or c.shown != "full":
            kept[cid] = c
            continue
        edges = store.list_edges(None, node_id=cid, limit=MAX_EDGES_PER_VERTEX)
        for name, relation in KEY_REFERENCES.items():
            keeping = [e for e in edges if e.type == relation and e.dst == cid and _live(e, now)]
            if not keeping:
                continue
            # named only through an edge the view may read: an alias edge withheld from the
            # reader must not show through the field it keeps (the field is masked instead)
            sources = sorted(e.src for e in keeping if _edge_reason(e, view) is None)
            named = next((found[s].key for s in sources if s in found and found[s].key), None)
            shown = any(_related(name, allowed) for allowed in view.profile.x_extra)
            if named is not None and shown:
                extra = {**(c.fields.get("x-extra") or {}), name: named}
                c = replace(c, fields={**c.fields, "x-extra": extra})
            else:
                trace.masked.setdefault(cid, []).append(f"x-extra.{name}")
        kept[cid] = c
    return kept


def _vertex_reason(record: Record, view: GraphView) -> str | None:
    if not (access.in_scope(view.reader, record.scope) and view.in_domain(record.scope)):
        return "scope:out_of_domain"
    return _view_acl_reason(view, record.content.acl)


def _view_acl_reason(view: GraphView, acl: Acl) -> str | None:
    """Why the view may not read what ``acl`` guards: the role's reader is not admitted,
    or (asking as a lower role the key does not hold) the key's own principal is not."""
    reason = acl_reason(view.reader, acl)
    if reason is None and not view.holder_admits(acl):
        return "acl:role_missing"
    return reason


def _edge_reason(edge: Edge, view: GraphView) -> str | None:
    if not access.in_scope(view.reader, edge.scope):
        return "scope:out_of_domain"
    return _view_acl_reason(view, edge.acl)


def _rule_for(
    view: GraphView, edge: Edge, outward: bool, src: Record, dst: Record
) -> EdgeRule | None:
    for rule in view.edges:
        if rule.type != edge.type:
            continue
        if rule.direction is Direction.OUT and not outward:
            continue
        if rule.direction is Direction.IN and outward:
            continue
        if rule.admits(src.scope, dst.scope):
            return rule
    return None


def _live(edge: Edge, at: datetime) -> bool:
    if edge.status is not EdgeStatus.ACTIVE:
        return False
    if edge.valid_from is not None and edge.valid_from > at:
        return False
    return edge.valid_to is None or edge.valid_to > at


def preselect(
    store: GraphReader, anchor_id: str, view: GraphView, *, now: datetime, asked: str
) -> tuple[CandidateSet, PolicyTrace]:
    """The sanitized candidates around ``anchor_id`` and the trace of what was withheld.
    An anchor the view may not read is "not found", as if it did not exist, named as the
    caller ``asked`` for it (its graph key is never answered with its record id)."""
    anchor = store.get_record(anchor_id) if is_id(anchor_id) else None
    if anchor is None or anchor.status is not Status.ACTIVE or _vertex_reason(anchor, view):
        raise NotFound(f"no decision or event {asked!r}", field="anchor")
    trace = PolicyTrace()
    found: dict[str, Candidate] = {
        anchor.id: candidate(anchor, view, hops=0, via=None, trace=trace)
    }
    records: dict[str, Record] = {anchor.id: anchor}
    steps: dict[str, Step] = {}
    frontier = [anchor.id]
    for hop in range(1, view.max_hops + 1):
        touching: list[tuple[str, Edge]] = []
        for node in frontier:
            edges = store.list_edges(None, node_id=node, limit=MAX_EDGES_PER_VERTEX + 1)
            if len(edges) > MAX_EDGES_PER_VERTEX:
                trace.truncated = True
                edges = edges[:MAX_EDGES_PER_VERTEX]
            touching += [(node, e) for e in edges if _live(e, now) and e.id not in steps]
        far_ids = {e.dst if e.src == node else e.src for node, e in touching}
        missing = [i for i in far_ids if i not in records]
        records.update(store.get_records(missing) if missing else {})
        taken_per_type: dict[str, int] = {}
        next_frontier: list[str] = []
        # A fixed order, so a per-type cap keeps the same edges on every run.
        touching.sort(key=lambda item: (item[1].type, item[1].id))
        for node, edge in touching:
            if edge.id in steps:
                continue
            outward = edge.src == node
            far_id = edge.dst if outward else edge.src
            far = records.get(far_id)
            near = records[node]
            if far is None or far.status is not Status.ACTIVE:
                continue  # an end that is gone or not current is no part of the graph
            if not access.in_scope(view.holder, edge.scope):
                # an edge of a scope the key may not read at all is not counted either:
                # what a trace says was withheld is withheld from what the key could see
                continue
            trace.neighbours_scanned += 1
            src, dst = (near, far) if outward else (far, near)
            if _rule_for(view, edge, outward, src, dst) is None:
                trace.withhold_edge(edge.id, "edge:not_allowed")
                continue
            edge_reason = _edge_reason(edge, view)
            if edge_reason is not None:
                trace.withhold_edge(edge.id, edge_reason)
                continue
            if far_id not in found:
                reason = _vertex_reason(far, view)
                if reason is not None:
                    key = far.content.metadata.get("graph_id")
                    trace.withhold_vertex(far_id, reason, key if isinstance(key, str) else None)
                    continue
                taken = taken_per_type.get(edge.type, 0)
                if taken >= view.profile.per_type_cap:
                    trace.capped.append(far_id)
                    continue
                taken_per_type[edge.type] = taken + 1
                found[far_id] = candidate(far, view, hops=hop, via=edge.type, trace=trace)
                next_frontier.append(far_id)
            elif far_id in trace.hidden_vertices:
                continue
            # An edge refused from one end may be walked from the other (a rule for one
            # direction only): once taken, it is no longer withheld.
            trace.reasons.pop(edge.id, None)
            trace.hidden_edges.discard(edge.id)
            reason_text = edge.metadata.get("reason")
            steps[edge.id] = Step(
                id=edge.id,
                type=edge.type,
                src=edge.src,
                dst=edge.dst,
                reason=reason_text if isinstance(reason_text, str) else None,
            )
            trace.edge_types_used.add(edge.type)
        frontier = next_frontier
        if not frontier:
            break
    found = _with_references(store, found, view, trace, now)
    neighbours = tuple(c for i, c in found.items() if i != anchor.id)
    return CandidateSet(found[anchor.id], neighbours, tuple(steps.values())), trace
