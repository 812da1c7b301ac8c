"""The errors cairn raises, one tree for every door.

    CairnError
    ├── InvalidInput          the request itself is wrong (unknown kind, bad JSON, bad field)
    │   ├── PolicyError       the policy or principals file is malformed
    │   └── PayloadTooLarge   the request is bigger than a door takes
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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class CairnError(Exception):
    """Every error cairn raises: ``code`` names the class of problem, ``message`` says what is
    wrong, ``field`` where."""

    code = "cairn_error"
    exit_code = 1

    def __init__(self, message: str, *, field: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.details = details

    @property
    def public_message(self) -> str:
        """What a door may tell a remote caller; ``message`` is for logs and the CLI."""
        return self.message

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.public_message}
        if self.field:
            body["field"] = self.field
        if self.details:
            body["details"] = self.details
        return body


class InvalidInput(CairnError):
    """The input is wrong (a bad value, a size or depth over a limit); nothing was written."""

    code = "invalid_input"
    exit_code = 2

    @classmethod
    def from_validation(cls, exc: ValidationError, *, prefix: str = "") -> InvalidInput:
        """A pydantic refusal in cairn's words: ``field: message; …``, naming the first
        field, with no input echoed and no links to pydantic's documentation."""
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        first = errors[0]["loc"] if errors else ()
        field = ".".join(str(p) for p in first if p != "body") or None
        return cls(prefix + describe_validation(exc), field=field)


def describe_validation(exc: ValidationError) -> str:
    parts: list[str] = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(p) for p in error["loc"] if p != "body")
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts) or "invalid input"


class PolicyError(InvalidInput):
    """The operator's policy or principals file is broken. The message names the file and
    line for the operator; remote callers get ``public_message``, which quotes neither."""

    code = "policy_error"

    @property
    def public_message(self) -> str:
        return "the server's configuration could not be read; its operator should check the log"


class NotFound(CairnError):
    """No such thing, or none the caller may see (the two are never told apart)."""

    code = "not_found"
    exit_code = 3


class PermissionDenied(CairnError):
    """The caller may not do this."""

    code = "permission_denied"
    exit_code = 4


class Unauthenticated(PermissionDenied):
    """No key, or a key that is unknown or revoked."""

    code = "unauthenticated"


class Conflict(CairnError):
    """The change clashes with the store's state (a stale pin, a duplicate, a transition not
    allowed)."""

    code = "conflict"
    exit_code = 5


class StaleProposal(Conflict):
    """The proposal was made against a version that is no longer the head: rebase it."""

    code = "stale_proposal"


class InvalidTransition(Conflict):
    code = "invalid_transition"


class DuplicateContent(Conflict):
    code = "duplicate_content"


class CopiedMeanwhile(Conflict):
    """A copy of the content was stored between the gate's duplicate check and its commit.
    The gate then decides the change once more (``Gate``), so a caller meets this only when
    copies keep arriving."""

    code = "copied_meanwhile"


class SupersessionCycle(Conflict):
    code = "supersession_cycle"


class PayloadTooLarge(InvalidInput):
    """The request is larger than cairn accepts."""

    code = "payload_too_large"


class StoreError(CairnError):
    """The database failed or is unreachable."""

    code = "store_error"
    exit_code = 6


def error_class(code: str) -> type[CairnError] | None:
    """The error class whose ``code`` is ``code`` (of those loaded), or None: how a client
    turns the code a door answered with back into the exception the kernel raised."""
    stack: list[type[CairnError]] = [CairnError]
    while stack:
        cls = stack.pop()
        if cls.code == code:
            return cls
        stack.extend(cls.__subclasses__())
    return None


__all__ = [
    "CairnError",
    "Conflict",
    "CopiedMeanwhile",
    "DuplicateContent",
    "InvalidInput",
    "InvalidTransition",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "PolicyError",
    "StaleProposal",
    "StoreError",
    "SupersessionCycle",
    "Unauthenticated",
    "describe_validation",
    "error_class",
]
