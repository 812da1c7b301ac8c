"""Web console sessions: what a session cookie stands for, and the CSRF token of each.

The cookie holds a random session id only. The server maps the id (hashed, so a memory dump
does not yield live cookies) to the id of the API key that signed in, never the key itself;
every request re-reads the principals file through that key id, so revoking the key ends
its sessions at once. Sessions live in this process: a restart signs everybody out, which
is the safe direction to fail.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "SESSION_COOKIE",
    "SESSION_SECONDS",
    "SIGNIN_COOKIE",
    "Session",
    "SessionStore",
    "same_token",
]

SESSION_COOKIE = "cairn_session"
# The sign-in form's own double-submit token (there is no session yet to hold one).
SIGNIN_COOKIE = "cairn_signin"
SESSION_SECONDS = 8 * 60 * 60  # a working day; then sign in again
MAX_SESSIONS = 10_000  # a bound on memory: the oldest session goes first


@dataclass(frozen=True)
class Session:
    key_id: str
    principal_id: str
    csrf: str
    expires_at: float


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def same_token(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a submitted token with the expected one."""
    return bool(given) and secrets.compare_digest(str(given).encode(), expected.encode())


class SessionStore:
    def __init__(
        self, *, lifetime: float = SESSION_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        self._lifetime = lifetime
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, *, key_id: str, principal_id: str) -> tuple[str, Session]:
        """A new session; returns the id for the cookie (shown only here) and the session."""
        session_id = secrets.token_urlsafe(32)
        session = Session(
            key_id=key_id,
            principal_id=principal_id,
            csrf=secrets.token_urlsafe(32),
            expires_at=self._clock() + self._lifetime,
        )
        with self._lock:
            self._prune()
            while len(self._sessions) >= MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[_digest(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            session = self._sessions.get(_digest(session_id))
            if session is None:
                return None
            if session.expires_at <= self._clock():
                del self._sessions[_digest(session_id)]
                return None
            return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._sessions.pop(_digest(session_id), None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _prune(self) -> None:
        now = self._clock()
        for digest in [d for d, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[digest]

    @property
    def lifetime(self) -> float:
        return self._lifetime
