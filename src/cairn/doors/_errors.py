"""How the HTTP door says a kernel error: the code → status table and the problem body.

The kernel decides *what* went wrong (``CairnError.code``); a door only decides how to say
it. The CLI exits with the error class's ``exit_code``; MCP and A2A answer with the code and
the message (``[code] message``), A2A adding this module's problem body to a failed task.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel, Field

from cairn.errors import CairnError

__all__ = [
    "HTTP_STATUS",
    "PROBLEM_JSON",
    "ErrorBody",
    "error_body",
    "http_status",
    "problem",
]

# The media type of every HTTP error body (RFC 9457 problem details).
PROBLEM_JSON = "application/problem+json"


# code → HTTP status. Unknown codes fall back on their base class's entry (see http_status).
HTTP_STATUS: dict[str, int] = {
    "cairn_error": 500,
    "invalid_input": 422,
    "malformed_json": 400,
    # a broken policy or principals file is the operator's fault, not the caller's
    "policy_error": 503,
    "payload_too_large": 413,
    "not_found": 404,
    "permission_denied": 403,
    "unauthenticated": 401,
    "conflict": 409,
    "stale_proposal": 409,
    "invalid_transition": 409,
    "duplicate_content": 409,
    "supersession_cycle": 409,
    "store_error": 503,
    "internal_error": 500,
}


def _lookup(table: dict[str, int], error: CairnError, default: int) -> int:
    # Walk the class tree so a new subclass inherits its parent's mapping without an edit here.
    for cls in type(error).__mro__:
        code = getattr(cls, "code", None)
        if isinstance(code, str) and code in table:
            return table[code]
    return default


def http_status(error: CairnError) -> int:
    return _lookup(HTTP_STATUS, error, 500)


class ErrorBody(BaseModel):
    """Every HTTP error, in the shape of RFC 9457 problem details: ``status`` and its
    ``title``, a human ``detail``, and cairn's stable machine ``code`` (the same on every
    door), with the request ``field`` at fault when there is one."""

    type: str = Field(default="about:blank", description="always about:blank: see code")
    title: str = Field(examples=["Not Found"], description="the HTTP status phrase")
    status: int = Field(examples=[404])
    detail: str = Field(examples=["no record 'rec_01JABCDEF'"])
    code: str = Field(examples=["not_found"], description="cairn's error code")
    field: str | None = Field(default=None, examples=["record_id"])
    details: dict[str, Any] | None = None


def problem(
    status: int, code: str, detail: str, *, field: str | None = None, **details: Any
) -> ErrorBody:
    return ErrorBody(
        title=HTTPStatus(status).phrase,
        status=status,
        detail=detail,
        code=code,
        field=field,
        details=details or None,
    )


def error_body(error: CairnError) -> ErrorBody:
    """The problem body of a kernel error (``public_message``: never a config file's words)."""
    return problem(
        http_status(error),
        error.code,
        error.public_message,
        field=error.field,
        **error.details,
    )
