"""Talking to the daemon over its Unix socket (standard library ``http.client`` only).

The socket lives in the store folder, which only its owner may enter, so reaching it is the
proof of identity: no key is stored or sent for it. Every call has a short deadline: a
daemon that does not answer in time is treated as down (the hook then spools).
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

from cairn.capture.spool import Outcome

__all__ = ["DaemonClient", "Unreachable"]


class Unreachable(Exception):
    """The daemon is not running, or did not answer in time."""


def _dechunk(body: bytes) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, joined."""
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


class DaemonClient:
    def __init__(self, path: Path, *, timeout: float = 2.0) -> None:
        self.path = path
        self.timeout = timeout

    def _call(
        self, method: str, target: str, body: Any = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        """One HTTP/1.1 request over the socket, the connection closed after it.

        Written on a bare socket: ``http.client`` imports the e-mail parser and ``ssl``,
        about 20 ms of a hook's 100 ms budget, to read one status line and one JSON body."""
        data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout if timeout is None else timeout)
        chunks: list[bytes] = []
        try:
            sock.connect(str(self.path))
            sock.sendall(head + data)
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except OSError as exc:
            raise Unreachable(f"the daemon did not answer: {type(exc).__name__}") from None
        finally:
            sock.close()
        header, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
        lines = header.split(b"\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise Unreachable("the daemon's answer was not HTTP") from None
        if any(line.lower().startswith(b"transfer-encoding: chunked") for line in lines[1:]):
            payload = _dechunk(payload)
        try:
            return status, json.loads(payload) if payload else None
        except ValueError:
            return status, None

    def health(self, timeout: float = 1.0) -> dict[str, Any]:
        status, body = self._call("GET", "/health", timeout=timeout)
        if status != 200 or not isinstance(body, dict):
            raise Unreachable(f"the daemon is not ready (HTTP {status})")
        return body

    def append(self, events: list[dict[str, Any]]) -> tuple[Outcome, str]:
        """Send events; what became of them (never raises: the hook must go on)."""
        try:
            status, body = self._call("POST", "/v1/timeline/events", {"events": events})
        except Unreachable as exc:
            return Outcome.UNAVAILABLE, str(exc)
        message = _message(body) or f"HTTP {status}"
        if status == 200:
            return Outcome.STORED, ""
        if status == 409:
            return Outcome.CONFLICT, message
        if status in {400, 413, 422}:
            return Outcome.INVALID, message
        if status in {401, 403}:
            return Outcome.DENIED, message
        return Outcome.UNAVAILABLE, message

    def recent(self, scope: str, max_tokens: int, timeout: float) -> dict[str, Any] | None:
        query = urllib.parse.urlencode({"scope": scope, "max_tokens": max_tokens})
        try:
            status, body = self._call("GET", f"/v1/timeline/recent?{query}", timeout=timeout)
        except Unreachable:
            return None
        return body if status == 200 and isinstance(body, dict) else None


def _message(body: Any) -> str:
    # the HTTP API's problem shape: {"status", "code", "detail", ...}
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    return ""
