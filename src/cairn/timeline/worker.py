"""Keeps the timeline built while a server runs: the rollup, in the background.

``cairn serve`` starts one. It wakes when this process appends events (``notify``) and every
``poll`` seconds for events other processes appended, and runs one piece of the rollup at a
time while events wait (so ``stop`` never waits long). A failure is logged and retried at
the next wake-up; the rollup's checkpoint makes a retry safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from cairn.timeline.rollup import RollupReport

__all__ = ["RollupWorker"]

log = logging.getLogger(__name__)


class RollupWorker:
    def __init__(
        self,
        step: Callable[[], RollupReport],
        lag: Callable[[], int],
        *,
        poll: float = 60.0,
    ) -> None:
        """``step`` runs one piece of the rollup; ``lag`` says how many events wait."""
        self._step = step
        self._lag = lag
        self.poll = poll
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._idle = threading.Event()
        # Bumped by every notify: idle is declared only by a pass that began after the
        # latest notify, so events appended mid-pass are never reported as built.
        self._generation = 0
        self._thread = threading.Thread(target=self._run, name="cairn-rollup", daemon=True)

    def start(self) -> RollupWorker:
        self._thread.start()
        return self

    def notify(self) -> None:
        """Events were appended: roll them up now."""
        self._generation += 1
        self._idle.clear()
        self._wake.set()

    def wait_idle(self, timeout: float) -> bool:
        """Block until a pass found no events waiting since the last ``notify`` (True), or
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
                waiting = self._lag()
                if waiting:
                    self._step()
                    continue  # there may be more
            except Exception:  # the worker must outlive a failing pass; the log has it
                log.exception("background rollup failed; retrying at the next wake-up")
            if generation == self._generation:
                self._idle.set()
            self._wake.wait(self.poll)
