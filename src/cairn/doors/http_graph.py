"""The decision graph's HTTP routes: ``POST /v1/graph/ask`` and ``/v1/graph/query`` (why a
decision came about, for the caller's role), ``GET /v1/graph/roles`` (the profiles and the
keys a passport names) and ``GET /v1/traces/{id}`` with its downloads. A thin door: the
policy passport headers are parsed here and checked by the kernel against the key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi import Path as PathParam

from cairn.doors.http_common import Who, api_router
from cairn.graph.passport import OPTIONAL_HEADERS, REQUIRED_HEADERS, parse_passport
from cairn.graph.why import WhyRequest
from cairn.memory import Memory

__all__ = ["graph_router"]

TraceId = Annotated[str, PathParam(min_length=1, max_length=64, description="a trace id, trc_…")]
Download = Annotated[
    str, PathParam(pattern="^bundle_(view|full)$", description="bundle_view or bundle_full")
]
_PASSPORT_DOC = (
    "Needs the policy passport headers: "
    + ", ".join(f"`{h}`" for h in REQUIRED_HEADERS)
    + " (optional: "
    + ", ".join(f"`{h}`" for h in OPTIONAL_HEADERS)
    + "). They may only narrow what the key's principal reads; `X-Policy-Key` is the "
    "`policy_key` of the role in `GET /v1/graph/roles`. A missing, malformed or widening "
    "header is refused, naming it."
)


# The two ways to ask why: (mode, summary, description; the passport note follows it).
_WHY_ROUTES: tuple[tuple[Literal["ask", "query"], str, str], ...] = (
    (
        "ask",
        "Why a decision came about, as a short templated answer for your role",
        "Walks the decision graph from `anchor` (a record id or a graph key) only along edges "
        "your role may walk, keeps only what it may read, ranks it, clips it to the token "
        "budget and composes the answer from what is left. `_meta` says what was withheld (as "
        "counts, reasons and per-answer handles, never ids) and what the budget left out. ",
    ),
    (
        "query",
        "Why a decision came about, answered by the configured LLM",
        "As `/graph/ask`, but an OpenAI-compatible chat endpoint (when the server has one) "
        "writes the answer from the same permitted evidence; without one, or when it fails, "
        "the templated answer comes back with `fallback_used`. ",
    ),
)


def graph_router(memory: Memory) -> APIRouter:
    router = api_router(tags=["graph"])

    def answering(mode: Literal["ask", "query"]) -> Callable[..., dict[str, Any]]:
        def answer(body: WhyRequest, who: Who, request: Request) -> dict[str, Any]:
            passport = parse_passport(request.headers)
            return memory.why(body, principal=who, passport=passport, mode=mode)

        return answer

    # /graph/ask and /graph/query differ only in who writes the answer
    for mode, summary, description in _WHY_ROUTES:
        router.add_api_route(
            f"/graph/{mode}",
            answering(mode),
            methods=["POST"],
            name=mode,
            summary=summary,
            description=description + _PASSPORT_DOC,
        )

    @router.get(
        "/graph/roles",
        summary="The graph role profiles you may ask as, with their policy keys",
    )
    def roles(who: Who) -> list[dict[str, Any]]:
        return memory.graph_roles(principal=who)

    @router.get(
        "/traces/{trace_id}",
        summary="A graph answer's trace: your own copy, or the audit copy for a curator",
    )
    def trace(trace_id: TraceId, who: Who) -> dict[str, Any]:
        return memory.trace(trace_id, principal=who)

    @router.get(
        "/traces/{trace_id}/downloads/{name}",
        summary="A graph answer's bundle_view or bundle_full zip, when its meta allows it",
        response_class=Response,
        responses={200: {"content": {"application/zip": {}}}},
    )
    def download(trace_id: TraceId, name: Download, who: Who) -> Response:
        data = memory.trace_download(trace_id, name, principal=who)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{trace_id}-{name}.zip"'},
        )

    return router
