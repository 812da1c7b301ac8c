"""The policy file: which proposals the gate approves by itself, which wait for a curator.

Rules are tried in order; the first whose ``match`` fits decides. Unknown keys and
misspelt values are refused when the file is loaded, naming the path of the offending
field, so a typo can never silently widen what agents may do.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Hashable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from cairn.errors import InvalidInput, PolicyError
from cairn.graph.roles import GraphPolicy
from cairn.model import (
    BUILTIN_KINDS,
    SYSTEM_RELATIONS,
    Acl,
    CairnModel,
    Origin,
    RelationName,
    Verdict,
)
from cairn.small_files import read_small_text

__all__ = [
    "DEFAULT_POLICY_YAML",
    "DEFAULT_RELATIONS",
    "EventPolicy",
    "IngestPolicy",
    "IngestRoot",
    "Op",
    "Policy",
    "ProposalFacts",
    "Relation",
    "Retention",
    "Rule",
    "RuleMatch",
    "evaluate",
    "load_policy",
    "load_yaml",
    "parse_policy",
    "read_config_text",
    "rule_fits",
    "yaml_problem",
]

Op = Literal["create", "update", "supersede", "transition", "publish", "link", "unlink"]


def _as_tuple(value: Any) -> Any:
    if value is None or isinstance(value, list | tuple):
        return value
    return (value,)


class RuleMatch(CairnModel):
    """Every given field must fit; a list means "any of these"."""

    op: tuple[Op, ...] | None = None
    kind: tuple[str, ...] | None = None
    origin: tuple[Origin, ...] | None = None
    role: tuple[str, ...] | None = None
    principal: tuple[str, ...] | None = None
    scope: tuple[str, ...] | None = None  # globs
    draft: bool | None = None
    relation: tuple[str, ...] | None = None  # link and unlink proposals: the edge's type
    metadata: dict[str, Any] = Field(default_factory=dict)

    _listify = field_validator(
        "op", "kind", "origin", "role", "principal", "scope", "relation", mode="before"
    )(_as_tuple)


class Rule(CairnModel):
    name: str
    match: RuleMatch = Field(default_factory=RuleMatch)
    decision: Literal["approve", "queue", "reject"]
    reason: str | None = None


class Retention(CairnModel):
    """Days after which vacuum archives records left in these states."""

    draft_days: int = Field(default=30, ge=0)
    rejected_days: int = Field(default=30, ge=0)
    stale_days: int = Field(default=90, ge=0)


class IngestRoot(CairnModel):
    """A folder whose files principals holding one of ``roles`` may ingest. ``path`` is
    relative to the project folder (the one that holds the store folder); ``.`` is the
    whole project."""

    path: str
    roles: tuple[str, ...] = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        path = PurePosixPath(value)
        if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
            raise ValueError(
                f"{value!r} must be a folder relative to the project, without '..' (e.g. docs)"
            )
        return path.as_posix()


def _project_to_curators() -> tuple[IngestRoot, ...]:
    return (IngestRoot(path=".", roles=("curator", "admin")),)


class IngestPolicy(CairnModel):
    """Where ingest may read files from, by role. Whatever the roots say, ingest never
    reads the store folder, nor dot-files and dot-folders a root does not name itself,
    and a symbolic link may not lead out of its root (``cairn.ingest.files``). Without an
    ``ingest`` section curators may ingest the project and agents nothing."""

    roots: tuple[IngestRoot, ...] = Field(default_factory=_project_to_curators)


class Relation(CairnModel):
    """One type of edge people may propose. ``causal`` relations explain why (a walk that
    answers "why" follows them); ``overlay`` relations link across levels or topics without
    being part of that story. ``from_kinds``/``to_kinds`` limit which record kinds an edge
    may join (empty: any); an undirected relation may be walked either way."""

    name: RelationName
    nature: Literal["causal", "overlay"] = "overlay"
    directed: bool = True
    from_kinds: tuple[str, ...] = ()
    to_kinds: tuple[str, ...] = ()
    description: str | None = None

    @field_validator("name")
    @classmethod
    def _not_system(cls, value: str) -> str:
        if value in SYSTEM_RELATIONS:
            raise ValueError(f"{value} is the kernel's own relation and cannot be declared")
        return value


DEFAULT_RELATIONS: tuple[Relation, ...] = (
    Relation(
        name="CAUSAL_PRECEDES",
        nature="causal",
        description="the source led to the target (a step in why something happened)",
    ),
    Relation(name="DEPENDS_ON", nature="causal", description="the source relies on the target"),
    Relation(
        name="ALIAS_OF",
        description="the source is the same matter seen from another level or team",
    ),
    Relation(name="SUPPORTS", description="the source is evidence for the target"),
    Relation(
        name="SUPPORTED_BY", description="the source (a decision) rests on the target's evidence"
    ),
    Relation(
        name="BASED_ON",
        nature="causal",
        description="the source (a decision) builds on an earlier decision",
    ),
    Relation(name="CONTRADICTS", description="the source disagrees with the target"),
    Relation(name="RELATES_TO", directed=False, description="a plain association"),
)


class EventPolicy(CairnModel):
    """Who may append events, and who may read them. Events are evidence, not governed
    knowledge: an append needs no review, but only principals holding one of ``append_roles``
    may append, and only in scopes they hold. Every event is read under ``acl`` (the
    producer cannot choose another)."""

    append_roles: tuple[str, ...] = ("agent", "curator", "admin")
    acl: Acl = Field(default_factory=Acl)


class Policy(CairnModel):
    version: Literal[1] = 1
    kinds: tuple[str, ...] = ()
    default: Literal["queue", "reject"] = "queue"
    retention: Retention = Field(default_factory=Retention)
    ingest: IngestPolicy = Field(default_factory=IngestPolicy)
    relations: tuple[Relation, ...] = DEFAULT_RELATIONS
    events: EventPolicy = Field(default_factory=EventPolicy)
    graph: GraphPolicy = Field(default_factory=GraphPolicy)
    rules: tuple[Rule, ...] = ()

    def relation(self, name: str) -> Relation:
        """The catalog's entry for ``name``; refuses a type the catalog does not declare."""
        for relation in self.relations:
            if relation.name == name:
                return relation
        raise InvalidInput(
            f"unknown relation {name!r}; known relations: "
            f"{', '.join(r.name for r in self.relations)} "
            "(declare more under 'relations' in the policy file)",
            field="type",
        )

    def check_kind(self, kind: str) -> None:
        """Refuse a kind the policy does not know (writing one, or filtering by one)."""
        if kind not in self.all_kinds:
            raise InvalidInput(
                f"unknown kind {kind!r}; known kinds: {', '.join(self.all_kinds)} "
                "(declare more under 'kinds' in the policy file)",
                field="kind",
            )

    def facts_key(self, facts: ProposalFacts) -> Hashable:
        """A key that two proposals' facts share when no rule of this policy can tell them
        apart, so that ``evaluate`` decides the same on both: a batch asks once per key.
        It holds every fact a rule looks at, and of the metadata only the keys some rule
        names: a rule compares values with ``==``, so equal values may share a key."""
        names = sorted({name for rule in self.rules for name in rule.match.metadata})
        metadata = tuple(_hashable(facts.metadata.get(name)) for name in names)
        return (
            facts.op, facts.kind, facts.origin, facts.roles, facts.principal, facts.scope,
            facts.draft, facts.relation, metadata,
        )  # fmt: skip

    def ingest_roots(self, roles: tuple[str, ...]) -> tuple[str, ...]:
        """The ingest roots open to a principal holding ``roles``."""
        return tuple(root.path for root in self.ingest.roots if set(root.roles) & set(roles))

    @model_validator(mode="after")
    def _rules_name_known_kinds(self) -> Policy:
        known = set(self.all_kinds)
        names: set[str] = set()
        for i, rule in enumerate(self.rules):
            if rule.name in names:
                raise ValueError(f"rules[{i}].name: duplicate rule name {rule.name!r}")
            names.add(rule.name)
            for kind in rule.match.kind or ():
                if kind not in known:
                    raise ValueError(
                        f"rules[{i}].match.kind: unknown kind {kind!r} "
                        f"(known: {', '.join(sorted(known))}; declare new ones under 'kinds')"
                    )
        relations: set[str] = set()
        for i, relation in enumerate(self.relations):
            if relation.name in relations:
                raise ValueError(f"relations[{i}].name: duplicate relation {relation.name!r}")
            relations.add(relation.name)
            for kind in (*relation.from_kinds, *relation.to_kinds):
                if kind not in known:
                    raise ValueError(f"relations[{i}]: unknown kind {kind!r}")
        return self

    @property
    def all_kinds(self) -> tuple[str, ...]:
        return BUILTIN_KINDS + tuple(k for k in self.kinds if k not in BUILTIN_KINDS)


