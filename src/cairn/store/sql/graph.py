"""Edges and walks over them, with the same statements on both SQL stores.

A walk is one recursive query: it starts at the anchors the reader may see and, hop by hop,
takes only edges the reader may see that lead to records the reader may see. Permission is
decided inside the walk, on every hop, never by trimming what a free walk found: a record
the reader may not see is never passed through, so nothing behind it is reached through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from cairn.model import Direction, Edge, Neighbour, Neighbourhood
from cairn.options import check_names, keys_of
from cairn.store.base import EdgeFilter, EdgePage, Walk
from cairn.store.filters import edge_sql, to_sql
from cairn.store.sql import rows
from cairn.store.sql.dialect import Dialect
from cairn.store.sql.part import SqlPart, Where

__all__ = ["SqlGraph"]


class SqlGraph(SqlPart):
    def get_edge(self, edge_id: str) -> Edge | None:
        found = self._read("SELECT * FROM edges WHERE id = ?", (edge_id,))
        return rows.to_edge(found[0], self.dialect) if found else None

    def list_edges(self, where: EdgeFilter | None, **page: Unpack[EdgePage]) -> list[Edge]:
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(page, keys_of(EdgePage))
        conditions = Where(self.dialect)
        if (ends := page.get("ends")) is not None:
            test, values = to_sql(ends, self.dialect, "c")
            for end in ("e.src", "e.dst"):
                conditions.add(
                    f"EXISTS (SELECT 1 FROM chunks c WHERE c.record_id = {end} AND {test})", values
                )
        if (node_id := page.get("node_id")) is not None:
            conditions.add("(e.src = ? OR e.dst = ?)", [node_id, node_id])
        if where is not None:
            conditions.add(*edge_sql(where, self.dialect))
        if (after := page.get("after")) is not None:
            conditions.add("e.id > ?", [after])
        found = self._read(
            f"SELECT e.* FROM edges e{conditions.sql()} ORDER BY e.id LIMIT ?",
            [*conditions.params, page.get("limit", 100)],
        )
        return [rows.to_edge(row, self.dialect) for row in found]

    def neighbours(self, anchors: Sequence[str], **walk: Unpack[Walk]) -> Neighbourhood:
        # a misspelt key would otherwise drop a filter, and with it a limit on who sees what
        check_names(walk, keys_of(Walk))
        d = self.dialect
        edges, vertices, hops, limit = walk["edges"], walk["vertices"], walk["hops"], walk["limit"]
        direction, either_way = walk["direction"], walk.get("either_way", frozenset())
        anchors = tuple(dict.fromkeys(anchors))
        if not anchors:
            return Neighbourhood(anchors=(), nodes=(), edges=())
        vertex_test, vertex_params = to_sql(vertices, d, "c")

        def readable(node: str) -> str:
            return f"EXISTS (SELECT 1 FROM chunks c WHERE c.record_id = {node} AND {vertex_test})"

        step, step_params = _step(d, direction, either_way)
        edge_test, edge_params = edge_sql(edges, d, "e")
        far = "CASE WHEN e.src = w.node THEN e.dst ELSE e.src END"
        anchor_test, anchor_params = d.in_list("r.id", list(anchors))
        query = (
            f"WITH RECURSIVE walk(node, depth, edge_id) AS ("
            f"SELECT r.id, 0, {d.null_id()} FROM records r "
            f"WHERE {anchor_test} AND {readable('r.id')} "
            f"UNION "
            f"SELECT {far}, w.depth + 1, e.id FROM walk w JOIN edges e ON {step} "
            f"WHERE w.depth < ? AND {edge_test} AND {readable(far)}"
            f") SELECT node, depth, edge_id FROM walk"
        )
        params = [
            *anchor_params, *vertex_params, *step_params, hops, *edge_params, *vertex_params
        ]  # fmt: skip
        found = self._read(query, params)

        depth_of: dict[str, int] = {}
        for row in found:
            node, depth = row["node"], int(row["depth"])
            if depth < depth_of.get(node, hops + 1):
                depth_of[node] = depth
        nearest = sorted(depth_of.items(), key=lambda item: (item[1], item[0]))
        kept = dict(nearest[:limit])
        edge_ids = {
            row["edge_id"] for row in found if row["edge_id"] is not None and row["node"] in kept
        }
        taken = [
            edge
            for edge in self._edges_by_id(sorted(edge_ids))
            if edge.src in kept and edge.dst in kept
        ]
        frontier = [node for node, depth in kept.items() if depth < hops]
        return Neighbourhood(
            anchors=tuple(a for a in anchors if a in kept),
            nodes=tuple(Neighbour(record_id=node, hops=depth) for node, depth in kept.items()),
            edges=tuple(taken),
            withheld=self._withheld(
                frontier, edges, readable, vertex_params, direction, either_way
            ),
            truncated=len(nearest) > limit,
        )

    def _edges_by_id(self, edge_ids: Sequence[str]) -> list[Edge]:
        found: list[Edge] = []
        for start in range(0, len(edge_ids), 500):
            test, params = self.dialect.in_list("id", list(edge_ids[start : start + 500]))
            found += [
                rows.to_edge(row, self.dialect)
                for row in self._read(f"SELECT * FROM edges WHERE {test} ORDER BY id", params)
            ]
        return found

    def _withheld(
        self,
        frontier: Sequence[str],
        edges: EdgeFilter,
        readable: Any,
        vertex_params: list[Any],
        direction: Direction,
        either_way: frozenset[str],
    ) -> dict[str, int]:
        """How many edges of the asked-for types touching the walked records were not taken:
        the edge is hidden from the reader (``edges``), or it leads to a record the reader
        may not see (``vertices``). Counted once per edge, never named."""
        d = self.dialect
        hidden_edges: set[str] = set()
        hidden_vertices: set[str] = set()
        edge_test, edge_params = edge_sql(edges, d, "e")
        both_ends = f"{readable('e.src')} AND {readable('e.dst')}"
        for start in range(0, len(frontier), 500):
            part = list(frontier[start : start + 500])
            touches, touch_params = _touching(d, part, direction, either_way)
            clauses = [touches, "e.status = 'active'"]
            params: list[Any] = [*edge_params, *vertex_params, *vertex_params, *touch_params]
            if edges.types is not None:
                type_test, type_params = d.in_list("e.type", sorted(edges.types))
                clauses.append(type_test)
                params += type_params
            found = self._read(
                f"SELECT e.id, CASE WHEN {edge_test} THEN 1 ELSE 0 END AS edge_ok, "
                f"CASE WHEN {both_ends} THEN 1 ELSE 0 END AS ends_ok "
                f"FROM edges e WHERE {' AND '.join(clauses)}",
                params,
            )
            for row in found:
                if not row["edge_ok"]:
                    hidden_edges.add(row["id"])
                elif not row["ends_ok"]:
                    hidden_vertices.add(row["id"])
        counts = {"edges": len(hidden_edges), "vertices": len(hidden_vertices)}
        return {reason: n for reason, n in counts.items() if n}


def _step(d: Dialect, direction: Direction, either_way: frozenset[str]) -> tuple[str, list[Any]]:
    """The join from a walked record (``w.node``) to the edges a hop may take from it."""
    if direction is Direction.BOTH:
        return "(e.src = w.node OR e.dst = w.node)", []
    near, far = ("e.src", "e.dst") if direction is Direction.OUT else ("e.dst", "e.src")
    if not either_way:
        return f"{near} = w.node", []
    test, params = d.in_list("e.type", sorted(either_way))
    return f"({near} = w.node OR ({far} = w.node AND {test}))", params


def _touching(
    d: Dialect, nodes: list[str], direction: Direction, either_way: frozenset[str]
) -> tuple[str, list[Any]]:
    """Edges a hop from one of ``nodes`` would consider (``_step`` for a set of nodes)."""
    src_test, src_params = d.in_list("e.src", nodes)
    dst_test, dst_params = d.in_list("e.dst", nodes)
    if direction is Direction.BOTH:
        return f"({src_test} OR {dst_test})", [*src_params, *dst_params]
    if direction is Direction.OUT:
        near, near_params, far, far_params = src_test, src_params, dst_test, dst_params
    else:
        near, near_params, far, far_params = dst_test, dst_params, src_test, src_params
    if not either_way:
        return near, near_params
    type_test, type_params = d.in_list("e.type", sorted(either_way))
    return f"({near} OR ({far} AND {type_test}))", [*near_params, *far_params, *type_params]
