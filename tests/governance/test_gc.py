"""The batch path's pause of the cyclic garbage collector."""

from __future__ import annotations

import gc
import threading

import pytest

from cairn.governance._gc import collector_paused


def test_the_collector_resumes_after_the_last_of_overlapping_batches() -> None:
    assert gc.isenabled()
    inside, release = threading.Event(), threading.Event()

    def other_batch() -> None:
        with collector_paused():
            inside.set()
            release.wait(timeout=30)

    other = threading.Thread(target=other_batch)
    with collector_paused():
        other.start()
        assert inside.wait(timeout=30)
        assert not gc.isenabled()
    assert not gc.isenabled(), "the other batch is still running"
    release.set()
    other.join()
    assert gc.isenabled()


def test_a_failed_batch_resumes_the_collector_and_a_disabled_one_stays_off() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the batch failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
