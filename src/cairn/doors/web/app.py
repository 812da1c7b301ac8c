"""The web console's routes: sign-in, the review queue, proposals, records, search, the
audit log and the timeline, served under ``/ui`` by ``cairn serve``.

A thin door like the others: each route finds the signed-in principal (re-checked on every
request through the key id its session holds), makes ``Memory`` calls with it and renders a
template. Decisions are the kernel's: a control missing from a page is a courtesy, and a
forged POST is refused by the kernel (or, without the session's CSRF token, before it).
Routes are plain ``def`` functions so the synchronous kernel runs in the thread pool.
"""

# No ``from __future__ import annotations``: the routes' parameter types name aliases local
# to ``build_web_app`` (``Who``, ``Acting``), which FastAPI must see as objects, not strings.

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.doors._errors import error_body
from cairn.doors.web.headers import SecurityHeaders
from cairn.doors.web.sessions import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    Session,
    SessionStore,
    same_token,
)
from cairn.doors.web.views import (
    AGES,
    content_lines,
    older_than,
    proposed_content,
    side_by_side,
    subject_link,
    summary,
)
from cairn.errors import CairnError, InvalidInput, PermissionDenied, Unauthenticated
from cairn.graph.why import WhyRequest
from cairn.limits import MAX_COUNTER
from cairn.memory import Memory
from cairn.model import (
    AuditQuery,
    Content,
    PinKind,
    Principal,
    ProposalFilter,
    ProposalStatus,
    Status,
    TocNode,
    VersionPin,
)
from cairn.workspace import Workspace

__all__ = ["UI_PREFIX", "build_web_app"]

UI_PREFIX = "/ui"
HERE = Path(__file__).parent
PAGE = 50  # rows per page of the queue and the audit log
VERSIONS = 50  # versions per page of a record's history
HTMX = "htmx-2.0.4.min.js"

log = logging.getLogger("cairn.web")


@dataclass(frozen=True)
class Viewer:
    """Who is signed in, asking by which request (a page is rendered for it)."""

    principal: Principal
    session: Session
    session_id: str
    request: Request

    @property
    def curates(self) -> bool:
        return self.principal.can_curate()


