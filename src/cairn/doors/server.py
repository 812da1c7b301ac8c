"""``cairn serve``: the HTTP API, MCP (streamable HTTP) and the A2A agent in one process,
and the gRPC door on a port of its own when ``grpc_port`` is given.

One ``Memory`` is opened for all doors. Routes:

- ``/v1/...``   the HTTP API (``http.create_app``)
- ``/ui``       the web console (``cairn.doors.web``), signed in with a key, session cookie
- ``/mcp``      MCP over streamable HTTP (bearer key checked here before the SDK sees it)
- ``/``         A2A JSON-RPC (POST), card at ``/.well-known/agent-card.json``
- ``/health``   readiness and the effective configuration, without secrets
- gRPC          ``cairn.timeline.v1.TimelineService``, health and reflection (``grpc_server``)

Shutdown: uvicorn turns SIGTERM / Ctrl-C into a lifespan shutdown, which stops the MCP
session manager and the gRPC door, closes the A2A task store and then the memory store.
Every write was already durable when it was acknowledged (SQLite ``synchronous=FULL``), so
nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket as socket_module
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.background import BackgroundWorker
from cairn.doors._asgi import HttpMiddleware
from cairn.doors._net import http_base
from cairn.doors.a2a_agent import build_a2a_routes
from cairn.doors.grpc_server import GrpcDoor, start_grpc_door
from cairn.doors.http import authenticate_http, create_app, error_response
from cairn.doors.mcp_server import bearer_key, build_mcp_server
from cairn.errors import CairnError, InvalidInput
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import DEFAULT_EMBEDDER
from cairn.model import Principal
from cairn.workspace import Workspace

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LIBRARY_LOGGERS",
    "build_server_app",
    "configure_logging",
    "serve",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
# the libraries' loggers that configure_logging sends through cairn's own lines
LIBRARY_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "mcp", "a2a")

log = logging.getLogger("cairn.server")


class JsonLines(logging.Formatter):
    """One JSON object per line: easy to grep, easy to ship."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            line.update(extra)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: str = "info") -> None:
    """Structured lines on stderr (stdout stays free, which matters for ``cairn mcp``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True


class AccessLog(HttpMiddleware):
    """One structured line per request: method, path, status, duration."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status = {"code": 0}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            log.info(
                "request",
                extra={
                    "fields": {
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status["code"],
                        "ms": round((time.perf_counter() - start) * 1000, 1),
                    }
                },
            )


class BearerGate:
    """Refuse a missing or wrong key with 401 before the wrapped ASGI app (the MCP door)
    sees the request, and tell the SDK who the key's principal is.

    The SDK keeps each session to the credential that opened it and answers any other as
    for a session that does not exist: named as the request's authenticated user, the
    principal is that credential, so one principal can neither use nor end another's
    session. (The SDK compares the very header value it then serves.)"""

    def __init__(self, app: ASGIApp, workspace: Workspace) -> None:
        self.app = app
        self.workspace = workspace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            principal = authenticate_http(self.workspace, bearer_key(headers))
        except CairnError as exc:
            await error_response(exc)(scope, receive, send)
            return
        # no token kept: the key was checked here, and is checked again on every tool call
        user = AuthenticatedUser(AccessToken(token="", client_id=principal.id, scopes=[]))
        await self.app({**scope, "user": user}, receive, send)


