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
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, ValidationError

from cairn.errors import CairnError, InvalidInput, NotFound
from cairn.graph.why import WhyRequest
from cairn.limits import MAX_COUNTER, MAX_TIMELINE_HITS
from cairn.memory import Memory, RecordView
from cairn.model import (
    Content,
    ContentPatch,
    Event,
    Id,
    Name,
    PinKind,
    Principal,
    ProposalOutcome,
    Record,
    RecordQuery,
    RepoPath,
    Status,
    Timestamp,
    Verdict,
    VersionPin,
    event_cursor,
)
from cairn.retrieval.context import ClaimsReport, ResearchAnswer, ValidationReport
from cairn.retrieval.types import Item, Mode, RetrievalResult
from cairn.timeline.views import ExpandedGrip, RecentContext, TimelineHits

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
F = TypeVar("F", bound=Callable[..., Any])
PrincipalFor = Callable[[Context], Principal]

MCP_TOOLS = (
    "remember",
    "recall",
    "read",
    "list",
    "propose_change",
    "check",
    "research",
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
# A version number in a resource URI: digits, few enough to read as a number at once (the
# kernel says which numbers a version may have).
_VERSION_NUMBER = re.compile(r"[0-9]{1,20}")
_GLOB = re.compile(r"[*?\[]")

_READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

# Parameters several tools take, each described once.
_ScopeGlob = Annotated[str | None, Field(description="only this scope or scope glob, e.g. acme/*")]
_TimelineScope = Annotated[str | None, Field(description="only this scope or scope glob")]
_SessionId = Annotated[str | None, Field(description="only this session")]
_NotBefore = Annotated[Timestamp | None, Field(description="not before (RFC 3339)")]
_NotAfter = Annotated[Timestamp | None, Field(description="not after (RFC 3339)")]

_STATUS_WORD: dict[Verdict, Literal["approved", "pending", "rejected"]] = {
    Verdict.APPROVE: "approved",
    Verdict.QUEUE: "pending",
    Verdict.REJECT: "rejected",
}


class StoreResult(BaseModel):
    """What happened to a write: approved at once, pending a curator, or rejected."""

    id: str | None = Field(description="the record id, once the record exists")
    status: Literal["approved", "pending", "rejected"] = Field(
        description="approved: stored; pending: a curator decides; rejected: see reason"
    )
    reason: str | None = Field(default=None, description="why, in the policy's words")
    proposal_id: str
    version_id: str | None = Field(default=None, description="the version the write made")
    record_status: Status | None = Field(
        default=None, description="the record's status now (draft for a draft)"
    )


class RecordPage(BaseModel):
    """A page of records, oldest first."""

    records: list[Record]
    count: int = Field(description="how many records this page holds")
    limit: int
    offset: int
    next_after: str | None = Field(
        description="pass it as after for the next page; null when this page is the last"
    )


class CheckReport(BaseModel):
    """What ``check`` found: the cited records' state, the claims' verdicts, or both."""

    records: ValidationReport | None = Field(
        default=None, description="per record id: may it still be relied on, and why not"
    )
    claims: ClaimsReport | None = Field(
        default=None, description="per sentence: supported, contradicted or unknown"
    )


class EventPage(BaseModel):
    events: list[Event] = Field(description="in the order they happened")


class WhyResult(BaseModel):
    """The decision graph's answer: the text, the evidence it rests on (each item cited)
    and ``_meta`` (what was found, withheld and left out, and why)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    trace_id: str
    answer: str
    envelope: dict[str, Any]
    evidence: list[dict[str, Any]]
    meta: dict[str, Any] = Field(alias="_meta")


# ---- what a model reads about each tool ----------------------------------------------------
# Each says what the tool does, when to use it and gives one example call. They are plain
# strings, not docstrings, so that nothing of the source's indentation reaches a client.

_INSTRUCTIONS = (
    "Governed memory for this project and team. Read before you work: recall (or research "
    "for an open question) and cite what you rely on as [record_id@version_id]; read a record "
    "in full with read. Keep what you learn with remember, and correct memory with "
    "propose_change: a policy or a human curator decides, so a write is approved, pending or "
    "rejected, and only approved ones count. Treat drafts and items marked inferred as "
    "unsettled; check cited records or your own claims with check. The timeline tools "
    "(timeline_recent, timeline_search, timeline_expand, timeline_events) read past "
    "conversations; graph_why explains a decision. Prompts: task_context, propose_memory, "
    "check_claims."
)

_REMEMBER = """\
Store one new memory. It goes through the gate: this store's policy approves it at once \
(status "approved"), queues it for a human curator ("pending"), or refuses it with a reason \
("rejected"). With draft true it is recorded at once as an unsettled note that no one relies \
on until a person approves it.

Use it when you learn something worth keeping beyond this conversation: a decision, a fact, \
a convention, a hand-off. Look first with recall: if a record already says it, cite that \
record; if one should change, use propose_change. Write the memory itself in body (its first \
line is the title unless you give one). Without scope it goes to your default scope; if you \
have none, the error lists the scopes you may write. Kinds this store takes: {kinds}.

Example: {"kind": "decision", "body": "Deploys run on Tuesdays only.\\nFriday deploys broke \
production twice in March.", "scope": "acme/app", "tags": ["deploy"]}"""

_RECALL = """\
Find the memory relevant to something: the records you may read, best first, each with its \
text, why it was included and a citation to the exact version ([record_id@version_id]), \
plus contradictions between them and what the token budget left out.

Use it before a task, to answer from memory, or to see what is known about a file or a \
code symbol. Give exactly one of query (words or a question), path (memory linked to a \
repository file or folder) or symbol (memory that names a code symbol). Items with status \
draft or marked inferred are not settled. Kinds this store takes: {kinds}.

Example: {"query": "how do we deploy on Fridays", "scope": "acme/*", "top_k": 5}"""

_READ_RECORD = """\
One record by id: its state (status, whether it was superseded and by what) and one version \
of its content, the latest unless you ask for a version number or a version id.

Use it to read a cited record in full, or to get the version_id to pin a propose_change \
to. A record you may not read answers [not_found], exactly like one that does not exist.

Example: {"record_id": "rec_01JBX2Q7ZC4M6V3PN8W0T5KD9E", "version": 1}"""

_LIST = """\
The records you may read, oldest first, a page at a time, filtered by kind, status, scope \
and creation time. No ranking and no text budget: for what is relevant to a question, use \
recall.

Use it to survey a scope ("every decision in acme/app") or to walk all records. For the \
next page pass next_after as after. Kinds this store takes: {kinds}.

Example: {"kind": ["decision"], "status": ["active"], "scope": "acme/*", "limit": 20}"""

_PROPOSE = """\
Propose a change to a record that exists. op "update" edits some of its fields (patch), \
pinned to the version you read (base_version_id) so that a change made meanwhile is not \
overwritten; op "supersede" replaces it, by another existing record (by) or by a new one \
(content). Like remember, it goes through the gate: approved, pending a curator, or \
rejected with a reason. Archiving, approving and publishing are for curators and are not \
offered here.

Use it when a memory is wrong, out of date or incomplete. Read the record first (read or \
recall) for its version_id; if you are told the base is stale, read it again and redo the \
patch on the new version.

Example: {"op": "update", "record_id": "rec_01JBX2Q7ZC4M6V3PN8W0T5KD9E", "base_version_id": \
"ver_01JBX2Q7ZD8N1F6RS2Y4A7HC3M", "patch": {"body": "Deploys run on Tuesdays and \
Thursdays."}, "reason": "the schedule changed in May"}"""

_CHECK = """\
Check what you are about to rely on. With ids: whether each record may still be relied on \
(you may read it, it is active, current, not superseded and not expired) and whether they \
contradict each other. With text: each sentence of a plan or an answer marked supported, \
contradicted or unknown against the memory you may read, with the records it was checked \
against. Give ids, text or both.

Use it before you act on records you found earlier, and before you present a plan or an \
answer as settled.

Example: {"ids": ["rec_01JBX2Q7ZC4M6V3PN8W0T5KD9E"], "text": "We deploy on Fridays."}"""

_RESEARCH = """\
Answer a question from memory: it plans a search, retrieves, tries again with other \
wording (up to three times) and returns a short summary citing each record it used, with \
the items themselves.

Use it for an open question that needs several records put together; for a plain lookup, \
recall is faster.

Example: {"question": "why did we move the backups to Saturday night?", "scope": "acme/*"}"""

_TIMELINE_SEARCH = """\
Search past conversations and tool calls (the timeline): the summaries (segments, days, \
weeks, ...) that best match q, each with grips pointing at the exact events it came from.

Use it for "what did we say about X" or "when did we last touch Y". Before you rely on a \
summary, read its events with timeline_expand.

Example: {"q": "backup window", "since": "2026-03-01T00:00:00Z", "k": 5}"""

_TIMELINE_RECENT = """\
What happened lately, newest first, within a token budget: the latest segments' bullets, \
then older days and weeks, each cited to its node version and grips.

Use it at the start of a session ("where were we?") or after a break.

Example: {"scope": "code/myproject", "max_tokens": 1000}"""

_TIMELINE_EXPAND = """\
The events behind a grip (from timeline_search or timeline_recent), with a few more on \
either side: what was actually said or done.

Use it to check a summary against its source before you rely on it; cite an event as \
(event_id, ts).

Example: {"grip_id": "grp_01JBX2Q7ZE0K5T2VW9B6D1FG4N", "before": 2, "after": 2}"""

_TIMELINE_EVENTS = """\
Raw conversation and tool events you may read, in the order they happened, a page at a \
time.

Use it to read a span of time or a session in full (timeline_search finds where to look). \
For the next page pass the last event's ts, event_id and scope as after_ts, after_id and \
after_scope.

Example: {"session_id": "s-42", "since": "2026-03-02T09:00:00Z", "limit": 50}"""

_GRAPH_WHY = """\
Why a decision was taken, at the fidelity your graph role may see: an answer built only \
from the decisions and events your role may read (the evidence, each cited by record and \
version), saying when something was withheld from you; _meta holds the counts and reasons.

Use it when asked why something was decided or what led to it. You may ask as a lower \
role than your own (role) to see what that role would be told.

Example: {"anchor": "acme-prod-sunset-onprem-connectors-2024", "question": "why did we \
sunset the on-prem connectors?"}"""


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
        raise InvalidInput("body must not be blank: it is the memory itself", field="body")
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
        instructions=_INSTRUCTIONS,
    )

    def who(ctx: Context) -> Principal:
        return _run(lambda: principal_for(ctx))

    def as_caller(ctx: Context, call: Callable[[Principal], T]) -> T:
        """``call`` as the principal the request's key names; a kernel error (a bad key's
        too) comes back as a tool error the agent can read."""
        principal = who(ctx)
        return _run(lambda: call(principal))

    def tool(
        name: str, title: str, description: str, annotations: ToolAnnotations = _READ
    ) -> Callable[[F], F]:
        """Register a tool; most only read, so that is the default."""
        return server.tool(name=name, title=title, description=description, annotations=annotations)

    def auto_mode(mode: Mode | None) -> Mode:
        # Without an embedder the memory answers keyword searches only.
        if mode is not None:
            return mode
        return "hybrid" if memory.has_vectors() else "keyword"

    kind_names = ", ".join(memory.record_kinds())

    def described(text: str) -> str:
        return text.replace("{kinds}", kind_names)

    @tool("remember", "Remember", described(_REMEMBER), _WRITE)
    def remember(
        kind: Annotated[
            str,
            Field(
                min_length=1,
                description="what sort of memory it is (one of the kinds the description lists)",
            ),
        ],
        body: Annotated[
            str,
            Field(
                description="the memory itself, in plain words; its first line is the title "
                "unless you give one",
            ),
        ],
        ctx: Context,
        scope: Annotated[
            str | None,
            Field(description="where it belongs, e.g. acme/app; default: your default scope"),
        ] = None,
        title: Annotated[
            str | None, Field(description="a short title; default: the first line of body")
        ] = None,
        tags: Annotated[list[str] | None, Field(description='labels, e.g. ["deploy"]')] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description='structured facts, e.g. {"impact": "low"}')
        ] = None,
        valid_from: Annotated[
            Timestamp | None, Field(description="when it starts to hold (RFC 3339)")
        ] = None,
        valid_to: Annotated[
            Timestamp | None, Field(description="when it stops holding (RFC 3339)")
        ] = None,
        draft: Annotated[
            bool,
            Field(
                description="true records an unsettled note (a guess, a hand-off, a to-do): "
                "stored at once, non-authoritative until a person approves it"
            ),
        ] = False,
        paths: Annotated[
            list[str] | None, Field(description='repository files it is about, e.g. ["src/db.py"]')
        ] = None,
        reason: Annotated[str | None, Field(description="why it is worth keeping")] = None,
    ) -> StoreResult:
        def call(principal: Principal) -> StoreResult:
            content = Content(
                kind=kind,
                scope=scope or memory.default_scope(principal=principal),
                title=_title_of(body, title),
                body=body,
                tags=tuple(tags or ()),
                metadata=metadata or {},
                valid_from=valid_from,
                valid_to=valid_to,
            )
            outcome = memory.remember(
                content, principal=principal, draft=draft, paths=tuple(paths or ()), reason=reason
            )
            return _stored(outcome)

        return as_caller(ctx, call)

    @server.tool(name="recall", title="Recall", description=described(_RECALL), annotations=_READ)
    def recall(
        ctx: Context,
        query: Annotated[
            str | None, Field(description="what you are looking for, in words or as a question")
        ] = None,
        path: Annotated[
            RepoPath | None,
            Field(description="a repository file or folder: the memory linked to it"),
        ] = None,
        symbol: Annotated[
            str | None, Field(description="a code symbol, e.g. Memory.retrieve: memory naming it")
        ] = None,
        scope: Annotated[
            str | None, Field(description="only this scope or scope glob, e.g. acme/*")
        ] = None,
        kinds: Annotated[
            list[str] | None, Field(description="only these kinds (listed in the description)")
        ] = None,
        top_k: Annotated[int, Field(ge=1, le=1000, description="at most this many items")] = 10,
        max_tokens: Annotated[
            int, Field(ge=1, description="the token budget for the items' text")
        ] = 8000,
        include_drafts: Annotated[
            bool | None,
            Field(
                description="include unsettled drafts (hand-offs, notes); default: no for a "
                "query, yes for a path or a symbol"
            ),
        ] = None,
        mode: Annotated[
            Mode | None,
            Field(
                description="hybrid, keyword or vector; default: hybrid when the store has "
                "vectors, else keyword"
            ),
        ] = None,
        selector: Annotated[
            Literal["head", "published"],
            Field(
                description="head: the latest versions; published: the scope's published baseline"
            ),
        ] = "head",
    ) -> RetrievalResult:
        principal = who(ctx)

        def call() -> RetrievalResult:
            given = [name for name, v in (("query", query), ("path", path), ("symbol", symbol))
                     if v is not None]  # fmt: skip
            if len(given) != 1:
                raise InvalidInput(
                    "give exactly one of query, path or symbol"
                    + (f" (got {', '.join(given)})" if given else ""),
                    field="query",
                )
            if path is not None:
                for name, value in (("scope", scope), ("kinds", kinds), ("mode", mode)):
                    if value is not None:
                        raise InvalidInput(
                            f"{name} does not apply to path: a path reads every record linked "
                            "to the file or folder; leave it out, or search with query",
                            field=name,
                        )
                if selector != "head" or include_drafts is False:
                    raise InvalidInput(
                        "a path reads the head versions, drafts included; search with query "
                        "for anything else",
                        field="selector" if selector != "head" else "include_drafts",
                    )
                return memory.for_path(path, principal=principal, k=top_k, max_tokens=max_tokens)
            if symbol is not None and mode not in (None, "keyword"):
                raise InvalidInput("a symbol is looked up by keyword: leave mode out", field="mode")
            drafts = include_drafts if include_drafts is not None else symbol is not None
            found = memory.retrieve(
                query if query is not None else symbol or "",
                principal=principal,
                k=top_k,
                max_tokens=max_tokens,
                mode="keyword" if symbol is not None else auto_mode(mode),
                scope=scope,
                kinds=tuple(kinds or ()),
                include_drafts=drafts,
                selector=VersionPin(kind=PinKind(selector)),
            )
            if (
                selector == "published"
                and scope is not None
                and not _GLOB.search(scope)
                # a scope the caller may not read reads exactly like one never published
                and memory.published_baseline_id(scope, principal=principal) is None
            ):
                warning = f"nothing is published in {scope} yet: recall with selector head"
                found = found.model_copy(update={"warnings": (*found.warnings, warning)})
            return found

        return _run(call)

    @tool("read", "Read a record", _READ_RECORD)
    def read(
        record_id: Annotated[str, Field(description="the record's id, e.g. rec_01J…")],
        ctx: Context,
        version: Annotated[
            int | None,
            Field(ge=1, le=MAX_COUNTER, description="a version number, 1 for the first"),
        ] = None,
        version_id: Annotated[
            Id | None, Field(description="a version id from a citation, e.g. ver_01J…")
        ] = None,
    ) -> RecordView:
        def call(principal: Principal) -> RecordView:
            if version is not None and version_id is not None:
                raise InvalidInput("give version or version_id, not both", field="version_id")
            pin = (
                VersionPin(kind=PinKind.VERSION_REF, version_id=version_id) if version_id else None
            )
            return memory.get(record_id, principal=principal, version=version, selector=pin)

        return as_caller(ctx, call)

    @tool("list", "List records", described(_LIST))
    def list_records(
        ctx: Context,
        kind: Annotated[
            list[str] | None, Field(description="only these kinds (listed in the description)")
        ] = None,
        status: Annotated[
            list[Status] | None, Field(description='only these statuses, e.g. ["active"]')
        ] = None,
        scope: _ScopeGlob = None,
        created_after: Annotated[Timestamp | None, Field(description="RFC 3339")] = None,
        created_before: Annotated[Timestamp | None, Field(description="RFC 3339")] = None,
        limit: Annotated[int, Field(ge=1, le=10_000, description="records per page")] = 100,
        offset: Annotated[int, Field(ge=0, le=MAX_COUNTER, description="records to skip")] = 0,
        after: Annotated[
            str | None, Field(description="next_after of the previous page, for the next one")
        ] = None,
    ) -> RecordPage:
        def call(principal: Principal) -> RecordPage:
            query = RecordQuery(
                kinds=tuple(kind or ()),
                statuses=tuple(status or ()),
                scope=scope,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                offset=offset,
                after=after,
            )
            found = memory.list_records(query, principal=principal)
            return RecordPage(
                records=found,
                count=len(found),
                limit=limit,
                offset=offset,
                next_after=found[-1].id if len(found) == limit else None,
            )

        return as_caller(ctx, call)

    @tool("propose_change", "Propose a change", _PROPOSE, _WRITE)
    def propose_change(
        op: Annotated[
            Literal["update", "supersede"],
            Field(description="update: edit some fields; supersede: replace the record"),
        ],
        record_id: Annotated[str, Field(description="the record to change, e.g. rec_01J…")],
        ctx: Context,
        base_version_id: Annotated[
            str | None,
            Field(description="update: the version_id you read (from read or recall)"),
        ] = None,
        patch: Annotated[
            ContentPatch | None,
            Field(description='update: only the fields that change, e.g. {"body": "…"}'),
        ] = None,
        by: Annotated[
            str | None, Field(description="supersede: the existing record that replaces it")
        ] = None,
        content: Annotated[
            Content | None,
            Field(
                description="supersede: a new record that replaces it (kind, scope, title, body, …)"
            ),
        ] = None,
        reason: Annotated[str | None, Field(description="why it should change")] = None,
    ) -> StoreResult:
        def call(principal: Principal) -> StoreResult:
            if op == "update":
                for name, value in (("by", by), ("content", content)):
                    if value is not None:
                        raise InvalidInput(
                            f"{name} is for supersede; update takes patch", field=name
                        )
                if patch is None:
                    raise InvalidInput("update needs patch: the fields that change", field="patch")
                if base_version_id is None:
                    raise InvalidInput(
                        "update needs base_version_id: read the record (read or recall) and "
                        "pass its version_id, so that a change made meanwhile is not overwritten",
                        field="base_version_id",
                    )
                outcome = memory.update(
                    record_id,
                    patch,
                    principal=principal,
                    base_version_id=base_version_id,
                    reason=reason,
                )
                return _stored(outcome)
            if patch is not None:
                raise InvalidInput(
                    "patch is for update; supersede takes by or content", field="patch"
                )
            if (by is None) == (content is None):
                raise InvalidInput("supersede needs exactly one of by or content", field="by")
            outcome = memory.supersede(
                record_id, principal=principal, by=by, content=content, reason=reason
            )
            return _stored(outcome)

        return as_caller(ctx, call)

    @tool("check", "Check", _CHECK)
    def check(
        ctx: Context,
        ids: Annotated[
            list[Id] | None,
            Field(max_length=1000, description="record ids you cite or rely on"),
        ] = None,
        text: Annotated[
            str | None, Field(description="claims to check: a plan, an answer or notes")
        ] = None,
        scope: Annotated[
            str | None, Field(description="check text against this scope or glob only")
        ] = None,
    ) -> CheckReport:
        def call(principal: Principal) -> CheckReport:
            if not ids and text is None:
                raise InvalidInput("give ids, text or both", field="ids")
            if scope is not None and text is None:
                raise InvalidInput("scope applies to text: give text", field="scope")
            return CheckReport(
                records=memory.validate(ids, principal=principal) if ids else None,
                claims=(
                    memory.validate_claims(text, principal=principal, scope=scope)
                    if text is not None
                    else None
                ),
            )

        return as_caller(ctx, call)

    @tool("research", "Research", _RESEARCH)
    def research(
        question: Annotated[str, Field(description="the question to answer from memory")],
        ctx: Context,
        scope: _ScopeGlob = None,
        max_tokens: Annotated[
            int, Field(ge=1, description="the token budget for the cited items")
        ] = 4000,
    ) -> ResearchAnswer:
        return as_caller(
            ctx,
            lambda principal: memory.research(
                question, principal=principal, scope=scope, max_tokens=max_tokens
            ),
        )

    @tool("timeline_search", "Search the timeline", _TIMELINE_SEARCH)
    def timeline_search(
        q: Annotated[str, Field(description="what to look for in past conversations")],
        ctx: Context,
        scope: _TimelineScope = None,
        k: Annotated[
            int, Field(ge=1, le=MAX_TIMELINE_HITS, description="at most this many hits")
        ] = 10,
        since: _NotBefore = None,
        until: _NotAfter = None,
    ) -> TimelineHits:
        return as_caller(
            ctx,
            lambda principal: memory.timeline_search(
                q, principal=principal, scope=scope, k=k, since=since, until=until
            ),
        )

    @tool("timeline_recent", "Recent context", _TIMELINE_RECENT)
    def timeline_recent(
        ctx: Context,
        scope: _TimelineScope = None,
        session_id: _SessionId = None,
        max_tokens: Annotated[
            int, Field(ge=50, le=100_000, description="the token budget of the answer")
        ] = 2000,
    ) -> RecentContext:
        return as_caller(
            ctx,
            lambda principal: memory.timeline_recent(
                principal=principal, scope=scope, session_id=session_id, max_tokens=max_tokens
            ),
        )

    @tool("timeline_expand", "Expand a grip", _TIMELINE_EXPAND)
    def timeline_expand(
        grip_id: Annotated[str, Field(description="a grip id from a summary, grp_…")],
        ctx: Context,
        before: Annotated[
            int, Field(ge=0, le=50, description="events of context before the grip")
        ] = 3,
        after: Annotated[
            int, Field(ge=0, le=50, description="events of context after the grip")
        ] = 3,
    ) -> ExpandedGrip:
        return as_caller(
            ctx,
            lambda principal: memory.expand_grip(
                grip_id, principal=principal, before=before, after=after
            ),
        )

    @tool("timeline_events", "Timeline events", _TIMELINE_EVENTS)
    def timeline_events(
        ctx: Context,
        scope: _TimelineScope = None,
        session_id: _SessionId = None,
        since: _NotBefore = None,
        until: _NotAfter = None,
        after_ts: Annotated[
            Timestamp | None, Field(description="the ts of the last event of the previous page")
        ] = None,
        after_id: Annotated[
            Id | None, Field(description="the event_id of the last event of the previous page")
        ] = None,
        after_scope: Annotated[
            Name | None, Field(description="the scope of the last event of the previous page")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=10_000, description="events per page")] = 100,
    ) -> EventPage:
        def call(principal: Principal) -> EventPage:
            if (after_ts is None) != (after_id is None):
                raise InvalidInput("give after_ts and after_id together", field="after_id")
            found = memory.events(
                principal=principal,
                scope=scope,
                session_id=session_id,
                since=since,
                until=until,
                after=event_cursor(after_ts, after_id, after_scope),
                limit=limit,
            )
            return EventPage(events=found)

        return as_caller(ctx, call)

    @tool("graph_why", "Why", _GRAPH_WHY)
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
    ) -> WhyResult:
        def call(principal: Principal) -> WhyResult:
            request = WhyRequest(anchor=anchor, question=question, hops=hops)
            return WhyResult.model_validate(memory.why(request, principal=principal, role=role))

        return as_caller(ctx, call)

    def _read(uri: str, record_id: str, version: str | None, ctx: Context) -> str:
        if version is not None and not _VERSION_NUMBER.fullmatch(version):
            raise MCPError(
                INVALID_PARAMS,
                "[invalid_input] version must be a whole number from 1 to 2**53, as in "
                "cairn://record/<id>@2",
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
                f"{found.excluded_count} more relevant item(s) did not fit; call recall with "
                "this task as query and a larger max_tokens if you need them.",
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
                '3. If one of them should change, call propose_change with op "update", its '
                "record_id, base_version_id set to the version id shown above, and a patch "
                "with only the fields that change. If you are told the base is stale, read "
                "the record again (read) and redo the patch on the new version.",
                "4. If it replaces an old record outright, call propose_change with op "
                '"supersede", the old record_id and the new content (or by, an existing '
                "record's id).",
                f'5. Otherwise call remember with kind "{kind_word}", scope "{scope}" and the '
                "memory as body (its first line is the title). If it is not settled yet (a "
                "guess, a hand-off, a to-do), add draft true: a draft is non-authoritative "
                "until a person approves it.",
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
