"""The errors cairn raises, one tree for every door.

    CairnError
    ├── InvalidInput          the request itself is wrong (unknown kind, bad JSON, bad field)
    │   └── PolicyError       the policy or principals file is malformed
    ├── NotFound              no such thing, or the principal may not see it (never both told apart)
    ├── PermissionDenied      identity missing/unknown, or the role lacks the permission
    │   └── Unauthenticated   no identity or an unknown key
    ├── Conflict              the world changed under the request
    │   ├── StaleProposal     the pinned version is no longer current: rebase first
    │   ├── InvalidTransition the lifecycle state machine forbids this move
    │   ├── DuplicateContent  the same content already exists in the scope
    │   └── SupersessionCycle superseding would create a cycle
    └── StoreError            the storage layer failed

Each class carries a stable ``code``; each door maps codes to its own status (HTTP status,
MCP/A2A error, CLI exit code) from one table, so the rules stay in the kernel.
"""

from __future__ import annotations

from typing import Any


class CairnError(Exception):
    code = "cairn_error"
    exit_code = 1

    def __init__(self, message: str, *, field: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field:
            body["field"] = self.field
        if self.details:
            body["details"] = self.details
        return body


class InvalidInput(CairnError):
    code = "invalid_input"
    exit_code = 2


class PolicyError(InvalidInput):
    code = "policy_error"


class NotFound(CairnError):
    code = "not_found"
    exit_code = 3


class PermissionDenied(CairnError):
    code = "permission_denied"
    exit_code = 4


class Unauthenticated(PermissionDenied):
    code = "unauthenticated"


class Conflict(CairnError):
    code = "conflict"
    exit_code = 5


class StaleProposal(Conflict):
    code = "stale_proposal"


class InvalidTransition(Conflict):
    code = "invalid_transition"


class DuplicateContent(Conflict):
    code = "duplicate_content"


class SupersessionCycle(Conflict):
    code = "supersession_cycle"


class StoreError(CairnError):
    code = "store_error"
    exit_code = 6


__all__ = [
    "CairnError",
    "Conflict",
    "DuplicateContent",
    "InvalidInput",
    "InvalidTransition",
    "NotFound",
    "PermissionDenied",
    "PolicyError",
    "StaleProposal",
    "StoreError",
    "SupersessionCycle",
    "Unauthenticated",
]
