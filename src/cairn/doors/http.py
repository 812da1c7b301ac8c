"""The HTTP door: every kernel verb under ``/v1``, as a FastAPI app.

Each route parses, authenticates the ``Authorization: Bearer`` key to a ``Principal``, makes
one ``Memory`` call and renders the result. Errors are ``ErrorBody`` JSON with the kernel's
stable ``code``; the status comes from the one table in ``_errors``. Routes are plain ``def``
functions on purpose: the kernel is synchronous (SQLite), so FastAPI runs them in its thread
pool and the event loop stays free for MCP and A2A streams.

This module builds the app; the routes live next to it, a module an area: ``http_records``,
``http_edges``, ``http_review``, ``http_admin``, ``http_retrieval``, ``http_timeline`` and
``http_graph``, all on ``http_common`` (the prefix, the key, the bodies' rules, the router)
and ``http_errors`` (every refusal as a problem document, the body size limit).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from cairn.doors.http_admin import admin_router
from cairn.doors.http_common import API_PREFIX, authenticate_http
from cairn.doors.http_edges import edges_router
from cairn.doors.http_errors import BodyLimit, error_response, install_error_handlers
from cairn.doors.http_records import lifecycle_router, records_router, versions_router
from cairn.doors.http_retrieval import retrieval_router
from cairn.doors.http_review import review_router
from cairn.errors import CairnError
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import DEFAULT_EMBEDDER, Memory
from cairn.model import KIND_MARKER
from cairn.workspace import Workspace

__all__ = [
    "API_PREFIX",
    "BodyLimit",
    "authenticate_http",
    "create_app",
    "door_health",
    "error_response",
]

log = logging.getLogger("cairn.http")


class Health(BaseModel):
    """Whether the server is up. Anyone may ask, so it says nothing about the store."""

    status: str = Field(examples=["ok"])
    ready: bool


def door_health(workspace: Workspace, memory: Memory | None) -> Health:
    """Ready only when the store answers and the principals file parses. What failed goes
    to the log, never to the (unauthenticated) caller."""
    if memory is None:
        return Health(status="starting", ready=False)
    try:
        memory.ping()
        workspace.principals()
    except CairnError as exc:
        log.error("health check failed", extra={"fields": {"error": exc.message}})
        return Health(status="unavailable", ready=False)
    return Health(status="ok", ready=True)


def describe_kinds(app: FastAPI, kinds: Sequence[str]) -> None:
    """Declare the record kinds this store's policy knows in the OpenAPI document, so that a
    schema-valid request names a kind the server takes (the kinds come from the policy file,
    not from the code)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _enumerate_kinds(generate(), list(kinds))
        return app.openapi_schema or generate()

    app.openapi = openapi  # type: ignore[method-assign]


def _enumerate_kinds(node: Any, kinds: list[str]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.pop(KIND_MARKER, False):
                item["enum"] = kinds
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def create_app(
    workspace: Workspace,
    *,
    memory: Memory | None = None,
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    embedder: str = DEFAULT_EMBEDDER,
) -> FastAPI:
    """The HTTP API alone. With no ``memory`` given the app opens and closes its own (with
    ``embedder``, "minilm" by default); ``lifespan`` lets the combined server run the other
    doors' start-up and shut-down."""
    owned = memory is None
    opened: Memory = memory if memory is not None else workspace.open_memory(embedder=embedder)

    @asynccontextmanager
    async def app_lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan():
                    yield
        finally:
            if owned:
                opened.close()

    app = FastAPI(
        title="cairn",
        version="0.1.0",
        description="Governed, citeable memory for AI agents. Every route under /v1 needs "
        "`Authorization: Bearer <api key>`.",
        lifespan=app_lifespan,
    )
    install_error_handlers(app)
    app.state.cairn_workspace = workspace
    app.include_router(records_router(opened))
    app.include_router(versions_router(opened))
    app.include_router(lifecycle_router(opened))
    app.include_router(edges_router(opened))
    app.include_router(review_router(opened))
    app.include_router(admin_router(opened))
    app.include_router(retrieval_router(opened))
    # the timeline's routes live in their own module, which builds on this one
    from cairn.doors.http_timeline import timeline_router

    app.include_router(timeline_router(opened))
    from cairn.doors.http_graph import graph_router

    app.include_router(graph_router(opened))
    describe_kinds(app, opened.record_kinds())
    # the web console, an app of its own (HTML errors, its own security headers) at /ui
    from cairn.doors.web import mount_console

    mount_console(app, workspace, opened)

    @app.get(
        "/health",
        response_model=Health,
        tags=["ops"],
        summary="Whether the server is up (no key needed; says nothing about the store)",
        responses={503: {"model": Health, "description": "Not ready"}},
    )
    def health() -> JSONResponse:
        report = door_health(workspace, opened)
        return JSONResponse(
            report.model_dump(mode="json"), status_code=200 if report.ready else 503
        )

    app.add_middleware(BodyLimit, limit=MAX_REQUEST_BYTES)

    return app
