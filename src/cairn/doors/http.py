"""The HTTP door: every kernel verb under ``/v1``, as a FastAPI app.

Each route parses, authenticates the ``Authorization: Bearer`` key to a ``Principal``, makes
one ``Memory`` call and renders the result. Errors are ``ErrorBody`` JSON with the kernel's
stable ``code``; the status comes from the one table in ``_errors``. Routes are plain ``def``
functions on purpose: the kernel is synchronous (SQLite), so FastAPI runs them in its thread
pool and the event loop stays free for MCP and A2A streams.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, Literal

from annotated_types import Gt
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    ValidationError,
)
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.doors._errors import PROBLEM_JSON, ErrorBody, error_body, problem
from cairn.errors import CairnError, InvalidInput, PolicyError, Unauthenticated
from cairn.ingest.files import IngestReport
from cairn.limits import (
    MAX_COUNTER,
    MAX_LIST_ITEMS,
    MAX_RECORD_BATCH,
    MAX_REQUEST_BYTES,
    LimitExceeded,
    TextLimit,
    load_json,
)
from cairn.memory import DEFAULT_EMBEDDER, MAX_HOPS, Memory, RecordView, RefreshReport, VacuumReport
from cairn.model import (
    KIND_MARKER,
    AuditEntry,
    AuditQuery,
    Baseline,
    Content,
    ContentPatch,
    Direction,
    Edge,
    EdgeDraft,
    Id,
    Kind,
    Name,
    Neighbourhood,
    PinKind,
    Principal,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    QueryText,
    Question,
    Reason,
    Record,
    RecordQuery,
    RelationName,
    RepoPath,
    RepoPaths,
    ScopePath,
    Status,
    Timestamp,
    Version,
    VersionPin,
)
from cairn.retrieval.context import (
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.types import Mode, RetrievalResult, SearchResult
from cairn.workspace import Workspace

__all__ = [
    "API_PREFIX",
    "BodyLimit",
    "authenticate_http",
    "create_app",
    "door_health",
    "error_response",
]

API_PREFIX = "/v1"
log = logging.getLogger("cairn.http")


class _TooLarge(StarletteHTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the limit of {limit:,} bytes")


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, for every route of the app (the
    HTTP API, MCP and A2A): by ``Content-Length`` before anything is read, and by counting
    when a body streams without one. Nothing of a refused request reaches a handler."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and (not value.isdigit() or int(value) > self.limit):
                error = _TooLarge(self.limit)
                await _send_problem(send, problem(413, "payload_too_large", error.detail))
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised into the handler reading the body; the app's exception handler
                    # answers it like any HTTP error (FastAPI passes HTTPExceptions through).
                    raise _TooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


async def _send_problem(send: Send, body: ErrorBody) -> None:
    payload = body.model_dump_json(exclude_none=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": body.status,
            "headers": [(b"content-type", PROBLEM_JSON.encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class _JsonRequest(Request):
    """A request whose JSON body is read with ``load_json``: JSON nested past the request
    limit is refused (422, naming the limit) before the parser sees it."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                # finite=False: the models refuse NaN and infinities themselves, by field name
                self._json = load_json(await self.body(), "the request body", finite=False)
            except LimitExceeded as exc:
                # FastAPI passes HTTP exceptions raised while it reads a body through as they are
                raise StarletteHTTPException(422, str(exc)) from None
        return self._json


class _JsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Any]:
        handle = super().get_route_handler()

        async def route(request: Request) -> Response:
            answer: Response = await handle(_JsonRequest(request.scope, request.receive))
            return answer

        return route


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _json_number(value: object) -> object:
    # JSON numbers only: no "10" strings and no booleans (pydantic's lax mode takes both).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_number)]