class _SignInFirst(Exception):
    """A page asked for without a live session: answered by a redirect to sign-in."""


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _form_value(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


# The filters' longest values, by what they name: past these a page refuses, not cuts.
_Word = Annotated[str | None, Field(max_length=64)]  # a kind, an action
_Id = Annotated[str | None, Field(max_length=128)]  # a principal, a rule, a record
_Day = Annotated[str | None, Field(max_length=10)]  # YYYY-MM-DD


class _PageFilters(BaseModel):
    """A page's filters as its query string or its form sends them: the same fields whether
    a page is shown or a form acts on what it shows."""

    def given(self) -> dict[str, str | None]:
        """Each filter as the page shows it back: a blank one is not given."""
        return {name: _form_value(value) for name, value in self}


class QueueFilters(_PageFilters):
    op: str | None = Field(default=None, max_length=32)
    kind: _Word = None
    scope: str | None = Field(default=None, max_length=512)
    author: _Id = None
    rule: _Id = None

    def narrow(self, age: str | None) -> ProposalFilter:
        return ProposalFilter(**self.given(), created_before=older_than(age))


class AuditFilters(_PageFilters):
    actor: _Id = None
    action: _Word = None
    subject: _Id = None
    rule: _Id = None
    since: _Day = None
    until: _Day = None


def _day(value: str | None, *, end: bool = False) -> datetime | None:
    """A ``YYYY-MM-DD`` from a date input as an aware time (the day's end with ``end``)."""
    if not value:
        return None
    try:
        day = datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError:
        raise InvalidInput(f"{value!r} is not a date (YYYY-MM-DD)", field="date") from None
    moment = datetime.combine(day, time.max if end else time.min, tzinfo=UTC)
    return moment


def build_web_app(
    workspace: Workspace, memory: Memory, *, sessions: SessionStore | None = None
) -> FastAPI:
    """The console as an app of its own, for ``create_app`` to mount at ``/ui``."""
    store = sessions or SessionStore()
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals.update(
        htmx=HTMX, subject_link=subject_link, summary=summary, ages=list(AGES)
    )
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.sessions = store

    # ---- who is asking ----------------------------------------------------------------

    def _live(request: Request) -> Viewer | None:
        session_id = request.cookies.get(SESSION_COOKIE)
        session = store.get(session_id)
        if session is None or session_id is None:
            return None
        try:
            # the principals file is read again: a revoked key ends its sessions now
            principal = workspace.principal_of_key(session.key_id)
        except Unauthenticated:
            store.close(session_id)
            return None
        return Viewer(principal=principal, session=session, session_id=session_id, request=request)

    def viewer(request: Request) -> Viewer:
        found = _live(request)
        if found is None:
            raise _SignInFirst
        return found

    def actor(request: Request, csrf: Annotated[str | None, Form(max_length=200)] = None) -> Viewer:
        """The principal behind a state-changing form: a live session and its own CSRF
        token, or a 403 with nothing done."""
        found = _live(request)
        if found is None:
            raise PermissionDenied("sign in first")
        if not same_token(csrf, found.session.csrf):
            raise PermissionDenied("the form's security token is missing or wrong; reload")
        return found

    Who = Annotated[Viewer, Depends(viewer)]
    Acting = Annotated[Viewer, Depends(actor)]

    def page(
        request: Request, name: str, who: Viewer | None, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        context.update(
            who=who.principal if who else None,
            curates=who.curates if who else False,
            csrf=who.session.csrf if who else "",
        )
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def shown(who: Viewer, name: str, **context: Any) -> HTMLResponse:
        """A page for the signed-in viewer, rendered for the request they asked it with."""
        return page(who.request, name, who, **context)

    # ---- errors as pages --------------------------------------------------------------

    @app.exception_handler(_SignInFirst)
    async def _to_signin(request: Request, exc: _SignInFirst) -> Response:
        return RedirectResponse(f"{UI_PREFIX}/signin", status_code=303)

    @app.exception_handler(CairnError)
    async def _kernel_error(request: Request, exc: CairnError) -> Response:
        body = error_body(exc)
        return page(
            request, "error.html", _live(request), status_code=body.status,
            title=body.title, detail=body.detail,
        )  # fmt: skip

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return page(
            request, "error.html", _live(request), status_code=exc.status_code,
            title="Not found" if exc.status_code == 404 else "Refused", detail=str(exc.detail),
        )  # fmt: skip

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> Response:
        log.exception("console request failed", extra={"fields": {"path": request.url.path}})
        return page(
            request, "error.html", None, status_code=500,
            title="Internal error", detail="the server log has the details",
        )  # fmt: skip

    @app.exception_handler(RequestValidationError)
    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: RequestValidationError | ValidationError) -> Response:
        # a filter the page passes on to the kernel's own models (a NUL in a scope) is bad
        # input too, not a crash: those models' errors carry no request location to drop
        skip = 1 if isinstance(exc, RequestValidationError) else 0
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())[skip:])}: {e.get('msg')}"
            for e in exc.errors()
        )
        return page(
            request, "error.html", _live(request), status_code=422,
            title="Invalid input", detail=detail or "invalid",
        )  # fmt: skip

    # ---- signing in and out -----------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def home(who: Who) -> RedirectResponse:
        return RedirectResponse(f"{UI_PREFIX}/queue", status_code=303)

    @app.get("/signin", response_class=HTMLResponse)
    def signin_form(request: Request) -> Response:
        if _live(request) is not None:
            return RedirectResponse(f"{UI_PREFIX}/queue", status_code=303)
        token = secrets.token_urlsafe(32)
        response = page(request, "signin.html", None, signin_token=token, failed=False)
        response.set_cookie(
            SIGNIN_COOKIE, token, max_age=600, path=UI_PREFIX, httponly=True,
            samesite="strict", secure=_secure(request),
        )  # fmt: skip
        return response

    @app.post("/signin", response_class=HTMLResponse)
    def signin(
        request: Request,
        key: Annotated[str, Form(max_length=200)] = "",
        signin_token: Annotated[str, Form(max_length=200)] = "",
    ) -> Response:
        expected = request.cookies.get(SIGNIN_COOKIE) or ""
        if not expected or not same_token(signin_token, expected):
            raise PermissionDenied("the sign-in form expired; load it again")
        try:
            principal, key_id = workspace.identify(key.strip())
        except Unauthenticated:
            # the key is not logged, not echoed back, and not told apart from a revoked one
            log.info("console sign-in refused")
            return page(
                request, "signin.html", None, status_code=401,
                signin_token=signin_token, failed=True,
            )  # fmt: skip
        session_id, _ = store.open(key_id=key_id, principal_id=principal.id)
        log.info("console sign-in", extra={"fields": {"principal": principal.id}})
        signed_in = RedirectResponse(f"{UI_PREFIX}/queue", status_code=303)
        signed_in.set_cookie(
            SESSION_COOKIE, session_id, max_age=int(store.lifetime), path=UI_PREFIX,
            httponly=True, samesite="strict", secure=_secure(request),
        )  # fmt: skip
        signed_in.delete_cookie(
            SIGNIN_COOKIE, path=UI_PREFIX, httponly=True, samesite="strict", secure=_secure(request)
        )
        return signed_in

    @app.post("/signout")
    def signout(request: Request, who: Acting) -> RedirectResponse:
        store.close(who.session_id)
        response = RedirectResponse(f"{UI_PREFIX}/signin", status_code=303)
        response.delete_cookie(
            SESSION_COOKIE, path=UI_PREFIX, httponly=True, samesite="strict",
            secure=_secure(request),
        )  # fmt: skip
        return response

    # ---- the review queue -------------------------------------------------------------

    @app.get("/queue", response_class=HTMLResponse)
    def queue(
        who: Who,
        chosen: Annotated[QueueFilters, Query()],
        age: Annotated[str | None, Query(max_length=8)] = None,
        after: Annotated[str | None, Query(max_length=64)] = None,
        approved: Annotated[int | None, Query(ge=0)] = None,
    ) -> HTMLResponse:
        narrow = chosen.narrow(age)
        found = memory.proposals(
            principal=who.principal, narrow=narrow, limit=PAGE + 1, after=_form_value(after)
        )
        rows = [(p, memory.is_stale(p)) for p in found[:PAGE]]
        more = found[PAGE - 1].id if len(found) > PAGE else None
        filters = chosen.given()
        query = {k: v for k, v in {**filters, "age": age}.items() if v}
        return shown(
            who, "queue.html", rows=rows, filters=filters, age=age or "",
            next_after=more, query=query, approved=approved, kinds=memory.record_kinds(),
        )  # fmt: skip

    @app.post("/queue/approve")
    def approve_selected(
        who: Acting,
        ids: Annotated[list[str], Form(max_length=1000)],
        reason: Annotated[str, Form(max_length=4000)] = "",
    ) -> RedirectResponse:
        outcomes = memory.approve_many(ids, principal=who.principal, reason=reason)
        return RedirectResponse(f"{UI_PREFIX}/queue?approved={len(outcomes)}", status_code=303)

    @app.post("/queue/approve-matching")
    def approve_matching(
        who: Acting,
        reason: Annotated[str, Form(max_length=4000)] = "",
        *,
        # the queue page's filters, sent back by its form: what it showed is what is approved
        chosen: Annotated[QueueFilters, Form()],
        age: Annotated[str | None, Form(max_length=8)] = None,
    ) -> RedirectResponse:
        narrow = chosen.narrow(age)
        outcomes = memory.approve_matching(narrow, principal=who.principal, reason=reason)
        return RedirectResponse(f"{UI_PREFIX}/queue?approved={len(outcomes)}", status_code=303)

    # ---- one proposal -----------------------------------------------------------------

    def _version_content(record_id: str, version_id: str | None, who: Viewer) -> Content | None:
        if version_id is None:
            return None
        selector = VersionPin(kind=PinKind.VERSION_REF, version_id=version_id)
        view = memory.get(record_id, principal=who.principal, selector=selector)
        return view.version.content

    @app.get("/proposals/{proposal_id}", response_class=HTMLResponse)
    def proposal(proposal_id: str, who: Who) -> HTMLResponse:
        found = memory.proposal(proposal_id, principal=who.principal)
        pending = found.status is ProposalStatus.PENDING
        stale = pending and memory.is_stale(found)
        pinned: Content | None = None
        head: Content | None = None
        head_version: int | None = None
        if found.record_id is not None:
            pinned = _version_content(found.record_id, found.base_version_id, who)
            view = memory.get(found.record_id, principal=who.principal)
            head, head_version = view.version.content, view.version.number
        proposed = proposed_content(found, pinned)
        after = content_lines(proposed)
        return shown(
            who, "proposal.html", p=found, pending=pending, stale=stale,
            head_version=head_version,
            against_pinned=side_by_side(content_lines(pinned), after) if proposed else [],
            against_head=side_by_side(content_lines(head), after) if stale and proposed else [],
        )  # fmt: skip

    def deciding(approve: bool) -> Callable[..., RedirectResponse]:
        def decide(
            proposal_id: str, who: Acting, reason: Annotated[str, Form(max_length=4000)] = ""
        ) -> RedirectResponse:
            memory.decide(
                proposal_id, approve=approve, principal=who.principal, reason=_form_value(reason)
            )
            return RedirectResponse(f"{UI_PREFIX}/proposals/{proposal_id}", status_code=303)

        return decide

    # a proposal page's two buttons differ only in the decision they send
    for name, approve in (("approve", True), ("reject", False)):
        app.add_api_route(
            f"/proposals/{{proposal_id}}/{name}", deciding(approve), methods=["POST"], name=name
        )

    @app.post("/proposals/{proposal_id}/rebase")
    def rebase(proposal_id: str, who: Acting) -> RedirectResponse:
        outcome = memory.rebase(proposal_id, principal=who.principal)
        return RedirectResponse(f"{UI_PREFIX}/proposals/{outcome.proposal.id}", status_code=303)

    # ---- one record -------------------------------------------------------------------

    @app.get("/records/{record_id}", response_class=HTMLResponse)
    def record(
        record_id: str,
        who: Who,
        diff_from: Annotated[int | None, Query(ge=1, le=MAX_COUNTER)] = None,
        diff_to: Annotated[int | None, Query(ge=1, le=MAX_COUNTER)] = None,
        upto: Annotated[
            int | None, Query(ge=1, le=MAX_COUNTER, description="newest version listed")
        ] = None,
    ) -> HTMLResponse:
        view = memory.get(record_id, principal=who.principal)
        head = view.version.number
        # a page of versions, newest first: a record edited hundreds of times stays quick
        newest = min(upto or head, head)
        listed = memory.history(
            record_id, principal=who.principal, after=max(0, newest - VERSIONS), limit=VERSIONS
        )
        to = diff_to or head
        start = diff_from or (to - 1 if to > 1 else None)
        diff = []
        if start is not None:
            before = memory.get(record_id, principal=who.principal, version=start)
            after = memory.get(record_id, principal=who.principal, version=to)
            diff = side_by_side(
                content_lines(before.version.content), content_lines(after.version.content)
            )
        edges = memory.edges(record_id, principal=who.principal, limit=100)
        try:
            audit = memory.audit(
                AuditQuery(subject_id=record_id, limit=PAGE), principal=who.principal
            )
        except PermissionDenied:
            audit = None  # the audit log is for curators of every scope
        moves = memory.moves(record_id, principal=who.principal)
        older = newest - VERSIONS if newest > VERSIONS else None
        return shown(
            who, "record.html", view=view, versions=list(reversed(listed)),
            diff=diff, diff_from=start, diff_to=to, edges=edges, audit=audit, moves=moves,
            older=older,
        )  # fmt: skip

    @app.post("/records/{record_id}/move")
    def move(
        record_id: str,
        who: Acting,
        to: Annotated[Status, Form()],
        reason: Annotated[str, Form(max_length=4000)] = "",
    ) -> RedirectResponse:
        memory.transition(record_id, to, principal=who.principal, reason=_form_value(reason))
        return RedirectResponse(f"{UI_PREFIX}/records/{record_id}", status_code=303)

    # ---- search -----------------------------------------------------------------------

    @app.get("/search", response_class=HTMLResponse)
    def search(
        who: Who,
        q: Annotated[str, Query(max_length=2000)] = "",
        scope: Annotated[str | None, Query(max_length=512)] = None,
        mode: Annotated[str, Query(pattern="^(hybrid|keyword|vector)$")] = "hybrid",
    ) -> HTMLResponse:
        result = None
        if q.strip():
            result = memory.search(
                q.strip(), principal=who.principal, mode=mode,  # type: ignore[arg-type]
                k=20, scope=_form_value(scope),
            )  # fmt: skip
        return shown(who, "search.html", q=q, scope=scope or "", mode=mode, result=result)

    # ---- why: the decision graph's answer and its audit drawer --------------------------

    @app.get("/why", response_class=HTMLResponse)
    def why(
        who: Who,
        anchor: Annotated[str, Query(max_length=200)] = "",
        role: Annotated[str | None, Query(max_length=32)] = None,
        question: Annotated[str | None, Query(max_length=2000)] = None,
    ) -> HTMLResponse:
        roles = memory.graph_roles(principal=who.principal)
        body = None
        if anchor.strip():
            body = memory.why(
                WhyRequest(anchor=anchor.strip(), question=_form_value(question)),
                principal=who.principal,
                role=_form_value(role),
            )
        return shown(
            who, "why.html", anchor=anchor, role=role or "", question=question or "",
            roles=roles, body=body,
        )  # fmt: skip

    @app.get("/traces/{trace_id}/downloads/{name}")
    def trace_download(
        trace_id: str,
        name: Annotated[str, PathParam(pattern="^bundle_(view|full)$")],
        who: Who,
    ) -> Response:
        data = memory.trace_download(trace_id, name, principal=who.principal)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{trace_id}-{name}.zip"'},
        )

    # ---- the audit log ----------------------------------------------------------------

    @app.get("/audit", response_class=HTMLResponse)
    def audit(
        who: Who,
        chosen: Annotated[AuditFilters, Query()],
        after_seq: Annotated[int | None, Query(ge=0, le=MAX_COUNTER)] = None,
    ) -> HTMLResponse:
        filters = chosen.given()
        query = AuditQuery(
            actor=filters["actor"],
            action=filters["action"],
            subject_id=filters["subject"],
            rule=filters["rule"],
            since=_day(filters["since"]),
            until=_day(filters["until"], end=True),
            limit=PAGE + 1,
            after_seq=after_seq,
        )
        entries = memory.audit(query, principal=who.principal)
        more = entries[PAGE - 1].seq if len(entries) > PAGE else None
        return shown(
            who, "audit.html", entries=entries[:PAGE], filters=filters,
            next_after=more, query={k: v for k, v in filters.items() if v},
        )  # fmt: skip

    # ---- the timeline -----------------------------------------------------------------

    @app.get("/timeline", response_class=HTMLResponse)
    def timeline(who: Who) -> HTMLResponse:
        years = memory.timeline_root(principal=who.principal)
        return shown(who, "timeline.html", node=None, children=years, next_after=None)

    @app.get("/timeline/nodes/{node_id}", response_class=HTMLResponse)
    def timeline_node(
        node_id: str,
        who: Who,
        after: Annotated[str | None, Query(max_length=128)] = None,
    ) -> HTMLResponse:
        node = memory.timeline_node(node_id, principal=who.principal)
        children = memory.timeline_browse(node_id, principal=who.principal, after=after, limit=50)
        trail: list[TocNode] = []
        parent = node.parent_id
        while parent is not None and len(trail) < 6:
            up = memory.timeline_node(parent, principal=who.principal)
            trail.append(up)
            parent = up.parent_id
        return shown(
            who, "timeline.html", node=node, children=children.children,
            next_after=children.next_after, trail=list(reversed(trail)),
        )  # fmt: skip

    @app.get("/timeline/grips/{grip_id}", response_class=HTMLResponse)
    def grip(grip_id: str, who: Who) -> HTMLResponse:
        expanded = memory.expand_grip(grip_id, principal=who.principal)
        # htmx asks for the fragment that goes under the bullet; a plain link, for a page
        fragment = who.request.headers.get("HX-Request") == "true"
        return shown(who, "_events.html" if fragment else "grip.html", g=expanded)

    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_middleware(SecurityHeaders)
    return app


def mount_console(app: FastAPI, workspace: Workspace, memory: Memory) -> None:
    """Serve the console under ``/ui`` of ``app``."""
    app.mount(UI_PREFIX, build_web_app(workspace, memory))
