"""An index whose first mirroring of the store is held open in another thread: what a
server's worker does for minutes after a restart at a million chunks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cairn.retrieval.indexer import Indexer


@contextmanager
def building_in_another_thread(indexer: Indexer) -> Iterator[None]:
    """Inside the block another thread is mirroring the store into ``indexer`` (the index
    is busy); on leaving, that thread finishes the mirroring and is joined."""
    building, done = threading.Event(), threading.Event()
    original = indexer._mirror
    failed: list[BaseException] = []

    def slow_first_mirror() -> None:
        building.set()
        assert done.wait(60)
        original()

    indexer._mirror = slow_first_mirror  # type: ignore[method-assign]

    def build() -> None:
        try:
            indexer.sync()
        except BaseException as exc:  # raised in the test's thread after the join
            failed.append(exc)

    builder = threading.Thread(target=build)
    builder.start()
    try:
        assert building.wait(60)
        yield
    finally:
        done.set()
        builder.join(60)
        indexer._mirror = original  # type: ignore[method-assign]
    assert not builder.is_alive()
    if failed:
        raise failed[0]
