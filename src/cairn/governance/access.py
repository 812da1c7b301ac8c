"""Who may see and change what: scope globs, roles, labels and the sensitivity ceiling.

The read rule, once: a principal reads a record when the record's scope matches one of its
scope globs and the record's ACL admits it. Curators (and admins) of a scope read everything
in it whatever the ACL says, so that no writer can lock the people who govern a scope out
of it. Reads of something a principal may not see answer "not found", never "forbidden", so
a withheld id cannot be probed for.
"""

from __future__ import annotations

import fnmatch

from cairn.errors import PermissionDenied
from cairn.model import Acl, Principal, Proposal

__all__ = [
    "AGENT_OPS",
    "acl_allows",
    "can_read",
    "can_see_proposal",
    "in_scope",
    "is_curator",
    "require_curator",
    "require_curator_of_every_scope",
    "require_op",
    "require_scope",
    "sees_everything",
]

AGENT_OPS = frozenset({"create", "update", "supersede", "link", "unlink"})


def in_scope(principal: Principal, scope: str) -> bool:
    return any(fnmatch.fnmatchcase(scope, glob) for glob in principal.scopes)


def acl_allows(principal: Principal, acl: Acl) -> bool:
    """Whether the ACL admits the principal (the scope is checked apart, by ``in_scope``)."""
    if is_curator(principal):
        return True
    if acl.roles and not set(acl.roles) & set(principal.roles):
        return False
    if "*" not in principal.labels and not set(acl.labels) <= set(principal.labels):
        return False
    return acl.sensitivity.rank <= principal.sensitivity.rank


def can_read(principal: Principal, scope: str, acl: Acl) -> bool:
    return in_scope(principal, scope) and acl_allows(principal, acl)


def is_curator(principal: Principal) -> bool:
    return principal.can_curate()


def can_see_proposal(principal: Principal, proposal: Proposal) -> bool:
    """A proposal is seen by whoever proposed it and by the curators of its scope."""
    if proposal.principal_id == principal.id:
        return True
    return is_curator(principal) and in_scope(principal, proposal.scope)


def sees_everything(principal: Principal) -> bool:
    """A curator of every scope: reads every record, proposal and audit entry."""
    return is_curator(principal) and "*" in principal.scopes


def require_curator(principal: Principal, action: str) -> None:
    if not is_curator(principal):
        raise PermissionDenied(f"only a curator may {action}; {principal.id} is not one")


def require_curator_of_every_scope(principal: Principal, action: str, why: str) -> None:
    """Refuse ``action`` to anyone but a curator of every scope (``"*"``), saying ``why``:
    for what names or counts things of every scope (the audit log, the timeline's status
    and its builds)."""
    require_curator(principal, action)
    if not sees_everything(principal):
        raise PermissionDenied(f"{why}: only a curator of every scope ('*') may {action}")


def require_op(principal: Principal, op: str) -> None:
    if op not in AGENT_OPS and not is_curator(principal):
        raise PermissionDenied(
            f"only a curator may propose '{op}' changes; agents may create, update, supersede, "
            "link and unlink"
        )


def require_scope(principal: Principal, scope: str) -> None:
    if not in_scope(principal, scope):
        raise PermissionDenied(f"{principal.id} may not write in scope {scope}", field="scope")
