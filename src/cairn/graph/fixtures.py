"""Graph fixtures: a folder of JSON files, one vertex or edge per file, read, checked and
turned into what the gate writes.

    <folder>/decisions/*.json        decisions        (kind decision)
    <folder>/events/*.json           events           (kind event; an alias event names
                                                       its upstream decision in
                                                       x-extra.alias_of_decision)
    <folder>/transitions/*.json      causal edges     (CAUSAL_PRECEDES)
    <folder>/edges/aliases/*.json    alias overlays   (ALIAS_OF, decision → alias event)

Every file is checked against its JSON Schema (``schemas/``) and every id it names must
exist, before anything is written; an error names the file, the field and the missing id.
Fields map onto records with nothing dropped: domain → scope, namespaces → ACL labels,
roles_allowed → ACL roles, sensitivity → ACL sensitivity, option/summary → title,
rationale/description → body, tags → tags, and id, timestamp, decision_maker, importance,
snippet and x-extra → metadata (``graph_id`` is the fixture id), except an alias event's
``alias_of_decision``: that names another vertex, and a record's metadata is shown to
whoever reads the record, so the link is kept only as the ALIAS_OF edge its alias file
makes (required), which is read under its own ACL; a graph answer shows the name again
where the decision is part of the same answer (``preselect``). A decision's
``supported_by`` and ``based_on`` and an event's ``led_to`` become SUPPORTED_BY, BASED_ON
and CAUSAL_PRECEDES edges (a decision's ``transitions`` are the transition files that
touch it, checked). An edge with no ACL of its own takes the stricter of its two ends'.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from cairn.errors import InvalidInput
from cairn.graph.schema import validator
from cairn.limits import LimitExceeded, load_json
from cairn.model import Acl, Content, EdgeDraft, Origin, Sensitivity

__all__ = [
    "FOLDERS",
    "KEY_REFERENCES",
    "EdgePlan",
    "GraphPlan",
    "VertexPlan",
    "example_fixtures",
    "plan_graph",
    "stricter_acl",
]

# folder → (schema, what its files hold)
FOLDERS = {
    "decisions": "decision",
    "events": "event",
    "transitions": "transition",
    "edges/aliases": "alias_edge",
}
MAX_FILE_BYTES = 1_000_000
MAX_FILES = 200_000
MAX_ERRORS = 20
# ``x-extra`` keys whose value names another vertex, and the relation whose edge keeps that
# link instead of the record's metadata (which every reader of the record sees).
KEY_REFERENCES = {"alias_of_decision": "ALIAS_OF"}
# Only curators read a vertex or edge whose ends admit no common role.
NOBODY_BUT_CURATORS = ("curator",)


@dataclass(frozen=True)
class VertexPlan:
    key: str
    file: str
    content: Content


@dataclass(frozen=True)
class EdgePlan:
    key: str
    file: str
    draft: EdgeDraft  # src/dst hold the ends' keys until the kernel resolves them
    own_acl: dict[str, Any]


@dataclass
class GraphPlan:
    vertices: list[VertexPlan] = field(default_factory=list)
    edges: list[EdgePlan] = field(default_factory=list)


class _Problems:
    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, file: str, where: str, message: str) -> None:
        self.found.append(f"{file}: {where}: {message}")

    def raise_if_any(self) -> None:
        if self.found:
            shown = self.found[:MAX_ERRORS]
            more = len(self.found) - len(shown)
            tail = f"\n(and {more} more)" if more else ""
            raise InvalidInput(
                f"{len(self.found)} problem(s) in the graph fixtures, nothing was written:\n"
                + "\n".join(shown)
                + tail,
                field="fixtures",
            )


def _files(folder: Path) -> Iterator[tuple[str, str, Path]]:
    """(schema, name relative to ``folder``, path) for every fixture file, sorted. A file
    that is a symbolic link, or a folder outside the four, is never read."""
    count = 0
    for sub, schema in FOLDERS.items():
        where = folder / sub
        if not where.is_dir() or where.is_symlink():
            continue
        for path in sorted(where.glob("*.json")):
            count += 1
            if count > MAX_FILES:
                raise InvalidInput(f"a graph holds at most {MAX_FILES:,} files", field="fixtures")
            yield schema, f"{sub}/{path.name}", path


def _read(path: Path, name: str, problems: _Problems) -> dict[str, Any] | None:
    if path.is_symlink() or not path.is_file():
        problems.add(name, "(file)", "is not a regular file (symbolic links are not followed)")
        return None
    if path.stat().st_size > MAX_FILE_BYTES:
        problems.add(name, "(file)", f"is over {MAX_FILE_BYTES:,} bytes")
        return None
    try:
        data = load_json(path.read_text(encoding="utf-8"), name)
    except (LimitExceeded, ValueError, UnicodeDecodeError) as exc:
        problems.add(name, "(file)", f"is not valid JSON: {exc}")
        return None
    if not isinstance(data, dict):
        problems.add(name, "(file)", "must hold one JSON object")
        return None
    return data


def _schema_problems(schema: str, data: dict[str, Any], name: str, problems: _Problems) -> bool:
    errors = sorted(validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    for error in errors:
        where = ".".join(str(p) for p in error.absolute_path) or "(object)"
        problems.add(name, where, error.message)
    return not errors


def _when(raw: str) -> datetime:
    return datetime.fromisoformat(raw.replace("Z", "+00:00"))


def _acl(data: dict[str, Any]) -> Acl:
    return Acl(
        roles=tuple(data["roles_allowed"]),
        labels=tuple(data["namespaces"]),
        sensitivity=Sensitivity(data["sensitivity"]),
    )


def stricter_acl(a: Acl, b: Acl) -> Acl:
    """Who may read both: the roles both admit, every label either needs, the higher
    sensitivity. Two ends with no role in common leave the edge to curators (an empty
    role list would mean "any role": the opposite of stricter)."""
    if a.roles and b.roles:
        roles = tuple(r for r in a.roles if r in b.roles) or NOBODY_BUT_CURATORS
    else:
        roles = a.roles or b.roles
    labels = tuple(dict.fromkeys((*a.labels, *b.labels)))
    sensitivity = max(a.sensitivity, b.sensitivity, key=lambda s: s.rank)
    return Acl(roles=roles, labels=labels, sensitivity=sensitivity)


def _vertex(schema: str, data: dict[str, Any], name: str) -> VertexPlan:
    is_decision = schema == "decision"
    metadata: dict[str, Any] = {"graph_id": data["id"], "timestamp": data["timestamp"]}
    metadata |= _kept(data, ("decision_maker", "importance", "snippet"))
    extra = {k: v for k, v in (data.get("x-extra") or {}).items() if k not in KEY_REFERENCES}
    if extra:
        metadata["x-extra"] = extra
    content = Content(
        kind="decision" if is_decision else "event",
        scope=data["domain"],
        title=data["option"] if is_decision else data["summary"],
        body=data.get("rationale" if is_decision else "description", ""),
        tags=tuple(data.get("tags", ())),
        metadata=metadata,
        acl=_acl(data),
        origin=Origin.HUMAN,
        valid_from=_when(data["timestamp"]),
    )
    return VertexPlan(key=data["id"], file=name, content=content)


def _kept(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``data`` named in ``names`` that it has."""
    return {k: data[k] for k in names if k in data}


