"""Stage 1, preselect: policy first. Decide which chunks a read may see at all.

Pure: given the principal, the store's ACL and scope tables and the request, return a
``ChunkFilter`` that both recall signals apply inside their indexes, before any ranking.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cairn.errors import NotFound
from cairn.governance import access
from cairn.model import Acl, PinKind, Principal, Sensitivity, Status, VersionPin
from cairn.store.base import AclRow, ChunkFilter, Store

__all__ = [
    "Preselection",
    "ReadRequest",
    "allowed_acl_ids",
    "allowed_scope_ids",
    "preselect",
    "readable",
]

_SENSITIVITY = {s.rank: s for s in Sensitivity}


@dataclass(frozen=True)
class ReadRequest:
    scope: str | None = None  # a glob; None = every scope the principal may read
    selector: VersionPin = field(default_factory=VersionPin.head)
    kinds: tuple[str, ...] = ()
    include_drafts: bool = False
    valid_at: datetime | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    record_ids: frozenset[str] | None = None


@dataclass(frozen=True)
class Preselection:
    where: ChunkFilter
    selector_used: VersionPin


def allowed_acl_ids(principal: Principal, acls: Sequence[AclRow]) -> frozenset[int]:
    return frozenset(
        row.id
        for row in acls
        if access.acl_allows(
            principal,
            Acl(roles=row.roles, labels=row.labels, sensitivity=_SENSITIVITY[row.sensitivity]),
        )
    )


def allowed_scope_ids(
    principal: Principal, scopes: Mapping[int, str], glob: str | None
) -> frozenset[int]:
    return frozenset(
        scope_id
        for scope_id, scope in scopes.items()
        if access.in_scope(principal, scope) and (glob is None or fnmatch.fnmatchcase(scope, glob))
    )


def preselect(
    principal: Principal,
    request: ReadRequest,
    *,
    acls: Sequence[AclRow],
    scopes: Mapping[int, str],
    baseline_pins: Callable[[str], Mapping[str, str] | None],
    published_baseline: Callable[[str], str | None],
) -> Preselection:
    """Stale, rejected and archived records are never read; drafts only when asked for;
    superseded and expired versions are left out."""
    scope_ids = allowed_scope_ids(principal, scopes, request.scope)
    statuses = {Status.ACTIVE.value}
    if request.include_drafts:
        statuses.add(Status.DRAFT.value)
    selector = request.selector
    version_ids: frozenset[str] | None = None
    if selector.kind is PinKind.PUBLISHED:
        pins: set[str] = set()
        for scope_id in scope_ids:
            baseline_id = published_baseline(scopes[scope_id])
            if baseline_id is not None:
                pins.update((baseline_pins(baseline_id) or {}).values())
        version_ids = frozenset(pins)
    elif selector.kind is PinKind.BASELINE_REF:
        found = baseline_pins(selector.baseline_id or "")
        if found is None:
            raise NotFound(f"no baseline {selector.baseline_id}", field="baseline_id")
        version_ids = frozenset(found.values())
    elif selector.kind is PinKind.VERSION_REF:
        version_ids = frozenset({selector.version_id or ""})
    where = ChunkFilter(
        acl_ids=allowed_acl_ids(principal, acls),
        statuses=frozenset(statuses),
        scope_ids=scope_ids,
        kinds=frozenset(request.kinds) if request.kinds else None,
        head_only=selector.kind is PinKind.HEAD,
        version_ids=version_ids,
        record_ids=request.record_ids,
        valid_at=request.valid_at,
        created_after=request.created_after,
        created_before=request.created_before,
        # Record reads see records' chunks only; the timeline indexes its nodes in the same
        # index and searches them itself (``cairn.timeline.teleport``).
        source_kinds=frozenset({"record"}),
    )
    return Preselection(where=where, selector_used=selector)


def readable(store: Store, principal: Principal, request: ReadRequest) -> ChunkFilter:
    """What ``principal`` may read for ``request`` with the head selector: the filter every
    read that pins no baseline starts from (records, events, the timeline)."""
    return preselect(
        principal,
        request,
        acls=store.acls(),
        scopes=store.scopes(),
        baseline_pins=lambda _baseline_id: None,
        published_baseline=lambda _scope: None,
    ).where
