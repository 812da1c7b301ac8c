"""Calls that might block on a FIFO, run so that a test fails instead of hanging."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def within_seconds(seconds: float, fifo: Path, call: Callable[[], T]) -> T:
    """``call()``'s result (or its exception, raised here), or a failure when it still
    waits after ``seconds``: a reader blocked on ``fifo`` is then let go by a writer that
    opens and closes it, so the run never hangs."""
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still waiting on {fifo.name} after {seconds} s")
    (result,) = outcome
    if isinstance(result, BaseException):
        raise result
    return result
