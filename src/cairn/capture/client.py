"""Talking to the daemon over its Unix socket (standard library ``http.client`` only).

The socket lives in the store folder, which only its owner may enter, so reaching it is the
proof of identity: no key is stored or sent for it. Every call has a short deadline: a
daemon that does not answer in time is treated as down (the hook then spools).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

from cairn.capture.spool import Outcome

__all__ = ["DaemonClient", "Unreachable"]


class Unreachable(Exception):
    """The daemon is not running, or did not answer in time."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DaemonClient:
    def __init__(self, path: Path, *, timeout: float = 2.0) -> None:
        self.path = path
        self.timeout = timeout

    def _call(
        self, method: str, target: str, body: Any = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        if not self.path.exists():
            raise Unreachable(f"no daemon socket at {self.path}")
        conn = _UnixConnection(self.path, self.timeout if timeout is None else timeout)
        try:
            data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise Unreachable(f"the daemon did not answer: {type(exc).__name__}") from None
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, None

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
