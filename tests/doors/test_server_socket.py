"""The TCP listener ``cairn serve`` hands to uvicorn: every connection it accepts sends small
answers at once (``TCP_NODELAY``). Without it each response after the first on a keep-alive
connection waited ~40 ms for the client's delayed ACK: five times the whole request."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
import uvicorn

from cairn.doors import server as server_module
from cairn.workspace import Workspace


class _Accepted(asyncio.Protocol):
    """Records the accepted socket's TCP_NODELAY as asyncio left it, then hangs up."""

    def __init__(self, seen: asyncio.Future[int]) -> None:
        self.seen = seen

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        accepted: socket.socket = transport.get_extra_info("socket")
        self.seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        transport.close()


async def _nodelay_of_a_connection_to(listener: socket.socket) -> int:
    """Serve ``listener`` with asyncio (as uvicorn does), connect once, and say whether the
    accepted connection has TCP_NODELAY."""
    loop = asyncio.get_running_loop()
    seen: asyncio.Future[int] = loop.create_future()
    server = await loop.create_server(lambda: _Accepted(seen), sock=listener)
    async with server:
        host, port = listener.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        flag = await asyncio.wait_for(seen, timeout=10)
        writer.close()
        return flag


def test_the_listener_serve_binds_accepts_connections_with_nodelay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = Workspace(tmp_path / ".cairn")
    workspace.init()
    seen: list[tuple[int, int]] = []

    def run_instead(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        # The very socket objects serve hands uvicorn (a copy of the descriptor would report
        # its protocol afresh and hide the fault), each served once by asyncio as uvicorn
        # would, inside the app's own start-up and shut-down so that its memory is closed.
        app = self.config.app

        async def served() -> None:
            async with app.router.lifespan_context(app):
                for listener in sockets or []:
                    seen.append((listener.family, await _nodelay_of_a_connection_to(listener)))

        asyncio.run(served())

    monkeypatch.setattr(uvicorn.Server, "run", run_instead)
    # the server's log configuration would outlive the test in this process
    monkeypatch.setattr(server_module, "configure_logging", lambda level: None)
    server_module.serve(workspace, host="127.0.0.1", port=0, embedder="static")

    assert seen == [(socket.AF_INET, 1)]
