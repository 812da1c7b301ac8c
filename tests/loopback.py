"""HTTP servers on the loopback interface for the tests of cairn's optional endpoints: a
real socket and a real HTTP exchange, so timeouts and streaming behave as they do in use."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# How long the trickling endpoint keeps sending, a byte every 20 ms, if nobody hangs up:
# far past the timeouts the tests give, so a reader that waits for the whole answer fails
# their time bounds instead of hanging them.
TRICKLE_SECONDS = 8.0


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on a free loopback port for the block: ``http://127.0.0.1:PORT``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Trickle(BaseHTTPRequestHandler):
    """Starts a JSON answer at once, then sends one space every 20 ms: each read returns
    well within any per-read timeout, so only a bound on the whole answer ends it."""

    stop: threading.Event

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()  # HTTP/1.0, no length: the answer lasts until the connection ends
        deadline = time.monotonic() + TRICKLE_SECONDS
        try:
            self.wfile.write(b'{"results": [')
            while time.monotonic() < deadline and not self.stop.wait(0.02):
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            return  # the client hung up, as it should

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def trickling() -> Iterator[str]:
    """An OpenAI-compatible API root (``…/v1``) whose every answer trickles in."""
    stop = threading.Event()
    handler = type("Trickle", (_Trickle,), {"stop": stop})
    try:
        with serving(handler) as url:
            yield f"{url}/v1"
    finally:
        stop.set()
