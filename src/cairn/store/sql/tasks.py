"""Agent-protocol tasks (A2A) in the main store, with the same statements on both stores.

A task is a door's conversation state, not memory: it is not versioned, audited or exported,
and the serving login writes it directly. It lives in the main store so that any number of
``cairn serve`` processes on one PostgreSQL database answer for the same tasks.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, Unpack

from cairn.options import check_names, keys_of
from cairn.store.base import StoredTask, TaskPage
from cairn.store.sql import rows
from cairn.store.sql.part import SqlPart, Where

__all__ = ["SqlTasks"]


class SqlTasks(SqlPart):
    def put_task(self, task: StoredTask, *, final_states: Collection[int] = ()) -> None:
        # The first owner stays: a task is never handed to another principal by a save. A
        # finished task stays as it finished: two servers working on one task at once (one
        # cancelling it as the other completes it) cannot save it back into another state.
        kept, states = "", list[Any]()
        if final_states:
            finished, states = self.dialect.in_list("agent_tasks.state", sorted(final_states))
            kept = f" AND (agent_tasks.state = excluded.state OR NOT {finished})"
        self._write_one(
            "INSERT INTO agent_tasks (id, context_id, owner, state, updated_at, body) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "context_id = excluded.context_id, state = excluded.state, "
            "updated_at = excluded.updated_at, body = excluded.body "
            "WHERE agent_tasks.owner = excluded.owner" + kept,
            (
                task.id, task.context_id, task.owner, task.state,
                self.dialect.time(datetime.now(UTC)), task.body, *states,
            ),
        )  # fmt: skip

    def get_task(self, task_id: str, owner: str) -> StoredTask | None:
        found = self._read("SELECT * FROM agent_tasks WHERE id = ? AND owner = ?", (task_id, owner))
        return rows.to_task(found[0], self.dialect) if found else None

    def list_tasks(self, owner: str, **page: Unpack[TaskPage]) -> list[StoredTask]:
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(page, keys_of(TaskPage))
        where = Where(self.dialect)
        where.equal("owner", owner)
        where.equal("context_id", page.get("context_id"))
        where.equal("state", page.get("state"))
        found = self._read(
            f"SELECT * FROM agent_tasks{where.sql()} ORDER BY updated_at DESC, id LIMIT ? OFFSET ?",
            [*where.params, page.get("limit", 50), page.get("offset", 0)],
        )
        return [rows.to_task(row, self.dialect) for row in found]

    def delete_task(self, task_id: str, owner: str) -> None:
        self._write_one("DELETE FROM agent_tasks WHERE id = ? AND owner = ?", (task_id, owner))
