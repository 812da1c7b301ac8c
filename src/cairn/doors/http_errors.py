"""Every refusal of the HTTP doors in one shape (``application/problem+json``): the
kernel's errors, a body that fails its schema, Starlette's own refusals, a crash, and a
body over the size limit, refused before a handler reads it."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.doors._errors import PROBLEM_JSON, ErrorBody, error_body, problem
from cairn.errors import CairnError, InvalidInput, PolicyError, Unauthenticated

__all__ = ["BodyLimit", "error_response", "install_error_handlers", "problem_response"]

log = logging.getLogger("cairn.http")


class _TooLarge(StarletteHTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the limit of {limit:,} bytes")


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, for every route of the app (the
    HTTP API, MCP and A2A): by ``Content-Length`` before anything is read, and by counting
    when a body streams without one. Nothing of a refused request reaches a handler."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                error = _TooLarge(self.limit)
                await _send_problem(send, problem(413, "payload_too_large", error.detail))
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised into the handler reading the body; the app's exception handler
                    # answers it like any HTTP error (FastAPI passes HTTPExceptions through).
                    raise _TooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


async def _send_problem(send: Send, body: ErrorBody) -> None:
    payload = body.model_dump_json(exclude_none=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": body.status,
            "headers": [(b"content-type", PROBLEM_JSON.encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def problem_response(body: ErrorBody, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=body.status,
        headers=headers,
        media_type=PROBLEM_JSON,
    )


def error_response(exc: CairnError) -> JSONResponse:
    if isinstance(exc, PolicyError):
        # The operator reads which file and line; the caller reads that it is broken.
        log.error("configuration error", extra={"fields": {"error": exc.message}})
    headers = (
        {"WWW-Authenticate": 'Bearer realm="cairn"'} if isinstance(exc, Unauthenticated) else None
    )
    return problem_response(error_body(exc), headers)


_HTTP_CODES = {
    400: "malformed_json",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    422: "invalid_input",
}

# Starlette's own words are fine except for 400, which FastAPI raises for any body its JSON
# parser cannot read (such as one that is not UTF-8).
_HTTP_DETAILS = {400: "the request body is not valid JSON"}


def _allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for this path (Starlette names only those of
    the first route that matched)."""
    methods: set[str] = set()
    paths: dict[str, dict[str, Any]] = request.app.openapi().get("paths", {})
    for template, item in paths.items():
        pattern = "^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, request.url.path):
            methods |= {m.upper() for m in item if m.lower() in _HTTP_METHODS}
    return sorted(methods)


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


# The tags of the bodies that are one of two shapes (``branch_by_key``): an error's location
# starts with the tag of the branch it was checked against, which the caller never wrote.
_BRANCH_TAGS = frozenset({"by", "content", "query", "record_id"})


def _where(loc: Sequence[Any]) -> list[str]:
    parts = [str(p) for p in loc if p != "body"]
    if len(parts) >= 2 and parts[0] == parts[1] and parts[0] in _BRANCH_TAGS:
        parts = parts[1:]
    return parts


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def _cairn_error(request: Request, exc: CairnError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return problem_response(
                problem(400, "malformed_json", "the request body is not valid JSON")
            )
        parts: list[str] = []
        for error in errors:
            where = ".".join(_where(error.get("loc", ())))
            message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
            parts.append(f"{where}: {message}" if where else message)
        return problem_response(problem(422, "invalid_input", "; ".join(parts) or "invalid"))

    @app.exception_handler(ValidationError)
    async def _model_refused(request: Request, exc: ValidationError) -> JSONResponse:
        # A kernel model's validator refused arguments the route's schema let through.
        return error_response(InvalidInput.from_validation(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (unreadable body, unknown path, wrong method) in our shape.
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        detail = _HTTP_DETAILS.get(exc.status_code, str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return problem_response(problem(exc.status_code, code, detail), headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        # One failing request never takes the server down; the details stay in the log.
        log.exception("request failed", extra={"fields": {"path": request.url.path}})
        return problem_response(
            problem(500, "internal_error", "internal error; the server log has the details")
        )
