"""Who may see and change what: scope globs, roles, labels and the sensitivity ceiling.

Reads of something a principal may not see answer "not found", never "forbidden", so a
withheld id cannot be probed for.
"""

from __future__ import annotations

import fnmatch

from cairn.errors import PermissionDenied
from cairn.model import Acl, Principal

AGENT_OPS = frozenset({"create", "update", "supersede"})


def in_scope(principal: Principal, scope: str) -> bool:
    return any(fnmatch.fnmatchcase(scope, glob) for glob in principal.scopes)


def acl_allows(principal: Principal, acl: Acl) -> bool:
    if acl.roles and not set(acl.roles) & set(principal.roles):
        return False
    if "*" not in principal.labels and not set(acl.labels) <= set(principal.labels):
        return False
    return acl.sensitivity.rank <= principal.sensitivity.rank


def can_read(principal: Principal, scope: str, acl: Acl) -> bool:
    return in_scope(principal, scope) and acl_allows(principal, acl)


def is_curator(principal: Principal) -> bool:
    return principal.can_curate()


def require_curator(principal: Principal, action: str) -> None:
    if not is_curator(principal):
        raise PermissionDenied(f"only a curator may {action}; {principal.id} is not one")


def require_op(principal: Principal, op: str) -> None:
    if op not in AGENT_OPS and not is_curator(principal):
        raise PermissionDenied(
            f"only a curator may propose '{op}' changes; agents may create, update and supersede"
        )


def require_scope(principal: Principal, scope: str) -> None:
    if not in_scope(principal, scope):
        raise PermissionDenied(f"{principal.id} may not write in scope {scope}", field="scope")
