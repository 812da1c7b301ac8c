"""The capture socket: the door coding-agent hooks use to reach their project's daemon.

A Unix socket inside the store folder. The folder is ``0700`` and the socket ``0600``, so
only the store's owner can connect: reaching it is the proof of identity, and no key is
stored in a hook's configuration or sent with a request. What the socket may do is narrow:
the timeline's routes, acting as the principal named by ``[capture] principal`` (default
``agent``), which must exist and may not be a curator or an administrator. Requests that
came in over TCP never reach this app (``SocketSplit`` routes by the listening socket's
exact path, and refuses to guess).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from cairn.background import BackgroundWorker
from cairn.capture.local import load_capture_settings, spool_path
from cairn.capture.spool import Outcome, ReplayReport, Spool
from cairn.doors.http_common import principal_of_request
from cairn.doors.http_errors import BodyLimit, install_error_handlers
from cairn.doors.http_timeline import timeline_router
from cairn.errors import CairnError, Conflict, InvalidInput, PermissionDenied
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import Memory
from cairn.model import EventDraft, Principal
from cairn.workspace import Workspace

__all__ = [
    "SocketSplit",
    "SpoolWorker",
    "build_socket_app",
    "capture_principal",
    "replay_spool",
]

log = logging.getLogger("cairn.capture")

# roles a key-less door must never carry: they decide what others may read and keep
_PRIVILEGED = frozenset({"curator", "admin"})


def capture_principal(workspace: Workspace) -> Principal:
    """The principal the socket acts as, read afresh on every request (a principal removed
    or promoted while the daemon runs takes effect at once)."""
    wanted = load_capture_settings(workspace.folder).principal
    for entry in workspace.principals().principals:
        if entry.id == wanted:
            principal = entry.principal()
            if _PRIVILEGED & set(principal.roles):
                raise PermissionDenied(
                    f"[capture] principal {wanted} holds a curator or admin role; hooks act "
                    "without a key, so they may only act as an agent principal"
                )
            return principal
    raise PermissionDenied(f"[capture] principal {wanted} is not in the principals file")


def build_socket_app(workspace: Workspace, memory: Memory) -> FastAPI:
    app = FastAPI(title="cairn capture socket", openapi_url=None, docs_url=None, redoc_url=None)
    install_error_handlers(app)
    app.state.cairn_workspace = workspace
    app.include_router(timeline_router(memory))
    app.dependency_overrides[principal_of_request] = lambda: capture_principal(workspace)

    @app.get("/health", include_in_schema=False)
    def health() -> JSONResponse:
        # the daemon's own pid, so ``cairn daemon stop`` signals the process that answers
        return JSONResponse({"status": "ok", "ready": True, "pid": os.getpid()})

    app.add_middleware(BodyLimit, limit=MAX_REQUEST_BYTES)
    return app


class SocketSplit:
    """Requests that arrived on the capture socket go to ``socket_app``; everything else
    (TCP, lifespan) to ``app``. The socket is recognised by the exact path uvicorn reports
    as the server address for a Unix socket; anything else is TCP."""

    def __init__(self, app: ASGIApp, socket_app: ASGIApp, path: Path) -> None:
        self.app = app
        self.socket_app = socket_app
        self.path = str(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") if scope["type"] == "http" else None
        if server is not None and server[1] is None and server[0] == self.path:
            await self.socket_app(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def replay_spool(workspace: Workspace, memory: Memory) -> ReplayReport:
    """Send every event the hooks spooled while the daemon was down (the daemon does this
    when it starts), straight into the kernel, oldest first."""
    settings = load_capture_settings(workspace.folder)

    def send(events: list[dict[str, object]]) -> tuple[Outcome, str]:
        try:
            principal = capture_principal(workspace)
            drafts = [EventDraft.model_validate(e) for e in events]
            memory.append_events(drafts, principal=principal)
        except Conflict as exc:
            return Outcome.CONFLICT, exc.message
        except PermissionDenied as exc:
            return Outcome.DENIED, exc.message
        except InvalidInput as exc:
            return Outcome.INVALID, exc.message
        except ValueError as exc:  # pydantic's ValidationError
            return Outcome.INVALID, str(exc)[:300]
        except CairnError as exc:
            return Outcome.UNAVAILABLE, exc.message
        return Outcome.STORED, ""

    spool = Spool(spool_path(workspace.folder), max_bytes=settings.spool_max_bytes)
    return spool.replay(send)


class SpoolWorker(BackgroundWorker):
    """Drains the hooks' spool into the kernel: once when the daemon starts, then every
    ``poll`` seconds (hooks spool while the daemon is up too, when it is slow to answer; and
    a hook never replays a large spool itself). A failing replay is logged and retried; it
    never keeps the daemon from serving."""

    def __init__(self, workspace: Workspace, memory: Memory, *, poll: float = 30.0) -> None:
        self._workspace = workspace
        self._memory = memory
        super().__init__(
            "cairn-spool",
            self._pass,
            poll=poll,
            failure="spool replay failed; retrying at the next wake-up",
        )

    def drain(self) -> None:
        try:
            self._pass()
        except Exception:  # the daemon must start anyway; the next pass retries
            log.exception("spool replay failed")

    def _pass(self) -> bool:
        settings = load_capture_settings(self._workspace.folder)
        if not Spool(
            spool_path(self._workspace.folder), max_bytes=settings.spool_max_bytes
        ).pending():
            return False
        report = replay_spool(self._workspace, self._memory)
        log.info("spool replayed", extra={"fields": vars(report)})
        return False  # what was kept waits for the next pass, not a tight loop
