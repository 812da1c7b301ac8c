"""A background job that never makes a caller wait: a daemon thread doing passes of work.

The index worker (embedding) and the rollup worker (the timeline) are both one of these.
A pass is woken by ``notify`` (this process wrote something) and every ``poll`` seconds
(for what other processes wrote); a pass that did some work is followed at once by another,
since there may be more. A failing pass is logged and retried at the next wake-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self

__all__ = ["BackgroundWorker"]

log = logging.getLogger(__name__)


class BackgroundWorker:
    def __init__(
        self,
        name: str,
        work: Callable[[], bool],
        *,
        poll: float,
        failure: str,
        logger: logging.Logger | None = None,
    ) -> None:
        """``work`` does one bounded pass and says whether it did anything; ``failure`` is
        what ``logger`` says when a pass raises."""
        self._work = work
        self._log = logger or log
        self.poll = poll
        self._failure = failure
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Event()
        # Bumped by every notify: idle is declared only by a pass that began after the
        # latest notify, so work arriving mid-pass is never reported as done.
        self._generation = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def notify(self) -> None:
        """Something was written: look for work now."""
        self._generation += 1
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Block until a pass found nothing left to do since the last ``notify`` (True), or
        ``timeout`` seconds pass (False)."""
        return self._idle.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            generation = self._generation
            try:
                if self._work():
                    continue  # there may be more
            except Exception:  # the worker must outlive a failing pass; the log has it
                self._log.exception(self._failure)
            if generation == self._generation:
                self._idle.set()
            self._wake.wait(self.poll)
