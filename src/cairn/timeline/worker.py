"""Keeps the timeline built while a server runs: the rollup, in the background.

``cairn serve`` starts one. It wakes when this process appends events (once they pause for
a second) and every ``poll`` seconds for events other processes appended, and runs one piece
of the rollup per pass while events wait (so ``stop`` never waits long). The rollup's
checkpoint makes a retry after a failed pass safe.
"""

from __future__ import annotations

from collections.abc import Callable

from cairn.background import BackgroundWorker
from cairn.timeline.rollup import RollupReport

__all__ = ["RollupWorker"]


class RollupWorker(BackgroundWorker):
    def __init__(
        self,
        step: Callable[[], RollupReport],
        lag: Callable[[], int],
        *,
        poll: float = 60.0,
        settle: float = 1.0,
    ) -> None:
        """``step`` runs one piece of the rollup; ``lag`` says how many events wait."""

        def work() -> bool:
            if not lag():
                return False
            step()
            return True

        super().__init__(
            "cairn-rollup",
            work,
            poll=poll,
            failure="background rollup failed; retrying at the next wake-up",
            # events come in streams (every prompt and tool call of an agent): roll up once
            # the stream pauses, not after every event
            settle=settle,
        )
