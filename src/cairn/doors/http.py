"""The HTTP door: every kernel verb under ``/v1``, as a FastAPI app.

Each route parses, authenticates the ``Authorization: Bearer`` key to a ``Principal``, makes
one ``Memory`` call and renders the result. Errors are ``ErrorBody`` JSON with the kernel's
stable ``code``; the status comes from the one table in ``_errors``. Routes are plain ``def``
functions on purpose: the kernel is synchronous (SQLite), so FastAPI runs them in its thread
pool and the event loop stays free for MCP and A2A streams.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.doors._errors import ErrorBody, error_body, http_status
from cairn.errors import CairnError, InvalidInput, Unauthenticated
from cairn.ingest.files import IngestReport
from cairn.memory import DEFAULT_EMBEDDER, Memory, RecordView, RefreshReport, VacuumReport
from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    Content,
    ContentPatch,
    Principal,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    Record,
    RecordQuery,
    Selector,
    SelectorKind,
    Status,
    Version,
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

__all__ = ["API_PREFIX", "create_app", "door_health"]

API_PREFIX = "/v1"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339(value: object) -> object:
    # Pydantic would read "0.5" as a Unix timestamp; the contract says RFC 3339 date-time.
    if isinstance(value, datetime) or (isinstance(value, str) and _RFC3339.match(value)):
        return value
    raise ValueError("must be an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z")


DateTime = Annotated[datetime, BeforeValidator(_rfc3339)]


def _json_number(value: object) -> object:
    # JSON numbers only: no "10" strings and no booleans (pydantic's lax mode takes both).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_number)]
JsonFloat = Annotated[float, BeforeValidator(_json_number)]
Id = Annotated[str, Field(min_length=1)]
RecordId = Annotated[str, PathParam(min_length=1, description="a record id, e.g. rec_01J…")]
ProposalId = Annotated[str, PathParam(min_length=1, description="a proposal id, e.g. prp_01J…")]


def _err(description: str, code: str, message: str) -> dict[str, Any]:
    return {
        "model": ErrorBody,
        "description": description,
        "content": {"application/json": {"example": {"code": code, "message": message}}},
    }


# Every route may answer these; declaring them keeps the OpenAPI document honest.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _err("The body is not valid JSON", "malformed_json", "Expecting value: line 1"),
    401: _err("No key, or an unknown or revoked key", "unauthenticated", "unknown API key"),
    403: _err(
        "The principal's role lacks the permission",
        "permission_denied",
        "only a curator may publish; agent is not one",
    ),
    405: _err("The path does not take this method", "method_not_allowed", "Method Not Allowed"),
    404: _err("No such thing, or not visible to this principal", "not_found", "no record rec_1"),
    409: _err(
        "The world changed under the request",
        "stale_proposal",
        "proposal prop_1 is based on version 1; rebase first",
    ),
    422: _err("The request is invalid", "invalid_input", "title: must not be blank"),
    503: _err("The store failed", "store_error", "store stayed locked for 120s"),
}


# ---- request bodies ------------------------------------------------------------------------


class RememberBody(_Body):
    content: Content
    draft: StrictBool = False
    paths: list[str] = Field(default_factory=list)
    reason: str | None = None


class UpdateBody(_Body):
    patch: ContentPatch
    base_version_id: str | None = None
    reason: str | None = None


class SupersedeBody(_Body):
    by: str | None = None
    content: Content | None = None
    reason: str | None = None


class TransitionBody(_Body):
    to: Status
    reason: str | None = None


class ReasonBody(_Body):
    reason: str | None = None


class DecisionBody(_Body):
    approve: StrictBool
    reason: str | None = None


class PublishBody(_Body):
    scope: str
    record_ids: list[Id] | None = None
    pins: dict[str, str | None] | None = None
    name: str | None = None
    replace: StrictBool = False
    reason: str | None = None


class _ReadBody(_Body):
    scope: str | None = Field(default=None, description="a scope or glob, e.g. acme/*")
    selector: Selector | None = Field(default=None, description="default: head")
    kinds: list[str] = Field(default_factory=list)
    include_drafts: StrictBool = False
    created_after: DateTime | None = None
    created_before: DateTime | None = None
    record_ids: list[Id] | None = None
    weights: dict[str, JsonFloat] | None = Field(
        default=None, description="fusion weights, e.g. {'keyword': 0.4, 'vector': 0.6}"
    )


class RetrieveBody(_ReadBody):
    query: str
    mode: Mode = "hybrid"
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class SearchBody(_ReadBody):
    query: str
    mode: Mode = "hybrid"
    top_k: JsonInt = Field(default=10, ge=1, le=1000)


class ValidateBody(_Body):
    ids: list[Id]


class ForPathBody(_Body):
    path: str
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ForSymbolBody(_Body):
    symbol: str
    top_k: JsonInt = Field(default=10, ge=1, le=1000)
    max_tokens: JsonInt = Field(default=8000, ge=1)


class ClaimsBody(_Body):
    text: str
    scope: str | None = None


class ResearchBody(_Body):
    question: str
    scope: str | None = None
    max_tokens: JsonInt = Field(default=4000, ge=1)


# Repository-relative only: over the network a caller must not name files outside the tree
# (no leading slash, no ".." segment). Written without look-arounds for pydantic's regex.
_SEGMENT = r"(?:[^./\\][^/\\]*|\.[^./\\][^/\\]*|\.\.[^/\\]+|\.)"
_RELATIVE_PATH = rf"^{_SEGMENT}(?:[/\\]{_SEGMENT})*[/\\]?$"


class IngestBody(_Body):
    paths: list[Annotated[str, Field(pattern=_RELATIVE_PATH)]] = Field(
        min_length=1, description="files, folders or globs relative to the repository root"
    )
    scope: str
    kind: str = "document"


class BulkBody(_Body):
    contents: list[Content] = Field(min_length=1, max_length=1000)


class Health(BaseModel):
    status: str
    ready: bool
    store: str
    counts: dict[str, int] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


# ---- authentication ------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="a cairn API key (`cairn keys create`)")


def _principal(
    request: Request,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    # The principals file is re-read per request so a revoked key stops working at once.
    workspace: Workspace = request.app.state.cairn_workspace
    return workspace.authenticate(creds.credentials if creds else None)


Who = Annotated[Principal, Depends(_principal)]


def door_health(workspace: Workspace, memory: Memory | None, config: dict[str, Any]) -> Health:
    """Ready only when the store answers and the principals file parses."""
    if memory is None:
        return Health(status="starting", ready=False, store=str(workspace.folder), config=config)
    try:
        counts = memory.status()
        workspace.principals()
    except CairnError as exc:
        return Health(
            status="unavailable",
            ready=False,
            store=str(workspace.folder),
            config=config,
            error=exc.message,
        )
    return Health(
        status="ok", ready=True, store=str(workspace.folder), counts=counts, config=config
    )


def _error_response(exc: CairnError) -> JSONResponse:
    headers = (
        {"WWW-Authenticate": 'Bearer realm="cairn"'} if isinstance(exc, Unauthenticated) else None
    )
    return JSONResponse(
        error_body(exc).model_dump(exclude_none=True), status_code=http_status(exc), headers=headers
    )


_HTTP_CODES = {400: "malformed_json", 404: "not_found", 405: "method_not_allowed"}


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


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CairnError)
    async def _cairn_error(request: Request, exc: CairnError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            body = ErrorBody(code="malformed_json", message="the request body is not valid JSON")
            return JSONResponse(body.model_dump(exclude_none=True), status_code=400)
        where = "; ".join(
            ".".join(str(p) for p in e.get("loc", ()) if p != "body") + ": " + str(e.get("msg"))
            for e in errors
        )
        body = ErrorBody(code="invalid_input", message=where or "invalid request")
        return JSONResponse(body.model_dump(exclude_none=True), status_code=422)

    @app.exception_handler(ValidationError)
    async def _model_refused(request: Request, exc: ValidationError) -> JSONResponse:
        # A kernel model's validator refused arguments the route's schema let through.
        where = "; ".join(
            ".".join(str(p) for p in e.get("loc", ())) + ": " + str(e.get("msg"))
            for e in exc.errors()
        )
        body = ErrorBody(code="invalid_input", message=where.lstrip(": ") or "invalid request")
        return JSONResponse(body.model_dump(exclude_none=True), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own refusals (unreadable body, unknown path, wrong method) in our shape.
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        body = ErrorBody(code=code, message=str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return JSONResponse(
            body.model_dump(exclude_none=True), status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        # One failing request never takes the server down; the details stay in the log.
        body = ErrorBody(code="internal_error", message="internal error; see the server log")
        return JSONResponse(body.model_dump(exclude_none=True), status_code=500)


def _selector(kind: SelectorKind, baseline_id: str | None, version_id: str | None) -> Selector:
    try:
        return Selector(kind=kind, baseline_id=baseline_id, version_id=version_id)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="selector") from exc


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
        prefix=API_PREFIX, responses=COMMON_ERRORS, dependencies=[Depends(_single_valued)]
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
        kind: Annotated[list[str] | None, Query()] = None,
        status: Annotated[list[Status] | None, Query()] = None,
        scope: str | None = None,
        created_after: DateTime | None = None,
        created_before: DateTime | None = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[Record]:
        query = RecordQuery(
            kinds=tuple(kind or ()),
            statuses=tuple(status or ()),
            scope=scope,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            offset=offset,
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
        selector: SelectorKind = SelectorKind.HEAD,
        baseline_id: str | None = None,
        version_id: str | None = None,
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
    def history(record_id: RecordId, who: Who) -> list[Version]:
        return memory.history(record_id, principal=who)

    @router.get(
        "/records/{record_id}/versions/{number}",
        response_model=RecordView,
        tags=["versions"],
        summary="One version by its number",
    )
    def get_version(
        record_id: RecordId, number: Annotated[int, PathParam(ge=1)], who: Who
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
        return memory.supersede(
            record_id, principal=who, by=body.by, content=body.content, reason=body.reason
        )

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
    ) -> list[Proposal]:
        return memory.proposals(principal=who, status=status, limit=limit, offset=offset)

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
    def baselines(who: Who, scope: str | None = None) -> list[Baseline]:
        return memory.baselines(scope, principal=who)

    @router.get(
        "/audit",
        response_model=list[AuditEntry],
        tags=["admin"],
        summary="The audit log (curators)",
    )
    def audit(
        who: Who,
        actor: str | None = None,
        action: str | None = None,
        subject_id: str | None = None,
        proposal_id: str | None = None,
        since: DateTime | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 100,
    ) -> list[AuditEntry]:
        query = AuditQuery(
            actor=actor,
            action=action,
            subject_id=subject_id,
            proposal_id=proposal_id,
            since=since,
            limit=limit,
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
        "/status", response_model=dict[str, int], tags=["admin"], summary="Row counts of the store"
    )
    def status(who: Who) -> dict[str, int]:
        return memory.status()

    # ---- retrieval ---------------------------------------------------------------------

    @router.post(
        "/read_context",
        response_model=ReadContextResponse,
        tags=["retrieval"],
        summary="Citeable context for a scope, version-pinned (spec 000 §1.1)",
    )
    def read_context(body: ReadContextRequest, who: Who) -> ReadContextResponse:
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

    return router


def create_app(
    workspace: Workspace,
    *,
    memory: Memory | None = None,
    config: dict[str, Any] | None = None,
    lifespan: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    embedder: str = DEFAULT_EMBEDDER,
) -> FastAPI:
    """The HTTP API alone. With no ``memory`` given the app opens and closes its own (with
    ``embedder``, "minilm" by default); ``lifespan`` lets the combined server run the other
    doors' start-up and shut-down."""
    owned = memory is None
    opened: Memory = memory if memory is not None else workspace.open_memory(embedder=embedder)
    shown_config = dict(config or {"store": str(workspace.folder)})

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

    @app.get(
        "/health",
        response_model=Health,
        tags=["ops"],
        summary="Readiness and config",
        responses={503: {"model": Health, "description": "Not ready"}},
    )
    def health() -> JSONResponse:
        report = door_health(workspace, opened, shown_config)
        return JSONResponse(
            report.model_dump(mode="json"), status_code=200 if report.ready else 503
        )

    return app