def build_server_app(
    workspace: Workspace,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedder: str = DEFAULT_EMBEDDER,
    a2a_anonymous: str | None = None,
    grpc_port: int | None = None,
    capture_socket: bool = False,
) -> FastAPI:
    """Every door on one ``Memory``. ``a2a_anonymous`` (off by default) names a low-privilege
    principal that A2A requests *without* a key act as; ``/v1`` and ``/mcp`` always need a key.
    ``grpc_port`` (off by default) starts the gRPC door on ``host:grpc_port`` with the app.
    With ``capture_socket`` the app also carries the capture socket's own app (in
    ``app.state.capture_socket_app``, for ``serve`` to route the socket to) and replays the
    hooks' spool when it starts.
    """
    memory = workspace.open_memory(embedder=embedder)
    base_url = http_base(host, port)
    config = {
        "store": str(workspace.folder),
        "host": host,
        "port": port,
        "api": f"{base_url}/v1",
        "mcp": f"{base_url}{MCP_PATH}",
        "a2a": f"{base_url}/",
        "agent_card": f"{base_url}/.well-known/agent-card.json",
        "principals": len(workspace.principals().principals),
        "embedder": embedder,
        "a2a_anonymous": a2a_anonymous,
        "grpc": f"{host}:{grpc_port}" if grpc_port is not None else None,
    }

    def principal_for(ctx: Context) -> Principal:
        # Each MCP message carries its HTTP request's headers; the key is checked every time
        # so a key revoked mid-session stops working at once.
        return authenticate_http(workspace, bearer_key(ctx.headers))

    mcp = build_mcp_server(memory, principal_for)
    # cairn's own body limit (BodyLimit) answers first and in cairn's words; the SDK's lower
    # default would refuse requests cairn accepts on every other door.
    mcp_app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, host=host, max_request_body_size=MAX_REQUEST_BYTES + 1
    )
    try:
        a2a_routes = build_a2a_routes(workspace, memory, base_url, anonymous=a2a_anonymous)
    except BaseException:
        memory.close()
        raise

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        log.info("starting", extra={"fields": config})
        grpc_door: GrpcDoor | None = None
        spool_worker: BackgroundWorker | None = None
        try:
            memory.start_indexing()  # vectors are made in the background, never in a read
            memory.start_timeline()  # and the timeline is rolled up in the background too
            if capture_socket:
                from cairn.doors.capture_socket import SpoolWorker

                spool_worker = SpoolWorker(workspace, memory)
                # what the hooks spooled while no daemon ran goes in before the first request
                await asyncio.to_thread(spool_worker.drain)
                spool_worker.start()  # and what they spool later (timeouts), every 30 s
            if grpc_port is not None:
                grpc_door = start_grpc_door(workspace, memory, host=host, port=grpc_port)
            async with mcp.session_manager.run():
                yield
        finally:
            if grpc_door is not None:
                # in-flight calls get their grace period off the event loop's thread
                await asyncio.to_thread(grpc_door.stop)
            if spool_worker is not None:
                await asyncio.to_thread(spool_worker.stop)
            memory.close()  # the memory outlives every door; close it last
            if capture_socket:
                # here, not after the server returns: uvicorn ends the process by re-raising
                # the SIGTERM it caught once shutdown is done
                from cairn.capture.local import socket_path

                socket_path(workspace.folder).unlink(missing_ok=True)
            log.info("stopped", extra={"fields": {"store": str(workspace.folder)}})

    app = create_app(workspace, memory=memory, lifespan=lifespan)
    # for serve to close when the server never starts (its lifespan is what closes it)
    app.state.memory = memory
    for route in mcp_app.routes:
        if isinstance(route, Route) and route.path == MCP_PATH:
            app.router.routes.append(Route(MCP_PATH, endpoint=BearerGate(route.app, workspace)))
    app.router.routes.extend(a2a_routes)
    app.add_middleware(AccessLog)
    if capture_socket:
        from cairn.doors.capture_socket import build_socket_app

        socket_app = build_socket_app(workspace, memory)
        socket_app.add_middleware(AccessLog)
        app.state.capture_socket_app = socket_app
    return app


def serve(
    workspace: Workspace,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    log_level: str = "info",
    embedder: str = DEFAULT_EMBEDDER,
    a2a_anonymous: str | None = None,
    grpc_port: int | None = None,
    socket: Path | None = None,
    tcp: bool = True,
) -> None:
    """Serve on ``host:port`` (unless ``tcp`` is off) and, with ``socket``, on the capture
    socket at that path (see ``cairn.doors.capture_socket``)."""
    configure_logging(log_level)
    app = build_server_app(
        workspace,
        host=host,
        port=port,
        embedder=embedder,
        a2a_anonymous=a2a_anonymous,
        grpc_port=grpc_port,
        capture_socket=socket is not None,
    )
    served: ASGIApp = app
    if socket is not None:
        from cairn.doors.capture_socket import SocketSplit

        served = SocketSplit(app, app.state.capture_socket_app, socket)
    config = uvicorn.Config(
        served,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
        lifespan="on",
    )
    listeners: list[socket_module.socket] = []
    try:
        if tcp:
            listeners.append(bind_tcp_listener(config))
        if socket is not None:
            listeners.append(bind_private_socket(socket))
    except BaseException:  # uvicorn exits the process when the port is taken
        for listener in listeners:
            listener.close()
        app.state.memory.close()
        raise  # a socket another daemon answers on is left to it, never unlinked
    try:
        uvicorn.Server(config).run(sockets=listeners)
    finally:
        for listener in listeners:
            listener.close()
        if socket is not None:
            with contextlib.suppress(FileNotFoundError):
                socket.unlink()


def bind_tcp_listener(config: uvicorn.Config) -> socket_module.socket:
    """The TCP listener uvicorn binds, re-opened so that it reports its protocol.

    uvicorn creates it with ``proto`` 0, accepted connections inherit that, and asyncio turns
    on ``TCP_NODELAY`` only for a socket that says it is TCP (uvicorn issue 3149). Without it
    every response after the first on a keep-alive connection waited ~40 ms for the client's
    delayed ACK. Opening the same descriptor again lets the kernel fill in the protocol."""
    try:
        bound = config.bind_socket()
    except SystemExit:  # uvicorn logs why (the port is taken) and exits: say it in cairn's way
        raise InvalidInput(
            f"cannot listen on {http_base(config.host, config.port)}: the address is in use "
            "(another server, or choose another --port)",
            field="port",
        ) from None
    return socket_module.socket(fileno=bound.detach())


def bind_private_socket(path: Path) -> socket_module.socket:
    """A listening Unix socket at ``path`` that only this user can connect to. A file left
    there by a daemon that died is replaced; a socket another live daemon answers on is not."""
    from cairn.capture.local import private_folder, socket_path_problem

    if (problem := socket_path_problem(path)) is not None:
        raise CairnError(problem)
    if path.exists():
        probe = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: a stale file from a daemon that died
        else:
            raise CairnError(f"another daemon already serves {path}")
        finally:
            probe.close()
    # every folder on the way owner-only, as the state folder's ``run`` fallback needs
    private_folder(path.parent)
    listener = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600: never a moment when others could connect
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(128)
    return listener
