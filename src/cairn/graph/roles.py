"""Role profiles: how far each layer of an organisation may walk the decision graph and how
much of what it reaches it may read.

A profile names the domains (scope globs) a role reads, its sensitivity ceiling, the edge
types it may walk and in which direction (optionally only between given domains), which
fields it sees (whole records, or headers only in some domains), which ``x-extra`` keys
and which downloads. Profiles live in the policy file under ``graph.roles``; the defaults
below are the staff / manager / director / exec picture of an organisation with a corporate
level, a product level and regions. A profile's ``policy_key`` is the hash of its canonical
JSON, so a client can tell which profile it was answered under and a cache keyed by it is
never shared between two profiles.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from typing import Annotated, Literal

from pydantic import Field, model_validator

from cairn.model import CairnModel, Direction, RelationName, Sensitivity

__all__ = [
    "DEFAULT_ROLES",
    "EdgeRule",
    "FieldRule",
    "GraphPolicy",
    "RoleProfile",
    "glob_within",
]

Download = Literal["bundle_view", "bundle_full"]
Glob = Annotated[str, Field(min_length=1, max_length=200)]
RoleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
# A walk of more than three hops answers no "why" question better and grows quickly.
MAX_GRAPH_HOPS = 3


def glob_within(inner: str, outer: str) -> bool:
    """Whether every scope ``inner`` matches is also matched by ``outer``, as far as a glob
    can be read as text: ``acme/region_emea`` and ``acme/region_e*`` are within
    ``acme/region_*``, ``acme/*`` is not. Used to refuse a header that would widen a role;
    reading the glob as text can only refuse too much, never admit too much, because ``*``
    in ``inner`` is matched by ``outer`` only where ``outer`` itself has a ``*``."""
    return fnmatch.fnmatchcase(inner, outer) and "[" not in inner and "?" not in inner


class EdgeRule(CairnModel):
    """One edge type a role may walk. ``direction`` is taken from the anchor's side: ``out``
    follows the edge from its source to its target, ``in`` the other way, ``both`` either.
    ``from_domains`` / ``to_domains`` (globs on the edge's source and target scopes) limit
    it further: ``ALIAS_OF`` only from product to a region, say."""

    type: RelationName
    direction: Direction = Direction.BOTH
    from_domains: tuple[Glob, ...] = ()
    to_domains: tuple[Glob, ...] = ()

    def admits(self, src_scope: str, dst_scope: str) -> bool:
        def fits(scope: str, globs: tuple[str, ...]) -> bool:
            return not globs or any(fnmatch.fnmatchcase(scope, g) for g in globs)

        return fits(src_scope, self.from_domains) and fits(dst_scope, self.to_domains)


class FieldRule(CairnModel):
    """How much of a record in ``domains`` a role sees: all of it, or its header only
    (title and date: no rationale, no description, no ``x-extra``)."""

    domains: tuple[Glob, ...] = Field(min_length=1)
    show: Literal["full", "headers"]


class RoleProfile(CairnModel):
    """What one role may walk and read. ``rank`` orders roles from the narrowest up: a
    caller may ask as a role of lower or equal rank than its own, never higher."""

    rank: int = Field(ge=0, le=100)
    domains: tuple[Glob, ...] = Field(min_length=1)
    sensitivity: Sensitivity
    edges: tuple[EdgeRule, ...] = ()
    fields: tuple[FieldRule, ...] = ()
    x_extra: tuple[Annotated[str, Field(min_length=1, max_length=100)], ...] = ()
    max_hops: int = Field(default=1, ge=1, le=MAX_GRAPH_HOPS)
    # Per hop, at most this many edges of one type are taken (the nearest, by date), so a
    # walk beyond one hop cannot explode through a hub.
    per_type_cap: int = Field(default=25, ge=1, le=500)
    downloads: tuple[Download, ...] = ("bundle_view",)
    description: str | None = None

    def in_domain(self, scope: str) -> bool:
        return any(fnmatch.fnmatchcase(scope, glob) for glob in self.domains)

    def shows(self, scope: str) -> Literal["full", "headers"]:
        """The first field rule whose domains match ``scope`` decides; none: full."""
        for rule in self.fields:
            if any(fnmatch.fnmatchcase(scope, glob) for glob in rule.domains):
                return rule.show
        return "full"

    def edge_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(rule.type for rule in self.edges))


class GraphPolicy(CairnModel):
    """The ``graph`` section of the policy file: the role profiles and the version clients
    name in ``X-Policy-Version``."""

    version: Annotated[str, Field(min_length=1, max_length=40)] = "v1"
    roles: dict[RoleName, RoleProfile] = Field(default_factory=lambda: dict(DEFAULT_ROLES))

    @model_validator(mode="after")
    def _ranks_distinct(self) -> GraphPolicy:
        ranks = [profile.rank for profile in self.roles.values()]
        if len(ranks) != len(set(ranks)):
            raise ValueError("graph.roles: two roles share a rank; give each its own")
        return self

    def profile(self, role: str) -> RoleProfile | None:
        return self.roles.get(role)

    def policy_key(self, role: str) -> str:
        """The hash of ``role``'s profile as the policy states it (with its name and the
        policy version), in the form clients send back in ``X-Policy-Key``."""
        profile = self.roles[role]
        canonical = json.dumps(
            {"role": role, "version": self.version, "profile": profile.model_dump(mode="json")},
            sort_keys=True,
            separators=(",", ":"),
        )
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def best_role(self, held: tuple[str, ...]) -> str | None:
        """The highest-ranked profile among the roles a principal holds."""
        mine = [name for name in self.roles if name in held]
        return max(mine, key=lambda name: self.roles[name].rank) if mine else None


_CAUSAL = "CAUSAL_PRECEDES"
_EVIDENCE = ("SUPPORTED_BY", "BASED_ON")

_DIRECTOR = RoleProfile(
    rank=30,
    description="directors: the whole company, KPIs included",
    domains=("acme/*",),
    sensitivity=Sensitivity.HIGH,
    edges=(
        EdgeRule(type=_CAUSAL),
        *(EdgeRule(type=t) for t in _EVIDENCE),
        EdgeRule(type="ALIAS_OF"),
    ),
    x_extra=("visibility_note", "kpis", "kpi_tracking_id", "alias_of_decision"),
    max_hops=2,
    downloads=("bundle_view", "bundle_full"),
)

DEFAULT_ROLES: dict[str, RoleProfile] = {
    "staff": RoleProfile(
        rank=10,
        description="individual contributors: their region's story, with product directives "
        "seen as the local events they became",
        domains=("acme/region_*",),
        sensitivity=Sensitivity.LOW,
        edges=(
            EdgeRule(type=_CAUSAL, from_domains=("acme/region_*",), to_domains=("acme/region_*",)),
            *(EdgeRule(type=t, to_domains=("acme/region_*",)) for t in _EVIDENCE),
            EdgeRule(
                type="ALIAS_OF",
                direction=Direction.OUT,
                from_domains=("acme/product",),
                to_domains=("acme/region_*",),
            ),
        ),
        x_extra=("visibility_note",),
    ),
    "manager": RoleProfile(
        rank=20,
        description="managers: product and regions in full, corporate decisions as headers",
        domains=("acme/corporate", "acme/product", "acme/region_*"),
        sensitivity=Sensitivity.MEDIUM,
        edges=(
            EdgeRule(
                type=_CAUSAL,
                from_domains=("acme/product", "acme/region_*"),
                to_domains=("acme/product", "acme/region_*"),
            ),
            *(EdgeRule(type=t) for t in _EVIDENCE),
            EdgeRule(
                type="ALIAS_OF",
                direction=Direction.OUT,
                from_domains=("acme/corporate", "acme/product"),
                to_domains=("acme/product", "acme/region_*"),
            ),
        ),
        fields=(FieldRule(domains=("acme/corporate",), show="headers"),),
        x_extra=("visibility_note",),
    ),
    "director": _DIRECTOR,
    "exec": _DIRECTOR.model_copy(update={"rank": 40, "description": "executives: as directors"}),
}
