"""A background job that never makes a caller wait: a daemon thread doing passes of work.

The index worker (embedding) and the rollup worker (the timeline) are both one of these.
A pass is woken by ``notify`` (this process wrote something) and every ``poll`` seconds
(for what other processes wrote); a pass that did some work is followed at once by another,
since there may be more. A failing pass is logged and retried at the next wake-up.
"""

from __future__ import annotations

import logging
import threading
import time
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
        settle: float = 0.0,
    ) -> None:
        """``work`` does one bounded pass and says whether it did anything; ``failure`` is
        what ``logger`` says when a pass raises. With ``settle``, a burst of notifies is
        taken in one pass: the pass starts once no notify came for ``settle`` seconds (or
        ten times that after the first), so work that arrives in a stream (a coding agent's
        hook calls) is not redone after every item while its producers wait for the CPU."""
        self._work = work
        self.settle = settle
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

    def _quiet(self) -> None:
        """Wait until no notify came for ``settle`` seconds (at most ten times that)."""
        deadline = time.monotonic() + 10 * self.settle
        while time.monotonic() < deadline and not self._stopping.is_set():
            seen = self._generation
            self._stopping.wait(self.settle)
            if seen == self._generation:
                return

    def _run(self) -> None:
        busy = False  # the last pass did work: go on at once, there may be more
        while not self._stopping.is_set():
            self._wake.clear()
            if self.settle and not busy:
                self._quiet()
            generation = self._generation
            busy = False
            try:
                if self._work():
                    busy = True
                    continue
            except Exception:  # the worker must outlive a failing pass; the log has it
                self._log.exception(self._failure)
            if generation == self._generation:
                self._idle.set()
            self._wake.wait(self.poll)