def _own_acl(data: dict[str, Any]) -> dict[str, Any]:
    return _kept(data, ("sensitivity", "roles_allowed", "namespaces"))


def _edge(
    key: str, name: str, relation: str, src: str, dst: str, metadata: dict[str, Any],
    own: dict[str, Any],
) -> EdgePlan:  # fmt: skip
    draft = EdgeDraft(type=relation, src=src, dst=dst, metadata={"graph_id": key, **metadata})
    return EdgePlan(key=key, file=name, draft=draft, own_acl=own)


def example_fixtures() -> Path:
    """The ACME example graph shipped with cairn (``cairn graph ingest --example``)."""
    return Path(str(resources.files("cairn.graph").joinpath("fixtures/acme")))


def plan_graph(folder: Path) -> GraphPlan:
    """Every vertex and edge of the fixtures in ``folder``, checked; ``InvalidInput`` names
    every problem found (up to twenty) and nothing is planned."""
    if not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder", field="fixtures")
    problems = _Problems()
    parsed: list[tuple[str, str, dict[str, Any]]] = []
    for schema, name, path in _files(folder):
        data = _read(path, name, problems)
        if data is not None and _schema_problems(schema, data, name, problems):
            parsed.append((schema, name, data))
    problems.raise_if_any()
    if not parsed:
        raise InvalidInput(
            f"{folder} holds no graph fixtures (decisions/, events/, transitions/, edges/aliases/)",
            field="fixtures",
        )
    kinds: dict[str, str] = {}
    where: dict[str, str] = {}
    for schema, name, data in parsed:
        key = data["id"]
        if key in where:
            problems.add(name, "id", f"{key!r} is also the id in {where[key]}")
            continue
        where[key] = name
        kinds[key] = schema

    def need(name: str, field_name: str, key: str, *wanted: str) -> None:
        if key not in kinds:
            problems.add(name, field_name, f"no decision or event has the id {key!r}")
        elif wanted and kinds[key] not in wanted:
            problems.add(
                name, field_name, f"{key!r} is a {kinds[key]}, not a {' or '.join(wanted)}"
            )

    plan = GraphPlan()
    planned: set[tuple[str, str, str]] = set()

    def add_edge(edge: EdgePlan) -> None:
        triple = (edge.draft.type, edge.draft.src, edge.draft.dst)
        if triple not in planned:
            planned.add(triple)
            plan.edges.append(edge)

    transitions = {d["id"]: d for s, _, d in parsed if s == "transition"}
    aliased = {(d["decision_id"], d["event_id"]) for s, _, d in parsed if s == "alias_edge"}
    for schema, name, data in parsed:
        key = data["id"]
        if schema in ("decision", "event"):
            plan.vertices.append(_vertex(schema, data, name))
        if schema == "decision":
            for i, target in enumerate(data.get("supported_by", ())):
                need(name, f"supported_by.{i}", target, "event")
            for i, target in enumerate(data.get("based_on", ())):
                need(name, f"based_on.{i}", target, "decision")
            for i, tid in enumerate(data.get("transitions", ())):
                found = transitions.get(tid)
                if found is None:
                    problems.add(name, f"transitions.{i}", f"no transition has the id {tid!r}")
                elif key not in (found["from"], found["to"]):
                    problems.add(name, f"transitions.{i}", f"{tid!r} does not touch {key!r}")
        if schema == "event":
            for i, target in enumerate(data.get("led_to", ())):
                need(name, f"led_to.{i}", target, "decision")
            alias_of = (data.get("x-extra") or {}).get("alias_of_decision")
            if alias_of is not None:
                need(name, "x-extra.alias_of_decision", str(alias_of), "decision")
                if (str(alias_of), key) not in aliased:
                    problems.add(
                        name,
                        "x-extra.alias_of_decision",
                        f"no alias edge (edges/aliases/) joins {alias_of!r} to {key!r}",
                    )
        if schema == "transition":
            need(name, "from", data["from"])
            need(name, "to", data["to"])
        if schema == "alias_edge":
            need(name, "decision_id", data["decision_id"], "decision")
            need(name, "event_id", data["event_id"], "event")
    problems.raise_if_any()

    # Order: vertices, then transitions, then the evidence links, then alias overlays.
    for schema, name, data in parsed:
        if schema == "transition":
            metadata = _kept(data, ("reason", "timestamp", "domain", "relation", "x-extra"))
            add_edge(_edge(data["id"], name, "CAUSAL_PRECEDES", data["from"], data["to"],
                           metadata, _own_acl(data)))  # fmt: skip
    for schema, name, data in parsed:
        key = data["id"]
        if schema == "decision":
            for target in data.get("supported_by", ()):
                add_edge(
                    _edge(f"{key}~supported_by~{target}", name, "SUPPORTED_BY", key, target, {}, {})
                )
            for target in data.get("based_on", ()):
                add_edge(_edge(f"{key}~based_on~{target}", name, "BASED_ON", key, target, {}, {}))
        if schema == "event":
            for target in data.get("led_to", ()):
                add_edge(
                    _edge(f"{key}~led_to~{target}", name, "CAUSAL_PRECEDES", key, target, {}, {})
                )
    for schema, name, data in parsed:
        if schema == "alias_edge":
            metadata = _kept(data, ("scope", "domain_from", "domain_to", "timestamp", "x-extra"))
            add_edge(_edge(data["id"], name, "ALIAS_OF", data["decision_id"], data["event_id"],
                           metadata, _own_acl(data)))  # fmt: skip
    return plan


def edge_acl(edge: EdgePlan, src: Acl, dst: Acl) -> Acl:
    """The edge's own ACL fields over the stricter of its two ends' ACLs."""
    base = stricter_acl(src, dst)
    own = edge.own_acl
    return Acl(
        roles=tuple(own["roles_allowed"]) if "roles_allowed" in own else base.roles,
        labels=tuple(own["namespaces"]) if "namespaces" in own else base.labels,
        sensitivity=Sensitivity(own["sensitivity"]) if "sensitivity" in own else base.sensitivity,
    )


__all__ += ["edge_acl"]
