"""Reads of the timeline (node versions, latest pointers, grips), the same statements on
both stores.

Nodes are written through ``commit`` (``PutTocNode``); these reads trim by the reader's
scopes and ACLs in SQL, like the event reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from cairn.model import Grip, TocNode
from cairn.options import check_names, keys_of
from cairn.store.base import TocFilter, TocPage
from cairn.store.sql import rows
from cairn.store.sql.part import SqlPart, Where

__all__ = ["SqlTimeline"]


class SqlTimeline(SqlPart):
    def toc_nodes(self, where: TocFilter, **page: Unpack[TocPage]) -> list[TocNode]:
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(page, keys_of(TocPage))
        d = self.dialect
        conditions = Where(d)
        add = conditions.add
        if not where.include_retired:
            add(d.flag("l.retired", False))
        conditions.one_of("l.acl_id", where.acl_ids)
        conditions.one_of("l.scope_id", where.scope_ids)
        conditions.one_of("l.level", where.levels)
        conditions.equal("l.parent_id", where.parent_id)
        conditions.equal("l.partition_key", where.partition_key)
        conditions.one_of("l.node_id", where.node_ids)
        after = page.get("after")
        if page.get("newest_first", False):
            order = "l.last_ts DESC, l.node_id DESC"
            if after is not None:
                ts = d.time(after[0])
                add(f"(l.last_ts, l.node_id) < (?, {d.id_param})", [ts, after[1]])
        else:
            order = "l.starts_at, l.node_id"
            if after is not None:
                ts = d.time(after[0])
                add(f"(l.starts_at, l.node_id) > (?, {d.id_param})", [ts, after[1]])
        found = self._read(
            "SELECT n.* FROM toc_latest l JOIN toc_nodes n "
            "ON n.node_id = l.node_id AND n.version = l.version "
            f"WHERE {conditions.all()} ORDER BY {order} LIMIT ?",
            [*conditions.params, page.get("limit", 100)],
        )
        return [rows.to_toc_node(row, d) for row in found]

    def toc_node(self, node_id: str, version: int | None = None) -> TocNode | None:
        if version is None:
            found = self._read(
                "SELECT n.* FROM toc_latest l JOIN toc_nodes n "
                "ON n.node_id = l.node_id AND n.version = l.version WHERE l.node_id = ?",
                (node_id,),
            )
        else:
            found = self._read(
                "SELECT * FROM toc_nodes WHERE node_id = ? AND version = ?", (node_id, version)
            )
        return rows.to_toc_node(found[0], self.dialect) if found else None

    def toc_heads(self, node_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        heads: dict[str, tuple[int, str]] = {}
        for test, params in self._in_batches("node_id", node_ids):
            for row in self._read(
                f"SELECT node_id, version, digest FROM toc_latest WHERE {test}", params
            ):
                heads[row["node_id"]] = (int(row["version"]), row["digest"])
        return heads

    def grips(self, grip_ids: Sequence[str]) -> dict[str, tuple[Grip, int, int]]:
        found: dict[str, tuple[Grip, int, int]] = {}
        for test, params in self._in_batches("grip_id", grip_ids):
            for row in self._read(f"SELECT * FROM grips WHERE {test}", params):
                grip = rows.to_grip(row, self.dialect)
                found[grip.grip_id] = (grip, int(row["scope_id"]), int(row["acl_id"]))
        return found

    def toc_counts(self) -> dict[str, int]:
        live = self.dialect.flag("retired", False)
        found = self._read(
            f"SELECT level, count(*) AS n FROM toc_latest WHERE {live} GROUP BY level"
        )
        return {row["level"]: int(row["n"]) for row in found}

    def timeline_chunks(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, int, str]]:
        found: dict[int, tuple[str, int, str]] = {}
        for test, params in self._in_batches("id", chunk_ids):
            for row in self._read(
                "SELECT id, record_id, version_no, chunk_key FROM chunks "
                f"WHERE source_kind = 'timeline' AND {test}",
                params,
            ):
                found[int(row["id"])] = (row["record_id"], int(row["version_no"]), row["chunk_key"])
        return found
