"""The JSON API's reads built on retrieval: an agent's context, ranked search and
retrieval, validation of cited records and claims, records by path or symbol, research."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, cast

from fastapi import APIRouter
from pydantic import Discriminator, Field, StrictBool, Tag

from cairn.doors.http_common import JsonInt, StrictBody, Weights, Who, api_router, branch_by_key
from cairn.limits import MAX_LIST_ITEMS
from cairn.memory import Memory
from cairn.model import Id, Kind, Name, QueryText, Question, RepoPath, Timestamp, VersionPin
from cairn.options import ReadFilters
from cairn.retrieval.context import (
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.types import Mode, RetrievalResult, SearchResult

__all__ = ["retrieval_router"]


class _ContextBody(ReadContextRequest):
    # JSON types only, as in every other body: no "1" for a number, no 0 for a boolean.
    max_tokens: JsonInt = Field(default=8000, ge=1, le=1_000_000)
    k: JsonInt = Field(default=10, ge=1, le=100)
    include_drafts: StrictBool = False


class ContextByQuery(_ContextBody):
    """Ranked context for a query."""

    query: QueryText
    record_id: None = None


class ContextOfRecord(_ContextBody):
    """One record of the scope, fetched directly."""

    query: None = None
    record_id: Id


ContextBody = Annotated[
    Annotated[ContextOfRecord, Tag("record_id")] | Annotated[ContextByQuery, Tag("query")],
    Discriminator(branch_by_key("record_id", "query")),
]


class _ReadBody(StrictBody):
    scope: Name | None = Field(default=None, description="a scope or glob, e.g. acme/*")
    selector: VersionPin | None = Field(default=None, description="default: head")
    kinds: Annotated[list[Kind], Field(max_length=MAX_LIST_ITEMS)] = Field(default_factory=list)
    include_drafts: StrictBool = False
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    record_ids: Annotated[list[Id], Field(max_length=10_000)] | None = None
    weights: Weights | None = Field(
        default=None,
        description="fusion weights, e.g. {'keyword': 0.4, 'vector': 0.6} (the defaults; "
        "{'keyword': 0.7, 'vector': 0.3} in a store embedded by the static embedder)",
    )


class RetrieveBody(_ReadBody):
    query: QueryText
    mode: Mode = "hybrid"
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class SearchBody(_ReadBody):
    query: QueryText
    mode: Mode = "hybrid"
    top_k: JsonInt = Field(default=10, ge=1, le=1000)


class ValidateBody(StrictBody):
    ids: Annotated[list[Id], Field(min_length=1, max_length=1000)]


class ForPathBody(StrictBody):
    path: RepoPath
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ForSymbolBody(StrictBody):
    symbol: Question
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ClaimsBody(StrictBody):
    text: Question
    scope: Name | None = None


class ResearchBody(StrictBody):
    question: Question
    scope: Name | None = None
    max_tokens: JsonInt = Field(default=4000, ge=1)


def retrieval_router(memory: Memory) -> APIRouter:
    """``/v1/read_context``, ``/v1/retrieve``, ``/v1/search`` and the reads built on them."""
    router = api_router(tags=["retrieval"])

    @router.post("/read_context", summary="Citeable context for a scope, version-pinned")
    def read_context(body: ContextBody, who: Who) -> ReadContextResponse:
        return memory.read_context(body, principal=who)

    def _read_filters(body: RetrieveBody | SearchBody) -> ReadFilters:
        return {
            "mode": body.mode,
            "k": body.top_k,
            "scope": body.scope,
            "selector": body.selector,
            "kinds": tuple(body.kinds),
            "include_drafts": body.include_drafts,
            "created_after": body.created_after,
            "created_before": body.created_before,
            "record_ids": body.record_ids,
            # the schema names the signals as literals; the kernel takes any name and checks it
            "weights": cast(Mapping[str, float] | None, body.weights),
        }

    @router.post(
        "/retrieve",
        response_model=RetrievalResult,
        summary="Ranked, validated retrieval with version-pinned citations",
    )
    def retrieve(body: RetrieveBody, who: Who) -> RetrievalResult:
        return memory.retrieve(
            body.query, principal=who, max_tokens=body.max_tokens, **_read_filters(body)
        )

    @router.post(
        "/search",
        response_model=SearchResult,
        summary="Raw ranked search without validation or budget",
    )
    def search(body: SearchBody, who: Who) -> SearchResult:
        return memory.search(body.query, principal=who, **_read_filters(body))

    @router.post("/validate", summary="May these cited records still be relied on?")
    def validate(body: ValidateBody, who: Who) -> ValidationReport:
        return memory.validate(body.ids, principal=who)

    @router.post("/for_path", summary="Memory linked to a repository path (drafts included)")
    def for_path(body: ForPathBody, who: Who) -> RetrievalResult:
        return memory.for_path(body.path, principal=who, k=body.top_k, max_tokens=body.max_tokens)

    @router.post("/for_symbol", summary="Memory that mentions a code symbol (drafts included)")
    def for_symbol(body: ForSymbolBody, who: Who) -> RetrievalResult:
        return memory.for_symbol(
            body.symbol, principal=who, k=body.top_k, max_tokens=body.max_tokens
        )

    @router.post("/validate_claims", summary="Check free-text claims against memory")
    def validate_claims(body: ClaimsBody, who: Who) -> ClaimsReport:
        return memory.validate_claims(body.text, principal=who, scope=body.scope)

    @router.post(
        "/research", summary="The Researcher: plan, retrieve, retry, summarise with citations"
    )
    def research(body: ResearchBody, who: Who) -> ResearchAnswer:
        return memory.research(
            body.question, principal=who, scope=body.scope, max_tokens=body.max_tokens
        )

    return router
