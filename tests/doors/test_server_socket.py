"""The TCP listener ``cairn serve`` hands to uvicorn: every connection it accepts sends small
answers at once (``TCP_NODELAY``). Without it each response after the first on a keep-alive
connection waited ~40 ms for the client's delayed ACK: several times the whole request. And
the addresses the server gives out for itself, IPv6 included."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn

from cairn.doors import server as server_module
from cairn.doors._net import host_port, http_base
from cairn.errors import InvalidInput
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


@pytest.fixture(autouse=True)
def _logging_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve sets up the process's logging (and the MCP SDK and uvicorn add to it): put it
    back afterwards, since this process goes on to run other tests."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    for name in server_module.LIBRARY_LOGGERS:
        named = logging.getLogger(name)
        monkeypatch.setattr(named, "handlers", list(named.handlers))
        monkeypatch.setattr(named, "propagate", named.propagate)


def _open_files_under(folder: Path) -> list[str]:
    """This process's open descriptors on files inside ``folder`` (Linux: /proc)."""
    opened = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if target.is_relative_to(folder):
                opened.append(str(target))
    return opened


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    ("host", "family"),
    [
        ("127.0.0.1", socket.AF_INET),
        pytest.param(
            "::1",
            socket.AF_INET6,
            marks=pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here"),
        ),
    ],
)
def test_the_listener_serve_binds_accepts_connections_with_nodelay(
    host: str, family: socket.AddressFamily, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = Workspace(tmp_path / ".cairn")
    workspace.init()
    seen: list[tuple[int, int]] = []
    cards: list[str] = []

    def run_instead(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        # The very socket objects serve hands uvicorn (a copy of the descriptor would report
        # its protocol afresh and hide the fault), each served once by asyncio as uvicorn
        # would, inside the app's own start-up and shut-down so that its memory is closed.
        app = self.config.app

        async def served() -> None:
            async with app.router.lifespan_context(app):
                for listener in sockets or []:
                    seen.append((listener.family, await _nodelay_of_a_connection_to(listener)))
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                    card = (await client.get("/.well-known/agent-card.json")).json()
                    cards.extend(i["url"] for i in card["supportedInterfaces"])

        asyncio.run(served())

    monkeypatch.setattr(uvicorn.Server, "run", run_instead)
    server_module.serve(workspace, host=host, port=0, embedder="static")

    assert seen == [(family, 1)]
    # the agent card names this server by a URL whose host reads back as the one bound
    assert cards and all(urlsplit(url).hostname == host for url in cards)


def test_an_ipv6_address_is_written_in_brackets() -> None:
    assert http_base("127.0.0.1", 8765) == "http://127.0.0.1:8765"
    assert http_base("::1", 8765) == "http://[::1]:8765"
    assert host_port("::", 50051) == "[::]:50051"
    assert host_port("localhost", 50051) == "localhost:50051"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc")
def test_a_taken_port_stops_serve_with_the_store_closed(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / ".cairn")
    workspace.init()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InvalidInput, match="the address is in use"):
            server_module.serve(workspace, host="127.0.0.1", port=port, embedder="static")
    # serve opened the store before binding; with no server to shut it down, it closed it
    assert _open_files_under(workspace.folder) == []
