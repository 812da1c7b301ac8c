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


PROXY_VARIABLES = tuple(
    name
    for scheme in ("http", "https", "all")
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
)


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


# What a trickling endpoint sends at once, then one piece of every 20 ms: the body of a
# JSON answer, header lines that never end, or interim answers that never become one.
_TRICKLES = {
    "body": (b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"results": [', b" "),
    "headers": (b"HTTP/1.1 200 OK\r\n", b"X-Pad: a\r\n"),
    "interim": (b"", b"HTTP/1.1 102 Processing\r\n\r\n"),
}


class _Trickle(BaseHTTPRequestHandler):
    """Starts an answer at once, then sends a little more every 20 ms: each read returns
    well within any per-read timeout, so only a bound on the whole answer ends it."""

    stop: threading.Event
    kind: str

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        start, piece = _TRICKLES[self.kind]
        deadline = time.monotonic() + TRICKLE_SECONDS
        try:
            self.wfile.write(start)
            while time.monotonic() < deadline and not self.stop.wait(0.02):
                self.wfile.write(piece)
                self.wfile.flush()
        except OSError:
            return  # the client hung up, as it should
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def trickling(kind: str = "body") -> Iterator[str]:
    """An OpenAI-compatible API root (``…/v1``) whose every answer trickles in: its
    ``body``, its ``headers``, or ``interim`` answers (``102 Processing``) without end."""
    stop = threading.Event()
    handler = type("Trickle", (_Trickle,), {"stop": stop, "kind": kind})
    try:
        with serving(handler) as url:
            yield f"{url}/v1"
    finally:
        stop.set()
