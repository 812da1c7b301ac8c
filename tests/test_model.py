"""Domain values: ids."""

from __future__ import annotations

import threading
import time

from ulid import ULID

from cairn.model import new_id


def test_ids_are_ulids_of_now_behind_a_prefix() -> None:
    before = time.time()
    made = new_id("rec")
    after = time.time()
    prefix, ulid = made.split("_")
    assert prefix == "rec" and len(ulid) == 26
    parsed = ULID.from_str(ulid)  # the spec's spelling: Crockford base 32, upper case
    assert str(parsed) == ulid
    assert int(before * 1000) <= parsed.milliseconds <= int(after * 1000) + 1


def test_ids_increase_strictly_also_within_a_millisecond_and_across_threads() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(new_id("x") for _ in range(5_000))

    threads = [threading.Thread(target=make, args=(part,)) for part in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for part in made:
        assert part == sorted(part)  # each thread sees its ids increase
    every = [i for part in made for i in part]
    assert len(set(every)) == len(every) == 20_000
    # thousands of ids a millisecond: they share a time and count up in the random part
    stamps = [ULID.from_str(i[2:]).milliseconds for i in made[0]]
    assert len(set(stamps)) < len(stamps)