class ProposalFacts(CairnModel):
    """What a rule can look at; built by the gate from the proposal and its principal."""

    op: str
    kind: str | None
    origin: Origin | None
    roles: tuple[str, ...]
    principal: str
    scope: str
    draft: bool
    metadata: dict[str, Any]
    relation: str | None = None


def _hashable(value: Any) -> Hashable:
    """A metadata value as part of a key: itself when hashable, else its JSON (equal JSON is
    an equal value; a JSON text never equals a scalar, so the two cannot meet)."""
    if value is None or isinstance(value, str | int | float):
        return value
    return ("json", json.dumps(value, sort_keys=True))


def _metadata_fits(wanted: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key, expected in wanted.items():
        value = actual.get(key)
        options = expected if isinstance(expected, list) else [expected]
        if value not in options:
            return False
    return True


def rule_fits(match: RuleMatch, facts: ProposalFacts) -> bool:
    checks = (
        match.op is None or facts.op in match.op,
        match.kind is None or facts.kind in match.kind,
        match.origin is None or facts.origin in match.origin,
        match.role is None or bool(set(match.role) & set(facts.roles)),
        match.principal is None or facts.principal in match.principal,
        match.scope is None or any(fnmatch.fnmatchcase(facts.scope, g) for g in match.scope),
        match.draft is None or facts.draft == match.draft,
        match.relation is None or facts.relation in match.relation,
        _metadata_fits(match.metadata, facts.metadata),
    )
    return all(checks)


def evaluate(policy: Policy, facts: ProposalFacts) -> tuple[Verdict, str, str | None]:
    """Return (decision, rule name, reason). The fallback rule is named ``default``."""
    for rule in policy.rules:
        if rule_fits(rule.match, facts):
            return Verdict(rule.decision), rule.name, rule.reason
    return Verdict(policy.default), "default", "no rule matched; waiting for a curator"


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(file)"
        lines.append(f"{where}: {err['msg']}")
    return "; ".join(lines)


def yaml_problem(path: Path | str, exc: yaml.YAMLError) -> str:
    """Where a YAML file is broken, by line and column, without quoting the file (it may
    hold secrets, and the message can reach a log)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{path}: not valid YAML{where}" + (f": {problem}" if problem else "")


# libyaml's parser where PyYAML was built with it: the same documents as the pure-Python
# parser (its error messages, and sometimes the line and column they name, differ a little),
# several times faster on a principals file, which a server reads on every request.
_SAFE_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load``, through libyaml where it is available. Every way the text can be
    unreadable is a ``yaml.YAMLError``, which ``yaml_problem`` describes."""
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # a safe loader either way
    except ValueError:
        # PyYAML builds a typed value (a date such as 2001-13-45) and lets the type's own
        # ValueError out; its text may quote the file, so it is not passed on.
        raise yaml.constructor.ConstructorError(
            problem="a date or number in it is out of range or malformed"
        ) from None


def parse_policy(text: str, *, source: str = "policy") -> Policy:
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        raise PolicyError(yaml_problem(source, exc)) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PolicyError(f"{source}: the top level must be a mapping")
    try:
        return Policy.model_validate(raw)
    except ValidationError as exc:
        raise PolicyError(f"{source}: {_format_errors(exc)}") from None


def load_policy(path: Path) -> Policy:
    if not path.exists():
        raise PolicyError(f"policy file {path} does not exist: run 'cairn init' to write one")
    return parse_policy(read_config_text(path), source=str(path))


def read_config_text(path: Path) -> str:
    """A policy or principals file's text; one that cannot be read, is not a regular file,
    is over ``MAX_SETTINGS_FILE_BYTES`` or is not UTF-8 is a ``PolicyError`` like any other
    broken file (never a crash, a hang or a memory blow-up on every request: a server reads
    these files again when they change, so a FIFO or ``/dev/zero`` put in their place would
    otherwise stall every request)."""
    try:
        return read_small_text(path)
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
    except OSError as exc:
        raise PolicyError(f"cannot read {path}: {exc.strerror}") from None


DEFAULT_POLICY_YAML = """\
# cairn policy: which proposals the gate approves by itself.
#
# Rules are tried top to bottom; the first whose `match` fits decides:
#   approve  commit at once (audited with the rule's name)
#   queue    wait in `cairn review list` for a curator
#   reject   refuse (audited, with the rule's reason)
# A match field may be one value or a list (any of). Fields: op (create, update, supersede,
# transition, publish, link, unlink), kind, origin (system, agent, human), role, principal,
# scope (glob), draft (true/false), relation (an edge's type, for link and unlink),
# metadata (key: value or key: [values]).
# Whatever matches no rule gets `default` (queue or reject).
# Role limits are not policy: agents can never approve, reject, archive, publish or promote.
version: 1

# Record kinds beyond the built-in decision, belief, episode, skill, fact, document.
kinds: []

default: queue

# vacuum archives drafts, rejected and stale records older than this (days).
retention:
  draft_days: 30
  rejected_days: 30
  stale_days: 90

# Which folders `cairn ingest` may read, by role. Paths are relative to the folder that holds
# the store (.cairn). Whatever is listed, ingest never reads the store folder, nor dot-files or
# dot-folders unless a root names one itself (e.g. `.github`), and a symbolic link may not
# lead out of its root. Agents may ingest nothing unless a root lists their role, e.g.
#   - path: docs
#     roles: [agent]
ingest:
  roots:
    - path: .
      roles: [curator, admin]

# The types of edge that may link records (`cairn link`). nature: causal (a step in why
# something happened) or overlay (a link across levels or topics); directed: false for a
# relation that reads the same both ways; from_kinds / to_kinds: which record kinds it may
# join (none listed: any). SUPERSEDES, ACCEPTED_AS and REBASED_TO are the kernel's own.
relations:
  - {name: CAUSAL_PRECEDES, nature: causal}
  - {name: DEPENDS_ON, nature: causal}
  - {name: ALIAS_OF, nature: overlay}
  - {name: SUPPORTS, nature: overlay}
  - {name: SUPPORTED_BY, nature: overlay}
  - {name: BASED_ON, nature: causal}
  - {name: CONTRADICTS, nature: overlay}
  - {name: RELATES_TO, nature: overlay, directed: false}

# The decision graph's role profiles (`cairn why`, /v1/graph/ask). Without a `graph`
# section the built-in staff, manager, director and exec profiles apply; see docs/graph.md
# for their fields (domains, sensitivity, edges, fields, x_extra, max_hops, downloads).
# graph:
#   version: v1
#   roles:
#     staff: {rank: 10, domains: ["acme/region_*"], sensitivity: low,
#             edges: [{type: CAUSAL_PRECEDES}], x_extra: [visibility_note]}

rules:
  - name: curators-decide
    match: {role: [curator, admin]}
    decision: approve
    reason: changes made by a curator are their own review

  - name: drafts-are-notes
    match: {op: create, draft: true}
    decision: approve
    reason: drafts are non-authoritative notes until a curator promotes them

  - name: episodes-are-history
    match: {op: create, kind: episode}
    decision: approve
    reason: episodes record what happened and carry no governance impact

  - name: skills-evolve
    match: {op: [create, update], kind: skill}
    decision: approve
    reason: procedural knowledge is low risk and versioned

  - name: low-impact-decisions
    match: {op: create, kind: decision, metadata: {impact: low}}
    decision: approve

  - name: beliefs-need-review
    match: {kind: belief}
    decision: queue
    reason: a new or changed belief may contradict what is known

  - name: high-impact-decisions
    match: {kind: decision, metadata: {impact: [high, critical]}}
    decision: queue
"""
