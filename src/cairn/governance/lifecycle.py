"""The record lifecycle, as data.

    [*]      → draft     agent candidate (any principal may record a draft)
    [*]      → active    ingest, or an accepted create proposal
    draft    → active    human approve            (curator)
    draft    → rejected  human reject             (curator)
    active   → stale     refresh detects drift    (system)
    stale    → active    refresh reactivation     (system) or human re-approve (curator)
    active   → archived  human archive            (curator)
    stale    → archived  vacuum retention         (system)
    rejected → archived  vacuum retention         (system)
    draft    → archived  vacuum retention         (system)
    archived → active    restore                  (curator)

The last line is cairn's one addition: archive is a soft delete, so a
curator must be able to undo it. Every other move is refused with ``InvalidTransition``.
"""

from __future__ import annotations

from enum import StrEnum

from cairn.errors import InvalidTransition, PermissionDenied
from cairn.model import Principal, PrincipalKind, Role, Status

__all__ = [
    "INITIAL_STATES",
    "TRANSITIONS",
    "Actor",
    "actor_of",
    "allowed_targets",
    "check_transition",
    "moves",
]


class Actor(StrEnum):
    CURATOR = "curator"
    SYSTEM = "system"


TRANSITIONS: dict[tuple[Status, Status], frozenset[Actor]] = {
    (Status.DRAFT, Status.ACTIVE): frozenset({Actor.CURATOR}),
    (Status.DRAFT, Status.REJECTED): frozenset({Actor.CURATOR}),
    (Status.ACTIVE, Status.STALE): frozenset({Actor.SYSTEM}),
    (Status.STALE, Status.ACTIVE): frozenset({Actor.SYSTEM, Actor.CURATOR}),
    (Status.ACTIVE, Status.ARCHIVED): frozenset({Actor.CURATOR}),
    (Status.STALE, Status.ARCHIVED): frozenset({Actor.SYSTEM}),
    (Status.REJECTED, Status.ARCHIVED): frozenset({Actor.SYSTEM}),
    (Status.DRAFT, Status.ARCHIVED): frozenset({Actor.SYSTEM}),
    (Status.ARCHIVED, Status.ACTIVE): frozenset({Actor.CURATOR}),
}

INITIAL_STATES: frozenset[Status] = frozenset({Status.DRAFT, Status.ACTIVE})


def actor_of(principal: Principal) -> Actor | None:
    if principal.kind is PrincipalKind.SYSTEM:
        return Actor.SYSTEM
    if principal.has_role(Role.CURATOR) or principal.has_role(Role.ADMIN):
        return Actor.CURATOR
    return None


def moves(current: Status, principal: Principal) -> tuple[Status, ...]:
    """The states ``principal`` may move a record from ``current`` to (for the doors to
    offer only what the gate would allow)."""
    actor = actor_of(principal)
    if actor is None:
        return ()
    return tuple(t for (s, t), allowed in TRANSITIONS.items() if s is current and actor in allowed)


def check_transition(current: Status, target: Status, principal: Principal) -> None:
    """Raise unless ``principal`` may move a record from ``current`` to ``target``."""
    allowed = TRANSITIONS.get((current, target))
    if allowed is None:
        moves = ", ".join(t.value for (s, t) in TRANSITIONS if s is current) or "none"
        raise InvalidTransition(
            f"{'an' if current.value[0] in 'aeiou' else 'a'} {current.value} record cannot "
            f"become {target.value} "
            f"(allowed from {current.value}: {moves})",
            field="to",
            current=current.value,
            target=target.value,
        )
    actor = actor_of(principal)
    if actor is None or actor not in allowed:
        who = " or ".join(sorted(a.value for a in allowed))
        raise PermissionDenied(
            f"only {who} may move a record from {current.value} to {target.value}",
            field="to",
        )


def allowed_targets(current: Status) -> list[Status]:
    return [t for (s, t) in TRANSITIONS if s is current]
