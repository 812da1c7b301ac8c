"""``cairn daemon start|stop|status``: ``cairn serve`` in the background for one store.

The daemon listens on the store's capture socket (and on TCP only when asked), writes its
log to ``<store>/daemon.log`` and its pid to ``<store>/daemon.pid``. Start returns once the
daemon answers its health check (or says why it did not); stop sends SIGTERM, which lets the
server finish the requests in flight and close the store (every write was durable when it
was acknowledged), and waits for the process to end. Standard library only, like the hook,
which starts the daemon itself when it finds none.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from cairn.capture.client import DaemonClient, Unreachable
from cairn.capture.local import socket_path, spool_path
from cairn.capture.spool import Spool

__all__ = ["DaemonError", "DaemonStatus", "start", "status", "stop"]

PID_FILE = "daemon.pid"
LOG_FILE = "daemon.log"
_LOCK_FILE = "daemon.lock"


class DaemonError(Exception):
    """The daemon could not be started or stopped; the message says why."""


@dataclass(frozen=True)
class DaemonStatus:
    running: bool
    pid: int | None
    socket: str
    log: str
    spool_waiting: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a child that exited but was not reaped yet still answers kill(0): ask once more
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def status(store: Path) -> DaemonStatus:
    sock = socket_path(store)
    try:
        pid: int | None = int(DaemonClient(sock).health()["pid"])
        running = True
    except (Unreachable, KeyError, TypeError, ValueError):
        running, pid = False, None
    return DaemonStatus(
        running=running,
        pid=pid,
        socket=str(sock),
        log=str(store.resolve() / LOG_FILE),
        spool_waiting=Spool(spool_path(store)).pending(),
    )


@contextlib.contextmanager
def _one_at_a_time(store: Path) -> Iterator[None]:
    """Starts and stops of one store's daemon never overlap (the hook may start one while
    the user does)."""
    fd = os.open(store / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start(
    store: Path, *, port: int | None = None, embedder: str | None = None, timeout: float = 120.0
) -> DaemonStatus:
    """Start the daemon for ``store`` unless it runs; return once it answers."""
    store = store.resolve()
    with _one_at_a_time(store):
        now = status(store)
        if now.running:
            return now
        command = [sys.executable, "-m", "cairn", "--store", str(store), "serve", "--socket"]
        command += ["--port", str(port)] if port is not None else ["--no-tcp"]
        if embedder is not None:
            command += ["--embedder", embedder]
        log = store / LOG_FILE
        log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                start_new_session=True,  # survives the terminal or hook that started it
                close_fds=True,
            )
        finally:
            os.close(log_fd)
        pid_text = json.dumps({"pid": process.pid, "socket": str(socket_path(store))})
        _write_private(store / PID_FILE, pid_text)
        deadline = time.monotonic() + timeout
        client = DaemonClient(socket_path(store))
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise DaemonError(
                    f"the daemon exited at start (code {process.returncode}); "
                    f"the end of {log}:\n{_log_tail(log)}"
                )
            try:
                client.health(timeout=1.0)
                return status(store)
            except Unreachable:
                time.sleep(0.1)  # waiting for another process to come up: nothing to wait on
        raise DaemonError(f"the daemon did not answer within {timeout:.0f} s; see {log}")


def stop(store: Path, *, timeout: float = 60.0) -> DaemonStatus:
    """Stop the daemon cleanly (SIGTERM, then wait for it to end)."""
    store = store.resolve()
    with _one_at_a_time(store):
        now = status(store)
        if now.pid is None:
            (store / PID_FILE).unlink(missing_ok=True)
            return now
        os.kill(now.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(now.pid):
            if time.monotonic() > deadline:
                raise DaemonError(
                    f"the daemon (pid {now.pid}) is still finishing after {timeout:.0f} s; "
                    "it was not killed: run stop again, or look at its log"
                )
            time.sleep(0.05)  # the process ends on its own schedule: nothing to wait on
        (store / PID_FILE).unlink(missing_ok=True)
        return status(store)


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
