"""The MCP door: memory tools and record resources for coding agents.

One ``MCPServer`` serves both transports: ``cairn mcp`` (stdio, the principal fixed by the
key given at start-up) and streamable HTTP at ``/mcp`` inside ``cairn serve`` (the principal
taken from each request's ``Authorization: Bearer`` key). Tools only read, propose or record
drafts: nothing that approves, rejects, archives, publishes or promotes is registered here,
so no MCP client can reach a curator action whatever key it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from cairn.errors import CairnError, InvalidInput
from cairn.memory import Memory, RecordView
from cairn.model import (
    Content,
    ContentPatch,
    Decision,
    Principal,
    ProposalOutcome,
    Record,
    RecordQuery,
    Selector,
    SelectorKind,
    Status,
)
from cairn.retrieval.context import (
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.types import RetrievalResult, SearchResult

__all__ = ["MCP_TOOLS", "PrincipalFor", "StoreResult", "bearer_key", "build_mcp_server"]

T = TypeVar("T")
PrincipalFor = Callable[[Context], Principal]

MCP_TOOLS = (
    "memory_store",
    "memory_retrieve",
    "memory_search",
    "memory_get",
    "memory_list",
    "memory_validate",
    "memory_get_context",
    "memory_propose",
    "memory_record_candidate",
    "memory_get_relevant",
    "memory_for_path",
    "memory_for_symbol",
    "memory_validate_claims",
    "memory_research",
)

_DEFAULT_SCOPE = "default"
_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

_STATUS_WORD: dict[Decision, Literal["approved", "pending", "rejected"]] = {
    Decision.APPROVE: "approved",
    Decision.QUEUE: "pending",
    Decision.REJECT: "rejected",
}


class StoreResult(BaseModel):
    """What happened to a write: approved at once, pending a curator, or rejected."""

    id: str | None = Field(description="the record id, once the record exists")
    status: Literal["approved", "pending", "rejected"]
    reason: str | None = None
    proposal_id: str
    version_id: str | None = None
    record_status: Status | None = None


class RecordList(BaseModel):
    records: list[Record]
    limit: int
    offset: int
    count: int


def _stored(outcome: ProposalOutcome) -> StoreResult:
    return StoreResult(
        id=outcome.record.id if outcome.record else outcome.proposal.record_id,
        status=_STATUS_WORD[outcome.decision],
        reason=outcome.feedback or outcome.proposal.reason,
        proposal_id=outcome.proposal.id,
        version_id=outcome.version.id if outcome.version else None,
        record_status=outcome.record.status if outcome.record else None,
    )


def _run(fn: Callable[[], T]) -> T:
    """Turn a kernel error into a tool error the agent can read: ``[code] message``."""
    try:
        return fn()
    except CairnError as exc:
        raise ToolError(f"[{exc.code}] {exc.message}") from exc
    except ValueError as exc:  # a model validator refused the arguments
        raise ToolError(f"[invalid_input] {exc}") from exc


def _title_of(text: str, title: str | None) -> str:
    if title and title.strip():
        return title
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise InvalidInput("content must not be blank", field="content")
    return first if len(first) <= 120 else first[:117] + "..."


def bearer_key(headers: Any) -> str | None:
    """The key from an ``Authorization: Bearer <key>`` header, if any."""
    if headers is None:
        return None
    value = headers.get("authorization") or headers.get("Authorization")
    if not isinstance(value, str):
        return None
    scheme, _, key = value.partition(" ")
    return key.strip() or None if scheme.lower() == "bearer" else None


def build_mcp_server(memory: Memory, principal_for: PrincipalFor) -> MCPServer:
    server: MCPServer = MCPServer(
        "cairn",
        title="cairn memory",
        version="0.1.0",
        instructions=(
            "Governed memory. Read with memory_get_context / memory_retrieve / memory_search; "
            "cite records by (id, version_id). You may only propose changes (memory_store, "
            "memory_propose) or record drafts (memory_record_candidate): a policy or a human "
            "curator decides. Treat draft and 'inferred' records as non-authoritative."
        ),
    )

    def who(ctx: Context) -> Principal:
        return _run(lambda: principal_for(ctx))

    @server.tool(annotations=_WRITE)
    def memory_store(
        type: Annotated[str, Field(description="record kind: decision, belief, episode, skill, …")],
        content: Annotated[str, Field(description="the memory itself; first line is the title")],
        ctx: Context,
        scope: Annotated[str, Field(description="where it lives, e.g. acme/product")] = (
            _DEFAULT_SCOPE
        ),
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        tags: list[str] | None = None,
        temporal_valid_from: datetime | None = None,
        temporal_valid_to: datetime | None = None,
    ) -> StoreResult:
        """Create a new memory record. It goes through the gate: the policy approves it at once,
        queues it for a curator ('pending'), or rejects it with a reason. Returns the record id
        when the record exists."""
        principal = who(ctx)

        def call() -> StoreResult:
            body = Content(
                kind=type,
                scope=scope,
                title=_title_of(content, title),
                body=content,
                tags=tuple(tags or ()),
                metadata=metadata or {},
                valid_from=temporal_valid_from,
                valid_to=temporal_valid_to,
            )
            return _stored(memory.remember(body, principal=principal))

        return _run(call)

    @server.tool(annotations=_READ)
    def memory_retrieve(
        query: str,
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
        vector_weight: Annotated[float, Field(ge=0)] = 0.6,
        keyword_weight: Annotated[float, Field(ge=0)] = 0.4,
        max_tokens: Annotated[int, Field(ge=1)] = 8000,
        mode: Literal["vector", "keyword", "hybrid"] = "hybrid",
        scope: Annotated[str | None, Field(description="a scope or glob, e.g. acme/*")] = None,
        include_drafts: bool = False,
    ) -> RetrievalResult:
        """Hybrid search with validation: ranked items with version-pinned citations,
        why each was included, scores, contradictions, and whether the token budget clipped
        anything."""
        principal = who(ctx)
        return _run(
            lambda: memory.retrieve(
                query,
                principal=principal,
                k=top_k,
                max_tokens=max_tokens,
                mode=mode,
                scope=scope,
                include_drafts=include_drafts,
                weights={"vector": vector_weight, "keyword": keyword_weight},
            )
        )

    @server.tool(annotations=_READ)
    def memory_search(
        query: str,
        ctx: Context,
        mode: Literal["vector", "keyword", "hybrid"] = "hybrid",
        top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
        scope: str | None = None,
        include_drafts: bool = False,
    ) -> SearchResult:
        """Simple ranked search (vector, keyword or hybrid) without validation or budget;
        faster than memory_retrieve for low-stakes lookups."""
        principal = who(ctx)
        return _run(
            lambda: memory.search(
                query,
                principal=principal,
                mode=mode,
                k=top_k,
                scope=scope,
                include_drafts=include_drafts,
            )
        )

    @server.tool(annotations=_READ)
    def memory_get(
        id: Annotated[str, Field(description="record id, e.g. rec_01J…")],
        ctx: Context,
        version: Annotated[int | None, Field(ge=1, description="a version number")] = None,
    ) -> RecordView:
        """One record by id: its current state and the chosen version (head unless a version
        number is given). Unknown or invisible ids fail with [not_found]."""
        principal = who(ctx)
        return _run(lambda: memory.get(id, principal=principal, version=version))

    @server.tool(annotations=_READ)
    def memory_list(
        ctx: Context,
        type: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        metadata_filter: Annotated[
            dict[str, Any] | None, Field(description="exact-match metadata, e.g. {'impact': 'low'}")
        ] = None,
        status: Status | None = None,
        scope: Annotated[str | None, Field(description="a scope glob, e.g. acme/*")] = None,
        limit: Annotated[int, Field(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> RecordList:
        """List records by kind, creation time, status, scope or metadata, paginated."""
        principal = who(ctx)

        def call() -> RecordList:
            query = RecordQuery(
                kinds=(type,) if type else (),
                statuses=(status,) if status else (),
                scope=scope,
                created_after=created_after,
                created_before=created_before,
                metadata=metadata_filter or {},
                limit=limit,
                offset=offset,
            )
            found = memory.list_records(query, principal=principal)
            return RecordList(records=found, limit=limit, offset=offset, count=len(found))

        return _run(call)

    @server.tool(annotations=_READ)
    def memory_validate(ids: list[str], ctx: Context) -> ValidationReport:
        """May these cited records still be relied on? Per record: exists, current, valid
        (not expired), active; plus contradictions among them."""
        principal = who(ctx)
        return _run(lambda: memory.validate(ids, principal=principal))

    @server.tool(annotations=_READ)
    def memory_get_context(
        scope: str,
        ctx: Context,
        query: str | None = None,
        element_id: Annotated[str | None, Field(description="fetch one record directly")] = None,
        selector: Literal["published", "baseline_ref", "head", "version_ref"] = "published",
        baseline_id: str | None = None,
        version_id: str | None = None,
        top_k: Annotated[int, Field(ge=1, le=100)] = 10,
        max_tokens: Annotated[int, Field(ge=1)] = 8000,
        include_drafts: bool = False,
    ) -> ReadContextResponse:
        """Citeable read context for a scope: give a query (ranked) or element_id (direct).
        Items carry (record, version) citations and why each was included. 'published' reads
        the scope's published baseline."""
        principal = who(ctx)

        def call() -> ReadContextResponse:
            request = ReadContextRequest(
                scope=scope,
                selector=Selector(
                    kind=SelectorKind(selector), baseline_id=baseline_id, version_id=version_id
                ),
                query=query,
                record_id=element_id,
                k=top_k,
                max_tokens=max_tokens,
                include_drafts=include_drafts,
            )
            return memory.read_context(request, principal=principal)

        return _run(call)

    @server.tool(annotations=_WRITE)
    def memory_propose(
        op: Literal["create", "update", "supersede"],
        ctx: Context,
        record_id: str | None = None,
        base_version_id: Annotated[
            str | None, Field(description="the version you read; a stale base must be rebased")
        ] = None,
        content: Content | None = None,
        patch: ContentPatch | None = None,
        by: Annotated[str | None, Field(description="supersede by this existing record")] = None,
        reason: str | None = None,
    ) -> StoreResult:
        """Propose a durable change: create (content), update (record_id + patch, pinned to
        base_version_id) or supersede (record_id + by or content). A policy or a curator
        decides; the result says approved, pending or rejected."""
        principal = who(ctx)

        def call() -> StoreResult:
            if op == "create":
                if content is None:
                    raise InvalidInput("create needs content", field="content")
                return _stored(memory.remember(content, principal=principal, reason=reason))
            if record_id is None:
                raise InvalidInput(f"{op} needs record_id", field="record_id")
            if op == "update":
                if patch is None:
                    raise InvalidInput("update needs patch", field="patch")
                return _stored(
                    memory.update(
                        record_id,
                        patch,
                        principal=principal,
                        base_version_id=base_version_id,
                        reason=reason,
                    )
                )
            return _stored(
                memory.supersede(
                    record_id, principal=principal, by=by, content=content, reason=reason
                )
            )

        return _run(call)

    @server.tool(annotations=_WRITE)
    def memory_record_candidate(
        title: str,
        body: str,
        ctx: Context,
        kind: str = "fact",
        scope: str = _DEFAULT_SCOPE,
        paths: Annotated[
            list[str] | None, Field(description="repository files it is about")
        ] = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> StoreResult:
        """Record a draft note (non-authoritative until a human approves it). Use this for
        hand-offs and things worth remembering that are not yet settled."""
        principal = who(ctx)

        def call() -> StoreResult:
            draft = Content(
                kind=kind,
                scope=scope,
                title=title,
                body=body,
                tags=tuple(tags or ()),
                metadata=metadata or {},
            )
            return _stored(
                memory.remember(draft, principal=principal, draft=True, paths=tuple(paths or ()))
            )

        return _run(call)

    @server.tool(annotations=_READ)
    def memory_get_relevant(
        query: str,
        ctx: Context,
        scope: str | None = None,
        top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
        max_tokens: Annotated[int, Field(ge=1)] = 8000,
    ) -> RetrievalResult:
        """Memory relevant to the task at hand, drafts included (so hand-offs are visible);
        drafts are non-authoritative."""
        principal = who(ctx)
        return _run(
            lambda: memory.retrieve(
                query,
                principal=principal,
                k=top_k,
                max_tokens=max_tokens,
                scope=scope,
                include_drafts=True,
            )
        )

    @server.tool(annotations=_READ)
    def memory_for_path(
        path: Annotated[str, Field(description="a repository path, e.g. src/app/db.py")],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
        max_tokens: Annotated[int, Field(ge=1)] = 8000,
    ) -> RetrievalResult:
        """Memory linked to a repository file or folder, drafts included."""
        principal = who(ctx)
        return _run(
            lambda: memory.for_path(path, principal=principal, k=top_k, max_tokens=max_tokens)
        )

    @server.tool(annotations=_READ)
    def memory_for_symbol(
        symbol: Annotated[str, Field(description="a code symbol, e.g. Memory.retrieve")],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
        max_tokens: Annotated[int, Field(ge=1)] = 8000,
    ) -> RetrievalResult:
        """Memory that mentions a code symbol, drafts included."""
        principal = who(ctx)
        return _run(
            lambda: memory.for_symbol(symbol, principal=principal, k=top_k, max_tokens=max_tokens)
        )

    @server.tool(annotations=_READ)
    def memory_validate_claims(
        text: Annotated[str, Field(description="claims to check, e.g. a plan or an answer")],
        ctx: Context,
        scope: str | None = None,
    ) -> ClaimsReport:
        """Check each sentence against memory: supported, contradicted or unknown, with the
        evidence cited."""
        principal = who(ctx)
        return _run(lambda: memory.validate_claims(text, principal=principal, scope=scope))

    @server.tool(annotations=_READ)
    def memory_research(
        question: str,
        ctx: Context,
        scope: str | None = None,
        max_tokens: Annotated[int, Field(ge=1)] = 4000,
    ) -> ResearchAnswer:
        """The Researcher: plans a query, retrieves, retries up to three times and answers
        with a cited summary."""
        principal = who(ctx)
        return _run(
            lambda: memory.research(
                question, principal=principal, scope=scope, max_tokens=max_tokens
            )
        )

    def _read(record_id: str, version: int | None, ctx: Context) -> str:
        try:
            principal = principal_for(ctx)
            view = memory.get(record_id, principal=principal, version=version)
        except CairnError as exc:
            raise ResourceError(f"[{exc.code}] {exc.message}") from exc
        return json.dumps(view.model_dump(mode="json"), ensure_ascii=False)

    @server.resource(
        "cairn://record/{id}",
        mime_type="application/json",
        description="A record at its head version",
    )
    def record_resource(id: str, ctx: Context) -> str:
        record_id, _, version = id.partition("@")
        return _read(record_id, int(version) if version.isdigit() else None, ctx)

    @server.resource(
        "cairn://record/{id}@{version}",
        mime_type="application/json",
        description="A record at one version number",
    )
    def record_version_resource(id: str, version: str, ctx: Context) -> str:
        if not version.isdigit():
            raise ResourceError("[invalid_input] version must be a number")
        return _read(id, int(version), ctx)

    return server
