"""A rollup process for the crash test: runs the rollup on a store (a SQLite file or a
PostgreSQL URL) in small pieces, and after its ``pause_after``-th committed batch of nodes
(before that piece is acknowledged) prints PAUSED and waits on stdin, to be killed."""

from __future__ import annotations

import sys

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.store.base import Store
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from cairn.timeline.rollup import RollupProgress
from tests.factories import CURATOR


def main() -> None:
    backend, target = sys.argv[1], sys.argv[2]
    piece, pause_after = int(sys.argv[3]), int(sys.argv[4])
    store: Store
    store = PostgresStore(target) if backend == "postgres" else SqliteStore(target)
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), embedder=None)
    written = 0

    def progress(step: RollupProgress) -> None:
        nonlocal written
        if step.acknowledged:
            return
        written += 1
        if written == pause_after:
            print("PAUSED", flush=True)
            sys.stdin.readline()  # never answered: the test kills this process here

    memory.rollup(principal=CURATOR, piece=piece, on_progress=progress)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main()
