"""Agent-protocol tasks kept for ``Memory``'s A2A door: each one its owner's only, outside
the governed memory, bounded like a request."""

from __future__ import annotations

from collections.abc import Collection
from typing import Unpack

from cairn.errors import InvalidInput
from cairn.limits import MAX_COUNTER, MAX_ID_CHARS, MAX_REQUEST_BYTES, check_input, is_id
from cairn.memory.core import MemoryCore
from cairn.model import Principal
from cairn.options import TaskPage, check_names
from cairn.store.base import StoredTask

__all__ = ["MAX_TASK_BYTES", "TaskVerbs"]

# An agent-protocol task holds its messages and artifacts: bounded like one request.
MAX_TASK_BYTES = MAX_REQUEST_BYTES


class TaskVerbs(MemoryCore):
    """Mixed into ``Memory``: saving, reading, listing and deleting a principal's tasks."""

    def save_task(
        self,
        task_id: str,
        context_id: str,
        state: int,
        body: bytes,
        *,
        principal: Principal,
        final_states: Collection[int] = (),
    ) -> None:
        """Keep an agent-protocol task for ``principal`` (its owner, stamped here). A task
        someone else owns is left as it is, and so is one stored in one of ``final_states``
        (the protocol's finished states) unless this save keeps its state."""
        check_input(task_id, "task_id", MAX_ID_CHARS)
        check_input(context_id, "context_id", MAX_ID_CHARS)
        if len(body) > MAX_TASK_BYTES:
            raise InvalidInput(f"a task is at most {MAX_TASK_BYTES} bytes", field="task")
        self._store.put_task(
            StoredTask(task_id, context_id, principal.id, state, body), final_states=final_states
        )

    def task(self, task_id: str, *, principal: Principal) -> bytes | None:
        """A task's body, if the principal owns it (anyone else's is "not there")."""
        found = self._store.get_task(task_id, principal.id) if is_id(task_id) else None
        return found.body if found else None

    def tasks(self, *, principal: Principal, **page: Unpack[TaskPage]) -> list[bytes]:
        """The principal's tasks, most recently saved first, a page at a time (``TaskPage``)."""
        check_names(page, TaskPage.__optional_keys__)
        if not 1 <= page.get("limit", 50) <= 1000 or not 0 <= page.get("offset", 0) <= MAX_COUNTER:
            raise InvalidInput("task pages take 1 <= limit <= 1000 and an offset >= 0")
        return [task.body for task in self._store.list_tasks(principal.id, **page)]

    def delete_task(self, task_id: str, *, principal: Principal) -> None:
        if is_id(task_id):
            self._store.delete_task(task_id, principal.id)
