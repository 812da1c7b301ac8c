"""The MCP door: memory tools, record resources, prompts and completions for coding agents.

One ``MCPServer`` serves both transports: ``cairn mcp`` (stdio, the principal fixed by the
key given at start-up) and streamable HTTP at ``/mcp`` inside ``cairn serve`` (the principal
taken from each request's ``Authorization: Bearer`` key). Tools only read, propose or record
drafts: nothing that approves, rejects, archives, publishes or promotes is registered here,
so no MCP client can reach a curator action whatever key it holds.

Every answer is trimmed to what the caller may read: resources, prompts and completions use
only ``Memory`` calls that apply the caller's permissions, and a record the caller may not
see fails exactly like one that does not exist.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    EmptyResult,
    GetPromptResult,
    Icon,
    InputRequiredResult,
    PromptReference,
    SetLevelRequestParams,
    ToolAnnotations,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyUrl, BaseModel, Field, ValidationError

from cairn.errors import CairnError, InvalidInput, NotFound
from cairn.graph.why import WhyRequest
from cairn.memory import Memory, RecordView
from cairn.model import (
    Content,
    ContentPatch,
    Event,
    PinKind,
    Principal,
    ProposalOutcome,
    Record,
    RecordQuery,
    Status,
    Timestamp,
    Verdict,
    VersionPin,
)
from cairn.retrieval.context import (
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.types import Item, RetrievalResult, SearchResult
from cairn.timeline.views import ExpandedGrip, RecentContext, TeleportHit

__all__ = [
    "MCP_PROMPTS",
    "MCP_TOOLS",
    "PrincipalFor",
    "StoreResult",
    "bearer_key",
    "build_mcp_server",
    "validation_text",
]

log = logging.getLogger(__name__)

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
    "timeline_search",
    "timeline_recent",
    "timeline_expand",
    "timeline_events",
    "graph_why",
)

MCP_PROMPTS = ("task_context", "propose_memory", "check_claims")

RECORD_URI = "cairn://record/{id}"
RECORD_VERSION_URI = "cairn://record/{id}@{version}"
# "Resource not found" up to protocol 2025-11-25. The 2026-07-28 revision retired the code and
# answers an unknown resource with invalid params (-32602) instead, as the SDK does.
RESOURCE_NOT_FOUND = -32002
# The spec caps one completion answer at 100 values.
COMPLETION_CAP = 100
_VERSION_NUMBER = re.compile(r"[0-9]+")

_DEFAULT_SCOPE = "default"
_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

_STATUS_WORD: dict[Verdict, Literal["approved", "pending", "rejected"]] = {
    Verdict.APPROVE: "approved",
    Verdict.QUEUE: "pending",
    Verdict.REJECT: "rejected",
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


def validation_text(exc: ValidationError) -> str:
    """``field: message; ...`` for each error: no links to pydantic's documentation and no
    echo of the rejected value (the caller has it, and a log line or a model's context
    window should not collect it twice)."""
    parts: list[str] = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        # A validator's own ValueError reads "Value error, <its text>": keep only its text.
        message = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        field = ".".join(str(part) for part in error["loc"])
        parts.append(f"{field}: {message}" if field else message)
    return "; ".join(parts)


def _run(fn: Callable[[], T]) -> T:
    """Turn a kernel error into a tool error the agent can read: ``[code] message``."""
    try:
        return fn()
    except CairnError as exc:
        raise ToolError(f"[{exc.code}] {exc.public_message}") from exc
    except ValidationError as exc:  # a kernel model refused the arguments
        raise ToolError(f"[invalid_input] {validation_text(exc)}") from exc
    except ValueError as exc:  # a plain check refused them; its text is ours
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


def _cited(item: Item) -> str:
    return f"[{item.record_id}@{item.version_id}]"


def _completion(found: Sequence[str], *, complete: bool = True) -> Completion:
    """At most ``COMPLETION_CAP`` values; ``total`` only when the count is known."""
    return Completion(
        values=list(found[:COMPLETION_CAP]),
        total=len(found) if complete else None,
        has_more=len(found) > COMPLETION_CAP or not complete,
    )


class _CairnMCPServer(MCPServer[Any]):
    """``MCPServer`` plus the protocol behaviour cairn needs and the SDK leaves to servers.

    - tool descriptions are sent dedented;
    - tool arguments that fail their schema are reported as ``[invalid_input] field: message``,
      like the kernel's own refusals, without pydantic's links or the rejected value;
    - an unknown prompt, or one missing a required argument, is invalid params, not a crash;
    - a resource that is not there is -32002 for clients of protocol 2025-11-25 and earlier;
    - ``logging/setLevel`` and ``completion/complete`` are served, registered on the
      low-level server: ``MCPServer`` has no hook for the first (the SDK points to the
      low-level API for it), and its ``completion()`` hook does not see the request, while
      completions must know who asks to offer only what that principal may read.
    """

    def __init__(self, memory: Memory, principal_for: PrincipalFor, **settings: Any) -> None:
        super().__init__(**settings)
        self.memory = memory
        self.principal_for = principal_for
        lowlevel = self._lowlevel_server
        lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, self._set_level)
        lowlevel.add_request_handler("completion/complete", CompleteRequestParams, self._complete)

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        # The SDK takes a docstring as it is in the source, indentation and all: clients show
        # it and models read it, so it goes out dedented.
        super().add_tool(
            fn,
            name=name,
            title=title,
            description=description or inspect.cleandoc(fn.__doc__ or "") or None,
            annotations=annotations,
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            # The arguments failed the tool's input schema. Chained to the ValidationError so
            # the SDK logs only the field names.
            text = f"Error executing tool {name}: [invalid_input] {validation_text(cause)}"
            raise ToolError(text) from cause

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            # No template matches the URI: the SDK answers -32602, the code of protocol
            # 2026-07-28 on. Earlier clients get -32002, like a record that is not there.
            if context is None or context.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
                raise
            raise MCPError(RESOURCE_NOT_FOUND, str(exc), data={"uri": str(uri)}) from exc

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        known = {prompt.name: prompt for prompt in await self.list_prompts()}
        prompt = known.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt: {name}; prompts: {', '.join(known)}")
        accepted = {argument.name: argument.required for argument in prompt.arguments or ()}
        given = set(arguments or {})
        missing = sorted(n for n, required in accepted.items() if required and n not in given)
        unknown = sorted(given - set(accepted))
        if missing or unknown:
            problems = [f"missing argument {n}" for n in missing]
            problems += [f"no argument {n}" for n in unknown]
            raise MCPError(INVALID_PARAMS, f"prompt {name}: {'; '.join(problems)}")
        try:
            return await super().get_prompt(name, arguments, context)
        except MCPError:
            raise
        except Exception as exc:  # a crash while rendering: keep its text on the server
            log.exception("prompt %r failed", name)
            raise MCPError(INTERNAL_ERROR, f"prompt {name} could not be rendered") from exc

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        # cairn sends no log notifications to clients (its log goes to stderr), so there is
        # nothing to filter: the request is accepted so that clients which always send it work.
        return EmptyResult()

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams
    ) -> CompleteResult:
        context = Context(request_context=ctx, mcp_server=self)
        resolved = params.context.arguments if params.context else None

        def work() -> Completion:
            try:
                principal = self.principal_for(context)
                return self._completions(principal, params, resolved or {})
            except CairnError as exc:
                raise _protocol_error(exc, context) from exc

        if isinstance(params.ref, PromptReference):
            prompts = {prompt.name for prompt in await self.list_prompts()}
            if params.ref.name not in prompts:
                raise MCPError(INVALID_PARAMS, f"unknown prompt: {params.ref.name}")
        elif params.ref.uri not in (RECORD_URI, RECORD_VERSION_URI):
            raise MCPError(INVALID_PARAMS, f"unknown resource template: {params.ref.uri}")
        return CompleteResult(completion=await anyio.to_thread.run_sync(work))

    def _completions(
        self, principal: Principal, params: CompleteRequestParams, resolved: dict[str, str]
    ) -> Completion:
        name, value = params.argument.name, params.argument.value
        if isinstance(params.ref, PromptReference):
            return self._scopes(principal, value) if name == "scope" else _completion([])
        if name == "id":
            return self._record_ids(principal, value)
        if name == "version" and params.ref.uri == RECORD_VERSION_URI and "id" in resolved:
            return self._versions(principal, resolved["id"], value)
        return _completion([])

    def _record_ids(self, principal: Principal, prefix: str) -> Completion:
        found = self.memory.record_ids(prefix, principal=principal, limit=COMPLETION_CAP + 1)
        return _completion(found, complete=len(found) <= COMPLETION_CAP)

    def _scopes(self, principal: Principal, prefix: str) -> Completion:
        found = self.memory.scopes(prefix, principal=principal, limit=COMPLETION_CAP + 1)
        return _completion(found, complete=len(found) <= COMPLETION_CAP)

    def _versions(self, principal: Principal, record_id: str, prefix: str) -> Completion:
        try:
            versions = self.memory.history(record_id, principal=principal)
        except NotFound:  # unknown or unreadable: nothing to offer, and nothing to tell apart
            return _completion([])
        numbers = [str(v.number) for v in sorted(versions, key=lambda v: v.number)]
        return _completion([n for n in numbers if n.startswith(prefix)])


def build_mcp_server(memory: Memory, principal_for: PrincipalFor) -> MCPServer:
    server = _CairnMCPServer(
        memory,
        principal_for,
        name="cairn",
        title="cairn memory",
        version="0.1.0",
        instructions=(
            "Governed memory. Read with memory_get_context / memory_retrieve / memory_search; "
            "cite records by (id, version_id). You may only propose changes (memory_store, "
            "memory_propose) or record drafts (memory_record_candidate): a policy or a human "
            "curator decides. Treat draft and 'inferred' records as non-authoritative. "
            "Prompts: task_context (cited memory for a task), propose_memory (how to propose "
            "a memory so it is not a duplicate), check_claims (check a plan or an answer)."
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
        temporal_valid_from: Timestamp | None = None,
        temporal_valid_to: Timestamp | None = None,
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
        created_after: Timestamp | None = None,
        created_before: Timestamp | None = None,
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
                selector=VersionPin(
                    kind=PinKind(selector), baseline_id=baseline_id, version_id=version_id
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

    @server.tool(annotations=_READ)
    def timeline_search(
        query: str,
        ctx: Context,
        scope: str | None = None,
        top_k: Annotated[int, Field(ge=1, le=100)] = 10,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
    ) -> list[TeleportHit]:
        """Search past conversations and tool calls: the summaries (segments, days, weeks…)
        and grips that best match, each grip pointing at the exact events it came from."""
        principal = who(ctx)
        return _run(
            lambda: memory.timeline_search(
                query, principal=principal, scope=scope, k=top_k, since=since, until=until
            )
        )

    @server.tool(annotations=_READ)
    def timeline_recent(
        ctx: Context,
        scope: str | None = None,
        session_id: str | None = None,
        max_tokens: Annotated[int, Field(ge=50, le=100_000)] = 2000,
    ) -> RecentContext:
        """What happened lately, newest first, within a token budget: the latest segments'
        bullets, then older days and weeks, each cited to its node version and grips."""
        principal = who(ctx)
        return _run(
            lambda: memory.timeline_recent(
                principal=principal, scope=scope, session_id=session_id, max_tokens=max_tokens
            )
        )

    @server.tool(annotations=_READ)
    def timeline_expand(
        grip_id: Annotated[str, Field(description="a grip id from a summary, grp_…")],
        ctx: Context,
        before: Annotated[int, Field(ge=0, le=50)] = 3,
        after: Annotated[int, Field(ge=0, le=50)] = 3,
    ) -> ExpandedGrip:
        """The events behind a grip, with a few more on either side."""
        principal = who(ctx)
        return _run(
            lambda: memory.expand_grip(grip_id, principal=principal, before=before, after=after)
        )

    @server.tool(annotations=_READ)
    def timeline_events(
        ctx: Context,
        scope: str | None = None,
        session_id: str | None = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> list[Event]:
        """Raw conversation and tool events, in the order they happened."""
        principal = who(ctx)
        return _run(
            lambda: memory.events(
                principal=principal,
                scope=scope,
                session_id=session_id,
                since=since,
                until=until,
                limit=limit,
            )
        )

    @server.tool(annotations=_READ)
    def graph_why(
        anchor: Annotated[
            str,
            Field(
                description="the decision's graph key or record id, e.g. "
                "acme-prod-sunset-onprem-connectors-2024"
            ),
        ],
        ctx: Context,
        question: Annotated[
            str | None, Field(description="what you want to know; steers the ranking")
        ] = None,
        role: Annotated[
            str | None,
            Field(description="ask as this graph role: your own (the default) or a lower one"),
        ] = None,
        hops: Annotated[int, Field(ge=1, le=3, description="how far to walk the graph")] = 1,
    ) -> dict[str, Any]:
        """Why a decision was taken, at the fidelity your role may see. Use it when asked
        why something was decided or what led to it. The answer is built only from the
        decisions and events your role may read (the evidence, each cited by record and
        version), and says when something was withheld from you; `_meta` holds the
        counts and reasons. Example: graph_why(anchor="acme-prod-sunset-onprem-connectors-2024",
        question="why did we sunset the on-prem connectors?")."""
        principal = who(ctx)
        request = WhyRequest(anchor=anchor, question=question, hops=hops)
        return _run(lambda: memory.why(request, principal=principal, role=role))

    def _read(uri: str, record_id: str, version: str | None, ctx: Context) -> str:
        if version is not None and not _VERSION_NUMBER.fullmatch(version):
            raise MCPError(
                INVALID_PARAMS,
                "[invalid_input] version must be a whole number, as in cairn://record/<id>@2",
                data={"uri": uri},
            )
        try:
            principal = principal_for(ctx)
            view = memory.get(
                record_id, principal=principal, version=None if version is None else int(version)
            )
        except CairnError as exc:
            raise _protocol_error(exc, ctx, data={"uri": uri}, resource=True) from exc
        return json.dumps(view.model_dump(mode="json"), ensure_ascii=False)

    @server.resource(
        RECORD_URI,
        mime_type="application/json",
        description="A record at its head version, with its current state",
    )
    def record_resource(id: str, ctx: Context) -> str:
        # Record ids never hold "@", and this template's {id} also matches "<id>@<version>"
        # (it is tried first): read such a URI as the versioned one, so that a version which
        # is not a number is refused instead of silently answering the head.
        record_id, at, version = id.partition("@")
        uri = RECORD_URI.format(id=id)
        return _read(uri, record_id, version if at else None, ctx)

    @server.resource(
        RECORD_VERSION_URI,
        mime_type="application/json",
        description="A record at one version number (1 is the first)",
    )
    def record_version_resource(id: str, version: str, ctx: Context) -> str:
        return _read(RECORD_VERSION_URI.format(id=id, version=version), id, version, ctx)

    _register_prompts(server, memory, principal_for)
    return server


def _protocol_error(
    exc: CairnError, ctx: Context, *, data: Any = None, resource: bool = False
) -> MCPError:
    """A kernel error as a JSON-RPC error outside tools (resources, prompts, completions)."""
    if isinstance(exc, NotFound) and resource:
        legacy = ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        code = RESOURCE_NOT_FOUND if legacy else INVALID_PARAMS
    elif isinstance(exc, InvalidInput | NotFound):
        code = INVALID_PARAMS
    else:
        code = INTERNAL_ERROR
    return MCPError(code, f"[{exc.code}] {exc.public_message}", data=data)


def _items(items: Iterable[Item]) -> list[str]:
    lines: list[str] = []
    for number, item in enumerate(items, 1):
        # dict.fromkeys: the confidence label and a flag may both say "inferred".
        notes = dict.fromkeys([item.kind, item.status, item.confidence_label, *item.flags])
        lines.append(f"{number}. {_cited(item)} {item.title} ({', '.join(notes)})")
        lines.extend(f"   {line}" for line in item.content.splitlines() if line.strip())
    return lines


# Prompt descriptions are given whole: the SDK would pass a docstring on with its indentation.
_TASK_CONTEXT = (
    "The governed memory relevant to a task, most relevant first, each item cited as "
    "[record_id@version_id], drafts and inferred items marked, contradictions listed. Only "
    "records you may read are included."
)
_PROPOSE_MEMORY = (
    "How to add something to governed memory without duplicating or overwriting it: the "
    "similar records you may read in that scope (with the version to base an update on), then "
    "the steps to cite, update, supersede, store or draft."
)
_CHECK_CLAIMS = (
    "Each sentence of a plan or an answer checked against the memory you may read: supported, "
    "contradicted or unknown, with the records it was checked against cited, and what to do "
    "about each."
)


def _register_prompts(server: MCPServer, memory: Memory, principal_for: PrincipalFor) -> None:
    """Prompts for the three things an agent does with governed memory: read it for a task
    (with citations), add to it the right way, and check its own claims against it."""

    def mode() -> Literal["hybrid", "keyword"]:
        # Without an embedder the memory answers keyword searches only.
        return "hybrid" if memory.has_vectors() else "keyword"

    def kernel(fn: Callable[[], T], ctx: Context) -> T:
        try:
            return fn()
        except CairnError as exc:
            raise _protocol_error(exc, ctx) from exc
        except ValidationError as exc:
            raise MCPError(INVALID_PARAMS, f"[invalid_input] {validation_text(exc)}") from exc

    def who(ctx: Context) -> Principal:
        return kernel(lambda: principal_for(ctx), ctx)

    @server.prompt(title="Memory for a task", description=_TASK_CONTEXT)
    def task_context(
        task: Annotated[str, Field(description="what you are about to do")],
        ctx: Context,
        scope: Annotated[
            str | None, Field(description="limit to a scope or scope glob, e.g. acme/*")
        ] = None,
    ) -> str:
        scope = scope or None  # clients often send an empty string for "not given"
        principal = who(ctx)
        found = kernel(
            lambda: memory.retrieve(
                task, principal=principal, scope=scope, k=8, max_tokens=4000, mode=mode()
            ),
            ctx,
        )
        where = f" in scope {scope}" if scope else ""
        if not found.items:
            return (
                f"Task: {task}\n\nNo readable memory{where} matches this task. Go ahead "
                "without it, and do not cite records you have not read."
            )
        lines = [
            f"Task: {task}",
            "",
            f"Governed memory{where} relevant to this task, most relevant first. Each item is "
            "cited as [record_id@version_id]: cite it that way when you rely on it, and read "
            "the whole record at cairn://record/<record_id> if you need more. Items marked "
            "draft_non_authoritative or inferred are not settled: check them before relying "
            "on them.",
            "",
            *_items(found.items),
        ]
        if found.contradictions:
            lines += ["", "These items contradict each other; do not rely on either blindly:"]
            lines += [
                f"- [{c.record_ids[0]}@{c.version_ids[0]}] and "
                f"[{c.record_ids[1]}@{c.version_ids[1]}]: {c.reason}"
                for c in found.contradictions
            ]
        if found.excluded_count:
            lines += [
                "",
                f"{found.excluded_count} more relevant item(s) did not fit; ask memory_retrieve "
                "for them if you need them.",
            ]
        lines += [
            "",
            "If you learn something worth keeping while you work, propose it (see the "
            "propose_memory prompt): nothing is stored until a result says approved.",
        ]
        return "\n".join(lines)

    @server.prompt(title="Propose a memory", description=_PROPOSE_MEMORY)
    def propose_memory(
        memory_text: Annotated[str, Field(alias="memory", description="what should be remembered")],
        scope: Annotated[str, Field(description="the scope it belongs in, e.g. acme/app")],
        ctx: Context,
        kind: Annotated[
            str | None, Field(description="record kind: fact, decision, belief, skill, …")
        ] = None,
    ) -> str:
        principal = who(ctx)
        similar = kernel(
            lambda: memory.search(
                memory_text,
                principal=principal,
                scope=scope,
                k=5,
                include_drafts=True,
                mode=mode(),
            ),
            ctx,
        )
        if similar.hits:
            found = [
                f"   - [{hit.record_id}@{hit.version_id}] {hit.title} "
                f"({hit.kind}, {hit.status}, version {hit.version})"
                for hit in similar.hits
            ]
        else:
            found = ["   - none among the records you may read."]
        kind_word = kind or "fact"
        return "\n".join(
            [
                f"You want to remember, in scope {scope}: {memory_text}",
                "",
                "This memory is governed: you propose, a policy or a curator decides. Go step "
                "by step:",
                f"1. Check it is new. Similar records in {scope}:",
                *found,
                "2. If one of them already says it, do not propose it again: cite that record "
                "as [record_id@version_id] instead.",
                '3. If one of them should change, call memory_propose with op "update", its '
                "record_id, base_version_id set to the version id shown above, and a patch "
                "with only the fields that change. If you are told the base is stale, read "
                "the record again (memory_get) and redo the patch on the new version.",
                "4. If it replaces an old record outright, call memory_propose with op "
                '"supersede", the old record_id and the new content (or by, an existing '
                "record's id).",
                f'5. Otherwise call memory_store with type "{kind_word}", scope "{scope}" and '
                "content whose first line is a short title. If it is not settled yet (a "
                "guess, a hand-off, a to-do), call memory_record_candidate instead: a draft "
                "is non-authoritative until a person approves it.",
                '6. Read the result. "approved": it is stored; cite its id and version_id. '
                '"pending": a curator will decide; do not rely on it yet. "rejected": read '
                "the reason and fix the cause; do not send the same proposal again.",
            ]
        )

    @server.prompt(title="Check claims against memory", description=_CHECK_CLAIMS)
    def check_claims(
        text: Annotated[str, Field(description="a plan, an answer or notes to check")],
        ctx: Context,
        scope: Annotated[str | None, Field(description="a scope or scope glob to check in")] = (
            None
        ),
    ) -> str:
        scope = scope or None
        principal = who(ctx)
        report = kernel(lambda: memory.validate_claims(text, principal=principal, scope=scope), ctx)
        where = f" in scope {scope}" if scope else ""
        lines = [f"Each claim checked against governed memory{where}:", ""]
        for check in report.claims:
            lines.append(f"- {check.verdict}: {check.claim}")
            if check.verdict != "unknown":  # an unknown claim's near misses are only noise
                lines += [
                    f"    checked against {_cited(item)} {item.title}" for item in check.evidence
                ]
        lines += [
            "",
            "Revise or drop each contradicted claim, citing the record that contradicts it. "
            "Cite the evidence for supported claims as [record_id@version_id]. Present unknown "
            "claims as unverified, not as settled.",
        ]
        return "\n".join(lines)