JsonFloat = Annotated[float, BeforeValidator(_json_number)]
# Weights of the two recall signals: finite and positive over HTTP (to leave a signal out,
# choose the mode that does: keyword or vector).
Weights = Annotated[
    dict[
        Literal["keyword", "vector"],
        # the constraints come before the JSON-number check so that the schema states them
        Annotated[float, Gt(0), AllowInfNan(False), BeforeValidator(_json_number)],
    ],
    Field(max_length=2),
]
RecordId = Annotated[str, PathParam(min_length=1, description="a record id, e.g. rec_01J…")]
ProposalId = Annotated[str, PathParam(min_length=1, description="a proposal id, e.g. prp_01J…")]


def _err(status: int, description: str, code: str, detail: str) -> dict[str, Any]:
    example = problem(status, code, detail).model_dump(exclude_none=True)
    return {
        "model": ErrorBody,
        "description": description,
        "content": {PROBLEM_JSON: {"example": example}},
    }


# Every route may answer these; declaring them keeps the OpenAPI document honest.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _err(400, "The body is not valid JSON", "malformed_json", "the body is not valid JSON"),
    401: _err(401, "No key, or an unknown or revoked key", "unauthenticated", "unknown API key"),
    403: _err(
        403,
        "The principal's role lacks the permission",
        "permission_denied",
        "only a curator may publish; agent is not one",
    ),
    405: _err(405, "The path does not take this method", "method_not_allowed", "Not Allowed"),
    404: _err(
        404, "No such thing, or not visible to this principal", "not_found", "no record 'rec_1'"
    ),
    409: _err(
        409,
        "The world changed under the request",
        "stale_proposal",
        "proposal prp_1 is stale: rebase it first",
    ),
    413: _err(
        413,
        "The request body is larger than the server takes",
        "payload_too_large",
        f"the request body is over the limit of {MAX_REQUEST_BYTES:,} bytes",
    ),
    422: _err(422, "The request is invalid", "invalid_input", "title: must not be blank"),
    503: _err(503, "The store or the server's configuration failed", "store_error", "store locked"),
}


# ---- request bodies ------------------------------------------------------------------------


class RememberBody(_Body):
    content: Content
    draft: StrictBool = False
    paths: RepoPaths = ()
    reason: Reason | None = None


class UpdateBody(_Body):
    patch: ContentPatch
    base_version_id: Id | None = None
    reason: Reason | None = None


class SupersedeByRecord(_Body):
    by: Id = Field(description="the existing record that replaces this one")
    reason: Reason | None = None


class SupersedeWithContent(_Body):
    content: Content = Field(description="a new record that replaces this one")
    reason: Reason | None = None


def _has_key(key: str, otherwise: str) -> Callable[[Any], str]:
    def tag(value: Any) -> str:
        return key if isinstance(value, dict) and key in value else otherwise

    return tag


# Exactly one of the two, said in the schema: a replacement by id or by new content. The
# body's own keys choose the branch, so an error speaks of that branch's fields only.
SupersedeBody = Annotated[
    Annotated[SupersedeByRecord, Tag("by")] | Annotated[SupersedeWithContent, Tag("content")],
    Discriminator(_has_key("by", "content")),
]


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
    Discriminator(_has_key("record_id", "query")),
]


class TransitionBody(_Body):
    to: Status
    reason: Reason | None = None


class ReasonBody(_Body):
    reason: Reason | None = None


class LinkBody(_Body):
    edge: EdgeDraft
    reason: Reason | None = None


class NeighboursBody(_Body):
    anchors: Annotated[tuple[Id, ...], Field(min_length=1, max_length=MAX_LIST_ITEMS)]
    types: Annotated[tuple[RelationName, ...], Field(max_length=MAX_LIST_ITEMS)] | None = None
    direction: Direction = Direction.OUT
    hops: Annotated[int, Field(ge=1, le=MAX_HOPS)] = 1
    limit: Annotated[int, Field(ge=1, le=1000)] = 100


class DecisionBody(_Body):
    approve: StrictBool
    reason: Reason | None = None


