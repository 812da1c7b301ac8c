"""Agent-protocol tasks in the store (both backends): each task its owner's alone."""

from __future__ import annotations

import pytest

from cairn.errors import InvalidInput
from cairn.memory import MAX_TASK_BYTES, Memory
from cairn.model import Principal, PrincipalKind
from tests.factories import CURATOR

ANA = Principal(id="ana", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
BOB = Principal(id="bob", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))


def test_a_task_is_its_owners_alone(memory: Memory) -> None:
    memory.save_task("task-1", "ctx-1", 1, b"\x00first", principal=ANA)
    memory.save_task("task-1", "ctx-1", 3, b"\x00second", principal=ANA)
    assert memory.task("task-1", principal=ANA) == b"\x00second"  # bytes kept exactly
    # someone else's task is "not there", and cannot be overwritten, listed or deleted by them
    assert memory.task("task-1", principal=BOB) is None
    assert memory.task("task-1", principal=CURATOR) is None
    memory.save_task("task-1", "ctx-9", 4, b"hijacked", principal=BOB)
    assert memory.task("task-1", principal=ANA) == b"\x00second"
    assert memory.tasks(principal=BOB) == []
    memory.delete_task("task-1", principal=BOB)
    assert memory.task("task-1", principal=ANA) == b"\x00second"
    memory.delete_task("task-1", principal=ANA)
    assert memory.task("task-1", principal=ANA) is None


def test_a_finished_task_stays_as_it_finished(memory: Memory) -> None:
    """Two servers working on one task at once: once one saves it finished, the other's
    save cannot take it back to working or into another end; the same end may be re-saved."""
    working, completed, canceled = 2, 3, 5
    final = {completed, 4, canceled, 7}
    save = memory.save_task
    save("t", "c", working, b"working", principal=ANA, final_states=final)
    save("t", "c", working, b"still working", principal=ANA, final_states=final)
    save("t", "c", completed, b"done", principal=ANA, final_states=final)
    save("t", "c", working, b"late progress", principal=ANA, final_states=final)
    save("t", "c", canceled, b"late cancel", principal=ANA, final_states=final)
    assert memory.task("t", principal=ANA) == b"done"
    assert memory.tasks(principal=ANA, state=completed) == [b"done"]
    save("t", "c", completed, b"done, with its last artifact", principal=ANA, final_states=final)
    assert memory.task("t", principal=ANA) == b"done, with its last artifact"
    # without final states, as before: the last save wins
    save("t", "c", working, b"reopened", principal=ANA)
    assert memory.task("t", principal=ANA) == b"reopened"


def test_tasks_list_newest_first_filtered_and_paged(memory: Memory) -> None:
    for i in range(5):
        memory.save_task(f"t{i}", "ctx-a" if i % 2 else "ctx-b", i % 2, bytes([i]), principal=ANA)
    memory.save_task("t1", "ctx-a", 1, b"\x01again", principal=ANA)  # saved last
    everything = memory.tasks(principal=ANA)
    assert everything[0] == b"\x01again" and len(everything) == 5
    assert set(memory.tasks(principal=ANA, context_id="ctx-b")) == {b"\x00", b"\x02", b"\x04"}
    assert set(memory.tasks(principal=ANA, state=1)) == {b"\x01again", b"\x03"}
    pages = memory.tasks(principal=ANA, limit=2) + memory.tasks(principal=ANA, limit=2, offset=2)
    assert pages == everything[:4]


def test_task_input_is_bounded(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        memory.save_task("t", "c", 1, b"x" * (MAX_TASK_BYTES + 1), principal=ANA)
    with pytest.raises(InvalidInput):
        memory.save_task("t" * 1000, "c", 1, b"x", principal=ANA)
    with pytest.raises(InvalidInput):
        memory.tasks(principal=ANA, limit=0)
