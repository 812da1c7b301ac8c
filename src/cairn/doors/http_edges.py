"""The JSON API's edge routes: link and unlink records, read an edge or a record's edges,
and walk a few hops from anchors, each hop within what the caller may read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from pydantic import Field

from cairn.doors.http_common import ReasonBody, RecordId, StrictBody, Who, api_router
from cairn.limits import MAX_LIST_ITEMS
from cairn.memory import MAX_HOPS, Memory
from cairn.model import (
    Direction,
    Edge,
    EdgeDraft,
    Id,
    Neighbourhood,
    ProposalOutcome,
    Reason,
    RelationName,
)

__all__ = ["edges_router"]


class LinkBody(StrictBody):
    edge: EdgeDraft
    reason: Reason | None = None


class NeighboursBody(StrictBody):
    anchors: Annotated[tuple[Id, ...], Field(min_length=1, max_length=MAX_LIST_ITEMS)]
    types: Annotated[tuple[RelationName, ...], Field(max_length=MAX_LIST_ITEMS)] | None = None
    direction: Direction = Direction.OUT
    hops: Annotated[int, Field(ge=1, le=MAX_HOPS)] = 1
    limit: Annotated[int, Field(ge=1, le=1000)] = 100


def edges_router(memory: Memory) -> APIRouter:
    """``/v1/edges``, ``/v1/records/{id}/edges`` and ``/v1/graph/neighbours``."""
    router = api_router(tags=["graph"])

    @router.post("/edges", summary="Propose a typed edge between two records")
    def link(body: LinkBody, who: Who) -> ProposalOutcome:
        return memory.link(body.edge, principal=who, reason=body.reason)

    @router.get("/edges/{edge_id}", summary="One edge")
    def edge(
        edge_id: Annotated[str, PathParam(min_length=1, description="an edge id, e.g. edg_01J…")],
        who: Who,
    ) -> Edge:
        return memory.edge(edge_id, principal=who)

    @router.post("/edges/{edge_id}/unlink", summary="Propose removing an edge")
    def unlink(
        edge_id: Annotated[str, PathParam(min_length=1, description="an edge id, e.g. edg_01J…")],
        body: ReasonBody,
        who: Who,
    ) -> ProposalOutcome:
        return memory.unlink(edge_id, principal=who, reason=body.reason)

    @router.get(
        "/records/{record_id}/edges",
        summary="The edges of a record the caller may see (keyset paging by id)",
    )
    def record_edges(
        record_id: RecordId,
        who: Who,
        type: Annotated[
            list[RelationName] | None, Query(max_length=MAX_LIST_ITEMS, description="edge types")
        ] = None,
        include_removed: bool = False,
        after: Annotated[
            Id | None, Query(description="the last edge id of the previous page")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[Edge]:
        return memory.edges(
            record_id,
            principal=who,
            types=type,
            include_removed=include_removed,
            after=after,
            limit=limit,
        )

    @router.post(
        "/graph/neighbours", summary="Walk the graph from records, checking permission on every hop"
    )
    def neighbours(body: NeighboursBody, who: Who) -> Neighbourhood:
        return memory.neighbours(
            body.anchors,
            principal=who,
            types=body.types,
            direction=body.direction,
            hops=body.hops,
            limit=body.limit,
        )

    return router