class PublishBody(_Body):
    scope: ScopePath
    record_ids: Annotated[list[Id], Field(max_length=10_000)] | None = None
    pins: Annotated[dict[Id, Id | None], Field(max_length=10_000)] | None = None
    name: Name | None = None
    replace: StrictBool = False
    reason: Reason | None = None


class _ReadBody(_Body):
    scope: Name | None = Field(default=None, description="a scope or glob, e.g. acme/*")
    selector: VersionPin | None = Field(default=None, description="default: head")
    kinds: Annotated[list[Kind], Field(max_length=MAX_LIST_ITEMS)] = Field(default_factory=list)
    include_drafts: StrictBool = False
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    record_ids: Annotated[list[Id], Field(max_length=10_000)] | None = None
    weights: Weights | None = Field(
        default=None, description="fusion weights, e.g. {'keyword': 0.4, 'vector': 0.6}"
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


class ValidateBody(_Body):
    ids: Annotated[list[Id], Field(min_length=1, max_length=1000)]


class ForPathBody(_Body):
    path: RepoPath
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ForSymbolBody(_Body):
    symbol: Question
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ClaimsBody(_Body):
    text: Question
    scope: Name | None = None


class ResearchBody(_Body):
    question: Question
    scope: Name | None = None
    max_tokens: JsonInt = Field(default=4000, ge=1)


# Repository-relative only: over the network a caller must not name files outside the tree
# (no leading slash, no ".." segment). Written without look-arounds for pydantic's regex.
_SEGMENT = r"(?:[^./\\\x00][^/\\\x00]*|\.[^./\\\x00][^/\\\x00]*|\.\.[^/\\\x00]+|\.)"
_RELATIVE_PATH = rf"^{_SEGMENT}(?:[/\\]{_SEGMENT})*[/\\]?$"


class IngestBody(_Body):
    paths: list[Annotated[str, TextLimit(4096, min_chars=1, pattern=_RELATIVE_PATH)]] = Field(
        min_length=1,
        max_length=MAX_LIST_ITEMS,
        description="files, folders or globs relative to the project folder, under an ingest "
        "root the policy opens to the caller",
    )
    scope: ScopePath
    kind: Kind = "document"


class BulkBody(_Body):
    contents: list[Content] = Field(min_length=1, max_length=1000)


class BatchBody(_Body):
    contents: list[Content] = Field(min_length=1, max_length=MAX_RECORD_BATCH)
    draft: StrictBool = False


class Health(BaseModel):
    """Whether the server is up. Anyone may ask, so it says nothing about the store."""

    status: str = Field(examples=["ok"])
    ready: bool


# ---- authentication ------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="a cairn API key (`cairn keys create`)")


def _principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    # The principals file is re-read per request so a revoked key stops working at once.
    workspace: Workspace = request.app.state.cairn_workspace
    return authenticate_http(workspace, creds.credentials if creds else None)


def authenticate_http(workspace: Workspace, key: str | None) -> Principal:
    """The principal of a bearer key, for every HTTP door (``/v1``, ``/mcp``, A2A)."""
    if not key:
        raise Unauthenticated("no API key: send the header 'Authorization: Bearer <key>'")
    return workspace.authenticate(key)


Who = Annotated[Principal, Depends(_principal)]


def door_health(workspace: Workspace, memory: Memory | None) -> Health:
    """Ready only when the store answers and the principals file parses. What failed goes
    to the log, never to the (unauthenticated) caller."""
    if memory is None:
        return Health(status="starting", ready=False)
    try:
        memory.ping()
        workspace.principals()
    except CairnError as exc:
        log.error("health check failed", extra={"fields": {"error": exc.message}})
        return Health(status="unavailable", ready=False)
    return Health(status="ok", ready=True)


def problem_response(body: ErrorBody, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=body.status,
        headers=headers,
        media_type=PROBLEM_JSON,
    )


def error_response(exc: CairnError) -> JSONResponse:
    if isinstance(exc, PolicyError):
        # The operator reads which file and line; the caller reads that it is broken.
        log.error("configuration error", extra={"fields": {"error": exc.message}})
    headers = (
        {"WWW-Authenticate": 'Bearer realm="cairn"'} if isinstance(exc, Unauthenticated) else None
    )
    return problem_response(error_body(exc), headers)


_HTTP_CODES = {
    400: "malformed_json",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    422: "invalid_input",
}
# Starlette's own words are fine except for 400, which FastAPI raises for any body its JSON
# parser cannot read (such as one that is not UTF-8).
_HTTP_DETAILS = {400: "the request body is not valid JSON"}


def _allowed_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for this path (Starlette names only those of
    the first route that matched)."""
    methods: set[str] = set()
    paths: dict[str, dict[str, Any]] = request.app.openapi().get("paths", {})
    for template, item in paths.items():
        pattern = "^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, request.url.path):
            methods |= {m.upper() for m in item if m.lower() in _HTTP_METHODS}
    return sorted(methods)


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


# The tags of the bodies that are one of two shapes (``_has_key``): an error's location
# starts with the tag of the branch it was checked against, which the caller never wrote.
_BRANCH_TAGS = frozenset({"by", "content", "query", "record_id"})


def _where(loc: Sequence[Any]) -> list[str]:
    parts = [str(p) for p in loc if p != "body"]
    if len(parts) >= 2 and parts[0] == parts[1] and parts[0] in _BRANCH_TAGS:
        parts = parts[1:]
    return parts


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def _cairn_error(request: Request, exc: CairnError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return problem_response(
                problem(400, "malformed_json", "the request body is not valid JSON")
            )
        parts: list[str] = []
        for error in errors:
            where = ".".join(_where(error.get("loc", ())))
            message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
            parts.append(f"{where}: {message}" if where else message)
        return problem_response(problem(422, "invalid_input", "; ".join(parts) or "invalid"))

    @app.exception_handler(ValidationError)
    async def _model_refused(request: Request, exc: ValidationError) -> JSONResponse:
        # A kernel model's validator refused arguments the route's schema let through.
        return error_response(InvalidInput.from_validation(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (unreadable body, unknown path, wrong method) in our shape.
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        detail = _HTTP_DETAILS.get(exc.status_code, str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return problem_response(problem(exc.status_code, code, detail), headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        # One failing request never takes the server down; the details stay in the log.
        log.exception("request failed", extra={"fields": {"path": request.url.path}})
        return problem_response(
            problem(500, "internal_error", "internal error; the server log has the details")
        )


def _selector(kind: PinKind, baseline_id: str | None, version_id: str | None) -> VersionPin:
    try:
        return VersionPin(kind=kind, baseline_id=baseline_id, version_id=version_id)
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None


# Query parameters that are lists; any other parameter given twice is refused, not guessed at.
_LIST_PARAMS: dict[str, frozenset[str]] = {f"{API_PREFIX}/records": frozenset({"kind", "status"})}


def _single_valued(request: Request) -> None:
    route = request.scope.get("route")
    lists = _LIST_PARAMS.get(getattr(route, "path", ""), frozenset())
    keys = [key for key, _ in request.query_params.multi_items()]
    repeated = sorted({k for k in keys if keys.count(k) > 1 and k not in lists})
    if repeated:
        raise InvalidInput(
            f"query parameter {repeated[0]!r} given more than once", field=repeated[0]
        )


def build_router(memory: Memory) -> APIRouter:
    router = APIRouter(
        prefix=API_PREFIX,
        responses=COMMON_ERRORS,
        dependencies=[Depends(_single_valued)],
        route_class=_JsonRoute,
    )

    # ---- records -----------------------------------------------------------------------

    @router.post(
        "/records",
        response_model=ProposalOutcome,
        tags=["records"],
        summary="Propose a new record (or record a draft)",
    )
    def remember(body: RememberBody, who: Who) -> ProposalOutcome:
        return memory.remember(
            body.content, principal=who, draft=body.draft, paths=body.paths, reason=body.reason
        )

    @router.get(
        "/records",
        response_model=list[Record],
        tags=["records"],
        summary="List records visible to the caller",
    )
    def list_records(
        who: Who,
        kind: Annotated[list[Kind] | None, Query(max_length=MAX_LIST_ITEMS)] = None,
        status: Annotated[list[Status] | None, Query()] = None,
        scope: Name | None = None,
        created_after: Timestamp | None = None,
        created_before: Timestamp | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
        after: Annotated[
            Id | None, Query(description="the last id of the previous page (keyset paging)")
        ] = None,
    ) -> list[Record]:
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
        return memory.list_records(query, principal=who)

    @router.get(
        "/records/{record_id}",
        response_model=RecordView,
        tags=["records"],
        summary="One record at the version a selector chooses",
    )
    def get_record(
        record_id: RecordId,
        who: Who,
        selector: PinKind = PinKind.HEAD,
        baseline_id: Id | None = None,
        version_id: Id | None = None,
    ) -> RecordView:
        chosen = _selector(selector, baseline_id, version_id)
        return memory.get(record_id, principal=who, selector=chosen)

    @router.get(
        "/records/{record_id}/resolve",
        response_model=Record,
        tags=["records"],
        summary="Follow the supersession chain to its end",
    )
    def resolve(record_id: RecordId, who: Who) -> Record:
        return memory.resolve(record_id, principal=who)

    @router.get(
        "/records/{record_id}/versions",
        response_model=list[Version],
        tags=["versions"],
        summary="Every version of a record the caller may see",
    )
    def history(
        record_id: RecordId,
        who: Who,
        after: Annotated[
            int, Query(ge=0, le=MAX_COUNTER, description="the last version number seen")
        ] = 0,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[Version]:
        return memory.history(record_id, principal=who, after=after, limit=limit)

    @router.get(
        "/records/{record_id}/versions/{number}",
        response_model=RecordView,
        tags=["versions"],
        summary="One version by its number",
    )
    def get_version(
        record_id: RecordId, number: Annotated[int, PathParam(ge=1, le=MAX_COUNTER)], who: Who
    ) -> RecordView:
        return memory.get(record_id, principal=who, version=number)

    @router.patch(
        "/records/{record_id}",
        response_model=ProposalOutcome,
        tags=["records"],
        summary="Propose an update (pin base_version_id to detect staleness)",
    )
    def update(record_id: RecordId, body: UpdateBody, who: Who) -> ProposalOutcome:
        return memory.update(
            record_id,
            body.patch,
            principal=who,
            base_version_id=body.base_version_id,
            reason=body.reason,
        )

    @router.post(
        "/records/{record_id}/supersede",
        response_model=ProposalOutcome,
        tags=["records"],
        summary="Propose superseding a record",
    )
    def supersede(record_id: RecordId, body: SupersedeBody, who: Who) -> ProposalOutcome:
        if isinstance(body, SupersedeByRecord):
            return memory.supersede(record_id, principal=who, by=body.by, reason=body.reason)
        return memory.supersede(record_id, principal=who, content=body.content, reason=body.reason)

    @router.post(
        "/records/{record_id}/transition",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Move a record along its lifecycle (curators)",
    )
    def transition(record_id: RecordId, body: TransitionBody, who: Who) -> ProposalOutcome:
        return memory.transition(record_id, body.to, principal=who, reason=body.reason)

    @router.post(
        "/records/{record_id}/archive",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Archive a record (curators)",
    )
    def archive(record_id: RecordId, body: ReasonBody, who: Who) -> ProposalOutcome:
        return memory.archive(record_id, principal=who, reason=body.reason)

    @router.post(
        "/records/{record_id}/restore",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Restore an archived record (curators)",
    )
    def restore(record_id: RecordId, body: ReasonBody, who: Who) -> ProposalOutcome:
        return memory.restore(record_id, principal=who, reason=body.reason)

    # ---- edges and walks ------------------------------------------------------------------

    @router.post(
        "/edges",
        response_model=ProposalOutcome,
        tags=["graph"],
        summary="Propose a typed edge between two records",
    )
    def link(body: LinkBody, who: Who) -> ProposalOutcome:
        return memory.link(body.edge, principal=who, reason=body.reason)

    @router.get("/edges/{edge_id}", response_model=Edge, tags=["graph"], summary="One edge")
    def edge(
        edge_id: Annotated[str, PathParam(min_length=1, description="an edge id, e.g. edg_01J…")],
        who: Who,
    ) -> Edge:
        return memory.edge(edge_id, principal=who)

    @router.post(
        "/edges/{edge_id}/unlink",
        response_model=ProposalOutcome,
        tags=["graph"],
        summary="Propose removing an edge",
    )
    def unlink(
        edge_id: Annotated[str, PathParam(min_length=1, description="an edge id, e.g. edg_01J…")],
        body: ReasonBody,
        who: Who,
    ) -> ProposalOutcome:
        return memory.unlink(edge_id, principal=who, reason=body.reason)

    @router.get(
        "/records/{record_id}/edges",
        response_model=list[Edge],
        tags=["graph"],
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
        "/graph/neighbours",
        response_model=Neighbourhood,
        tags=["graph"],
        summary="Walk the graph from records, checking permission on every hop",
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

    # ---- proposals and review -------------------------------------------------------------

    @router.get(
        "/proposals",
        response_model=list[Proposal],
        tags=["review"],
        summary="The review queue (curators see all; others their own)",
    )
    def proposals(
        who: Who,
        status: ProposalStatus | None = ProposalStatus.PENDING,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
        after: Annotated[
            Id | None, Query(description="the last id of the previous page (keyset paging)")
        ] = None,
    ) -> list[Proposal]:
        return memory.proposals(
            principal=who, status=status, limit=limit, offset=offset, after=after
        )

    @router.get(
        "/proposals/{proposal_id}", response_model=Proposal, tags=["review"], summary="One proposal"
    )
    def proposal(proposal_id: ProposalId, who: Who) -> Proposal:
        return memory.proposal(proposal_id, principal=who)

    @router.post(
        "/proposals/{proposal_id}/decision",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Approve or reject a queued proposal (curators)",
    )
    def decide(proposal_id: ProposalId, body: DecisionBody, who: Who) -> ProposalOutcome:
        return memory.decide(proposal_id, approve=body.approve, principal=who, reason=body.reason)

    @router.post(
        "/proposals/{proposal_id}/rebase",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Re-base a stale proposal on the current version",
    )
    def rebase(proposal_id: ProposalId, who: Who) -> ProposalOutcome:
        return memory.rebase(proposal_id, principal=who)

    @router.post(
        "/publish",
        response_model=ProposalOutcome,
        tags=["review"],
        summary="Publish a baseline for a scope (curators)",
    )
    def publish(body: PublishBody, who: Who) -> ProposalOutcome:
        return memory.publish(
            body.scope,
            principal=who,
            record_ids=body.record_ids,
            pins=body.pins,
            name=body.name,
            replace=body.replace,
            reason=body.reason,
        )

    @router.get(
        "/baselines",
        response_model=list[Baseline],
        tags=["review"],
        summary="Baselines in the caller's scopes",
    )
    def baselines(who: Who, scope: ScopePath | None = None) -> list[Baseline]:
        return memory.baselines(scope, principal=who)

    @router.get(
        "/audit",
        response_model=list[AuditEntry],
        tags=["admin"],
        summary="The audit log (curators)",
    )
    def audit(
        who: Who,
        actor: Name | None = None,
        action: Name | None = None,
        subject_id: Name | None = None,
        proposal_id: Name | None = None,
        rule: Name | None = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 100,
        after_seq: Annotated[
            int | None, Query(ge=0, le=MAX_COUNTER, description="the last seq of the previous page")
        ] = None,
    ) -> list[AuditEntry]:
        query = AuditQuery(
            actor=actor,
            action=action,
            subject_id=subject_id,
            proposal_id=proposal_id,
            rule=rule,
            since=since,
            until=until,
            limit=limit,
            after_seq=after_seq,
        )
        return memory.audit(query, principal=who)

    @router.post(
        "/refresh",
        response_model=RefreshReport,
        tags=["admin"],
        summary="Re-hash linked files and mark drift (curators)",
    )
    def refresh(who: Who) -> RefreshReport:
        return memory.refresh(principal=who)

    @router.post(
        "/vacuum",
        response_model=VacuumReport,
        tags=["admin"],
        summary="Archive records kept past retention (curators)",
    )
    def vacuum(who: Who) -> VacuumReport:
        return memory.vacuum(principal=who)

    @router.get(
        "/whoami",
        response_model=Principal,
        tags=["admin"],
        summary="Who the key belongs to: its principal's roles, scopes, labels and sensitivity",
    )
    def whoami(who: Who) -> Principal:
        return who

    @router.get(
        "/status",
        response_model=dict[str, int],
        tags=["admin"],
        summary="Counts of what the caller may see (the whole store for curators of every scope)",
    )
    def status(who: Who) -> dict[str, int]:
        return memory.status(principal=who)

    # ---- retrieval ---------------------------------------------------------------------

    @router.post(
        "/read_context",
        response_model=ReadContextResponse,
        tags=["retrieval"],
        summary="Citeable context for a scope, version-pinned",
    )
    def read_context(body: ContextBody, who: Who) -> ReadContextResponse:
        return memory.read_context(body, principal=who)

    def _read_options(body: _ReadBody) -> dict[str, Any]:
        return {
            "scope": body.scope,
            "selector": body.selector,
            "kinds": tuple(body.kinds),
            "include_drafts": body.include_drafts,
            "created_after": body.created_after,
            "created_before": body.created_before,
            "record_ids": body.record_ids,
            "weights": body.weights,
        }

    @router.post(
        "/retrieve",
        response_model=RetrievalResult,
        tags=["retrieval"],
        summary="Ranked, validated retrieval with version-pinned citations",
    )
    def retrieve(body: RetrieveBody, who: Who) -> RetrievalResult:
        return memory.retrieve(
            body.query,
            principal=who,
            mode=body.mode,
            k=body.top_k,
            max_tokens=body.max_tokens,
            **_read_options(body),
        )

    @router.post(
        "/search",
        response_model=SearchResult,
        tags=["retrieval"],
        summary="Raw ranked search without validation or budget",
    )
    def search(body: SearchBody, who: Who) -> SearchResult:
        return memory.search(
            body.query, principal=who, mode=body.mode, k=body.top_k, **_read_options(body)
        )

    @router.post(
        "/validate",
        response_model=ValidationReport,
        tags=["retrieval"],
        summary="May these cited records still be relied on?",
    )
    def validate(body: ValidateBody, who: Who) -> ValidationReport:
        return memory.validate(body.ids, principal=who)

    @router.post(
        "/for_path",
        response_model=RetrievalResult,
        tags=["retrieval"],
        summary="Memory linked to a repository path (drafts included)",
    )
    def for_path(body: ForPathBody, who: Who) -> RetrievalResult:
        return memory.for_path(body.path, principal=who, k=body.top_k, max_tokens=body.max_tokens)

    @router.post(
        "/for_symbol",
        response_model=RetrievalResult,
        tags=["retrieval"],
        summary="Memory that mentions a code symbol (drafts included)",
    )
    def for_symbol(body: ForSymbolBody, who: Who) -> RetrievalResult:
        return memory.for_symbol(
            body.symbol, principal=who, k=body.top_k, max_tokens=body.max_tokens
        )

    @router.post(
        "/validate_claims",
        response_model=ClaimsReport,
        tags=["retrieval"],
        summary="Check free-text claims against memory",
    )
    def validate_claims(body: ClaimsBody, who: Who) -> ClaimsReport:
        return memory.validate_claims(body.text, principal=who, scope=body.scope)

    @router.post(
        "/research",
        response_model=ResearchAnswer,
        tags=["retrieval"],
        summary="The Researcher: plan, retrieve, retry, summarise with citations",
    )
    def research(body: ResearchBody, who: Who) -> ResearchAnswer:
        return memory.research(
            body.question, principal=who, scope=body.scope, max_tokens=body.max_tokens
        )

    @router.post(
        "/ingest",
        response_model=IngestReport,
        tags=["records"],
        summary="Ingest repository files as evidence records (through the gate)",
    )
    def ingest(body: IngestBody, who: Who) -> IngestReport:
        return memory.ingest(body.paths, principal=who, scope=body.scope, kind=body.kind)

    @router.post(
        "/remember_many",
        response_model=list[ProposalOutcome],
        tags=["records"],
        summary="Propose many records at once; each is decided on its own",
    )
    def remember_many(body: BulkBody, who: Who) -> list[ProposalOutcome]:
        return memory.remember_many(body.contents, principal=who)

    @router.post(
        "/records:batch",
        response_model=list[ProposalOutcome],
        tags=["records"],
        summary="Store many records in one governed transaction, audited once",
    )
    def store_many(body: BatchBody, who: Who) -> list[ProposalOutcome]:
        return memory.store_many(body.contents, principal=who, draft=body.draft)

    return router


def describe_kinds(app: FastAPI, kinds: Sequence[str]) -> None:
    """Declare the record kinds this store's policy knows in the OpenAPI document, so that a
    schema-valid request names a kind the server takes (the kinds come from the policy file,
    not from the code)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _enumerate_kinds(generate(), list(kinds))
        return app.openapi_schema or generate()

    app.openapi = openapi  # type: ignore[method-assign]


def _enumerate_kinds(node: Any, kinds: list[str]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.pop(KIND_MARKER, False):
                item["enum"] = kinds
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def create_app(
    workspace: Workspace,
    *,
    memory: Memory | None = None,
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    embedder: str = DEFAULT_EMBEDDER,
) -> FastAPI:
    """The HTTP API alone. With no ``memory`` given the app opens and closes its own (with
    ``embedder``, "minilm" by default); ``lifespan`` lets the combined server run the other
    doors' start-up and shut-down."""
    owned = memory is None
    opened: Memory = memory if memory is not None else workspace.open_memory(embedder=embedder)

    @asynccontextmanager
    async def app_lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if lifespan is None:
                yield
            else:
                async with lifespan():
                    yield
        finally:
            if owned:
                opened.close()

    app = FastAPI(
        title="cairn",
        version="0.1.0",
        description="Governed, citeable memory for AI agents. Every route under /v1 needs "
        "`Authorization: Bearer <api key>`.",
        lifespan=app_lifespan,
    )
    install_error_handlers(app)
    app.state.cairn_workspace = workspace
    app.include_router(build_router(opened))
    # the timeline's routes live in their own module, which builds on this one
    from cairn.doors.http_timeline import timeline_router

    app.include_router(timeline_router(opened))
    from cairn.doors.http_graph import graph_router

    app.include_router(graph_router(opened))
    describe_kinds(app, opened.record_kinds())
    # the web console, an app of its own (HTML errors, its own security headers) at /ui
    from cairn.doors.web import mount_console

    mount_console(app, workspace, opened)

    @app.get(
        "/health",
        response_model=Health,
        tags=["ops"],
        summary="Whether the server is up (no key needed; says nothing about the store)",
        responses={503: {"model": Health, "description": "Not ready"}},
    )
    def health() -> JSONResponse:
        report = door_health(workspace, opened)
        return JSONResponse(
            report.model_dump(mode="json"), status_code=200 if report.ready else 503
        )

    app.add_middleware(BodyLimit, limit=MAX_REQUEST_BYTES)

    return app
