"""The policy passport and the view it yields: who is asking, as which role, and what that
lets one graph request read.

The authenticated principal is the ceiling; a passport (the ``X-User-*`` / ``X-Policy-*``
headers of the HTTP door, or the role a CLI or MCP caller asks for) can only narrow it. A
header naming a role the principal does not hold, a namespace it does not hold, a wider
domain, an edge type or more hops than the role allows is refused, naming the header; a
missing or malformed required header is refused too (fail closed). The sensitivity ceiling
is the lowest of the principal's, the role's and the header's.

The view's ``reader`` is a principal narrowed to exactly the role (no curator or admin
role survives, so the curators' "read everything in my scope" never reaches a graph
answer), the namespaces and the ceiling: the pre-selector reads every vertex and edge
through it with the kernel's one read rule. A caller may ask as a role ranked below its
own that its key does not hold (a manager asking what staff would see); record ACLs list
roles without ranks, so the key's own principal (``holder``) must admit a vertex or edge
as well (``GraphView.reads``): asking as another role never reads what the key may not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cairn.errors import InvalidInput, PermissionDenied
from cairn.governance import access
from cairn.graph.roles import MAX_GRAPH_HOPS, EdgeRule, GraphPolicy, RoleProfile, glob_within
from cairn.model import Acl, Principal, PrincipalKind, Sensitivity

__all__ = [
    "OPTIONAL_HEADERS",
    "REQUIRED_HEADERS",
    "GraphView",
    "Passport",
    "parse_passport",
    "view_for",
]

REQUIRED_HEADERS = (
    "X-User-Id",
    "X-User-Roles",
    "X-User-Namespaces",
    "X-Policy-Version",
    "X-Policy-Key",
    "X-Request-Id",
    "X-Trace-Id",
)
OPTIONAL_HEADERS = ("X-Domain-Scopes", "X-Edge-Allow", "X-Max-Hops", "X-Sensitivity-Ceiling")

_TOKEN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/*@-]{0,199}$")
_MAX_ITEMS = 50


@dataclass(frozen=True)
class Passport:
    """The headers of one request, parsed but not yet checked against the principal."""

    user_id: str
    roles: tuple[str, ...]
    namespaces: tuple[str, ...]
    policy_version: str
    policy_key: str
    request_id: str
    trace_id: str
    domain_scopes: tuple[str, ...] | None = None
    edge_allow: tuple[str, ...] | None = None
    max_hops: int | None = None
    sensitivity_ceiling: Sensitivity | None = None


@dataclass(frozen=True)
class GraphView:
    """What one graph request may read: the narrowed reader, the role's profile, the domains
    and edge rules after the passport, and the names the request is traced under."""

    role: str
    profile: RoleProfile
    reader: Principal
    domains: tuple[str, ...]
    edges: tuple[EdgeRule, ...]
    max_hops: int
    policy_key: str
    policy_version: str
    user_id: str
    holder: Principal  # the key's principal: the view never reads what it may not
    request_id: str | None = None
    trace_id: str | None = None

    def in_domain(self, scope: str) -> bool:
        return self.profile.in_domain(scope) and (
            not self.domains or any(glob_within(scope, glob) for glob in self.domains)
        )

    def holder_admits(self, acl: Acl) -> bool:
        """Whether the key's own principal may read what ``acl`` guards (the role's reader
        must be admitted too: ``reads``)."""
        return access.acl_allows(self.holder, acl)

    def reads(self, scope: str, acl: Acl) -> bool:
        """Whether one request of this view may read a vertex or edge of ``scope`` under
        ``acl``: inside the view's domains, admitted to the role's reader and to the key."""
        return (
            self.in_domain(scope)
            and access.can_read(self.reader, scope, acl)
            and self.holder_admits(acl)
        )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.lower())
    return value.strip() if value is not None else None


def _items(name: str, raw: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in raw.split(",") if part.strip())
    if not items or len(items) > _MAX_ITEMS or not all(_TOKEN.match(i) for i in items):
        raise InvalidInput(
            f"{name} must be a comma-separated list of 1 to {_MAX_ITEMS} names", field=name
        )
    return items


def _one(name: str, raw: str) -> str:
    if not _TOKEN.match(raw):
        raise InvalidInput(f"{name} must be one name of at most 200 characters", field=name)
    return raw


def parse_passport(headers: Mapping[str, str]) -> Passport:
    """The passport in ``headers``, or ``InvalidInput`` naming the first header that is
    missing or malformed."""
    for name in REQUIRED_HEADERS:
        if not _header(headers, name):
            raise InvalidInput(f"the {name} header is required for graph requests", field=name)

    def required(name: str) -> str:
        value = _header(headers, name)
        assert value is not None
        return value

    def optional(name: str) -> str | None:
        value = _header(headers, name)
        return value or None

    hops_raw = optional("X-Max-Hops")
    max_hops = None
    if hops_raw is not None:
        if not hops_raw.isdigit() or not 1 <= int(hops_raw) <= MAX_GRAPH_HOPS:
            raise InvalidInput(
                f"X-Max-Hops must be a whole number from 1 to {MAX_GRAPH_HOPS}",
                field="X-Max-Hops",
            )
        max_hops = int(hops_raw)
    ceiling_raw = optional("X-Sensitivity-Ceiling")
    ceiling = None
    if ceiling_raw is not None:
        try:
            ceiling = Sensitivity(ceiling_raw.lower())
        except ValueError:
            raise InvalidInput(
                "X-Sensitivity-Ceiling must be low, medium or high", field="X-Sensitivity-Ceiling"
            ) from None
    scopes = optional("X-Domain-Scopes")
    edges = optional("X-Edge-Allow")
    return Passport(
        user_id=_one("X-User-Id", required("X-User-Id")),
        roles=_items("X-User-Roles", required("X-User-Roles")),
        namespaces=_items("X-User-Namespaces", required("X-User-Namespaces")),
        policy_version=_one("X-Policy-Version", required("X-Policy-Version")),
        policy_key=_one("X-Policy-Key", required("X-Policy-Key")),
        request_id=_one("X-Request-Id", required("X-Request-Id")),
        trace_id=_one("X-Trace-Id", required("X-Trace-Id")),
        domain_scopes=_items("X-Domain-Scopes", scopes) if scopes else None,
        edge_allow=_items("X-Edge-Allow", edges) if edges else None,
        max_hops=max_hops,
        sensitivity_ceiling=ceiling,
    )


def _lowest(*levels: Sensitivity | None) -> Sensitivity:
    return min((level for level in levels if level is not None), key=lambda s: s.rank)


def _role(
    policy: GraphPolicy, principal: Principal, asked: tuple[str, ...] | None, field: str
) -> str:
    """The role a request runs as: the principal's highest graph role, or the highest one
    it asks for, which must be held and may not rank above what the principal holds."""
    own = policy.best_role(principal.roles)
    if own is None:
        raise PermissionDenied(
            f"{principal.id} holds no graph role ({', '.join(policy.roles)}); "
            "give its key one to ask the decision graph",
            field=field,
        )
    if not asked:
        return own
    unknown = [role for role in asked if role not in policy.roles]
    if unknown:
        raise InvalidInput(f"unknown graph role {unknown[0]!r}", field=field)
    ceiling = policy.roles[own].rank
    for role in asked:
        if policy.roles[role].rank > ceiling or (
            role not in principal.roles and policy.roles[role].rank == ceiling
        ):
            raise PermissionDenied(f"{principal.id} may not ask as {role}", field=field)
    return max(asked, key=lambda role: policy.roles[role].rank)


def view_for(
    policy: GraphPolicy,
    principal: Principal,
    *,
    role: str | None = None,
    passport: Passport | None = None,
) -> GraphView:
    """The view one graph request reads through. ``role`` (CLI ``--as``, MCP) and the
    ``passport`` (HTTP) can only narrow what ``principal`` may read."""
    if principal.kind is PrincipalKind.SYSTEM:
        raise PermissionDenied("the decision graph answers people and agents, not the system")
    if passport is not None and passport.user_id != principal.id:
        raise PermissionDenied(
            "X-User-Id does not name the principal of the key", field="X-User-Id"
        )
    asked = passport.roles if passport is not None else ((role,) if role else None)
    field = "X-User-Roles" if passport is not None else "role"
    name = _role(policy, principal, asked, field)
    profile = policy.roles[name]
    key = policy.policy_key(name)

    labels = tuple(principal.labels)
    domains: tuple[str, ...] = ()
    edges = profile.edges
    max_hops = profile.max_hops
    ceiling = _lowest(principal.sensitivity, profile.sensitivity)
    if passport is not None:
        if passport.policy_version != policy.version:
            raise PermissionDenied(
                f"X-Policy-Version {passport.policy_version!r} is not the policy in force "
                f"({policy.version})",
                field="X-Policy-Version",
            )
        if passport.policy_key != key:
            raise PermissionDenied(
                f"X-Policy-Key is not the key of the {name} profile in force",
                field="X-Policy-Key",
            )
        if "*" not in principal.labels:
            wider = [ns for ns in passport.namespaces if ns not in principal.labels]
            if wider:
                raise PermissionDenied(
                    f"X-User-Namespaces names {wider[0]!r}, which the key does not hold",
                    field="X-User-Namespaces",
                )
        labels = passport.namespaces
        if passport.domain_scopes is not None:
            for glob in passport.domain_scopes:
                if not any(glob_within(glob, mine) for mine in profile.domains):
                    raise PermissionDenied(
                        f"X-Domain-Scopes names {glob!r}, wider than the {name} role's domains",
                        field="X-Domain-Scopes",
                    )
            domains = passport.domain_scopes
        if passport.edge_allow is not None:
            allowed = profile.edge_types()
            for edge_type in passport.edge_allow:
                if edge_type not in allowed:
                    raise PermissionDenied(
                        f"X-Edge-Allow names {edge_type}, which the {name} role may not walk",
                        field="X-Edge-Allow",
                    )
            edges = tuple(rule for rule in profile.edges if rule.type in passport.edge_allow)
        if passport.max_hops is not None:
            if passport.max_hops > profile.max_hops:
                raise PermissionDenied(
                    f"X-Max-Hops {passport.max_hops} is more than the {name} role's "
                    f"{profile.max_hops}",
                    field="X-Max-Hops",
                )
            max_hops = passport.max_hops
        ceiling = _lowest(ceiling, passport.sensitivity_ceiling)
    reader = Principal(
        id=principal.id,
        kind=principal.kind,
        roles=(name,),
        scopes=principal.scopes,
        labels=labels,
        sensitivity=ceiling,
        purpose=principal.purpose,
    )
    return GraphView(
        role=name,
        profile=profile,
        reader=reader,
        domains=domains,
        edges=edges,
        max_hops=max_hops,
        policy_key=key,
        policy_version=policy.version,
        user_id=principal.id,
        holder=principal,
        request_id=passport.request_id if passport else None,
        trace_id=passport.trace_id if passport else None,
    )
