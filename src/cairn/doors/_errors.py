"""How the network doors say a kernel error: the code → HTTP status and code → gRPC status
tables, and the HTTP problem body.

The kernel decides *what* went wrong (``CairnError.code``); a door only decides how to say
it. The CLI exits with the error class's ``exit_code``; MCP and A2A answer with the code and
the message (``[code] message``), A2A adding this module's problem body to a failed task;
the gRPC door answers with the status of ``GRPC_STATUS``.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from cairn.errors import (
    CairnError,
    Conflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    StoreError,
    Unauthenticated,
    error_class,
)

__all__ = [
    "GRPC_STATUS",
    "HTTP_STATUS",
    "PROBLEM_JSON",
    "STATUS_ERRORS",
    "ErrorBody",
    "error_body",
    "error_from_problem",
    "grpc_status",
    "http_status",
    "problem",
]

T = TypeVar("T")

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
    "copied_meanwhile": 409,
    "supersession_cycle": 409,
    "store_error": 503,
    "internal_error": 500,
}


# HTTP status → what a client raises for an error code it does not know: the HTTP door's own
# refusals (malformed_json, method_not_allowed, …) and codes of a newer server. Each is the
# most general class ``HTTP_STATUS`` gives that status (400 and 405 are bad requests too).
STATUS_ERRORS: dict[int, type[CairnError]] = {
    400: InvalidInput,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: InvalidInput,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    503: StoreError,
}


# code → the name of a ``grpc.StatusCode`` (names, so that this module needs no grpcio), after
# the usual mapping of HTTP statuses onto gRPC's: 409 is ABORTED, or ALREADY_EXISTS and
# FAILED_PRECONDITION where those say more.
GRPC_STATUS: dict[str, str] = {
    "cairn_error": "INTERNAL",
    "invalid_input": "INVALID_ARGUMENT",
    "malformed_json": "INVALID_ARGUMENT",
    "policy_error": "UNAVAILABLE",
    # what grpcio itself answers to a message over the size limit
    "payload_too_large": "RESOURCE_EXHAUSTED",
    "not_found": "NOT_FOUND",
    "permission_denied": "PERMISSION_DENIED",
    "unauthenticated": "UNAUTHENTICATED",
    "conflict": "ABORTED",
    "stale_proposal": "ABORTED",
    "invalid_transition": "FAILED_PRECONDITION",
    "duplicate_content": "ALREADY_EXISTS",
    "copied_meanwhile": "ABORTED",
    "supersession_cycle": "FAILED_PRECONDITION",
    "store_error": "UNAVAILABLE",
    "internal_error": "INTERNAL",
}


def _lookup(table: Mapping[str, T], error: CairnError, default: T) -> T:
    # Walk the class tree so a new subclass inherits its parent's mapping without an edit here.
    for cls in type(error).__mro__:
        code = getattr(cls, "code", None)
        if isinstance(code, str) and code in table:
            return table[code]
    return default


def http_status(error: CairnError) -> int:
    return _lookup(HTTP_STATUS, error, 500)


def grpc_status(error: CairnError) -> str:
    """The name of the ``grpc.StatusCode`` a kernel error is answered with."""
    return _lookup(GRPC_STATUS, error, "INTERNAL")


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


def error_from_problem(status: int, body: Mapping[str, Any] | None) -> CairnError:
    """The kernel error a problem body stands for, raised again on the client's side: the
    class of its ``code`` (so ``except cairn.NotFound`` works over HTTP too), else the class
    ``STATUS_ERRORS`` gives the status, else ``CairnError``. The server's own code is kept
    on the error (``malformed_json`` stays ``malformed_json``, an ``InvalidInput``)."""
    body = body or {}
    code = body.get("code")
    detail = body.get("detail")
    field = body.get("field")
    details = body.get("details")
    cls = error_class(code) if isinstance(code, str) else None
    if cls is None:
        cls = STATUS_ERRORS.get(status, CairnError)
    message = detail if isinstance(detail, str) and detail else f"the server answered {status}"
    error = cls(message, field=field if isinstance(field, str) else None)
    if isinstance(details, dict):
        error.details = details
    if isinstance(code, str) and code != cls.code:
        error.code = code
    return error
