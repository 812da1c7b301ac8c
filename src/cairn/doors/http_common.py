"""What every route of the JSON API shares: the ``/v1`` prefix, the bearer key turned into
a ``Principal``, JSON bodies read within the request limits and refusing anything but JSON
types, the error statuses every route declares, and the router they are all built on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from annotated_types import Ge
from fastapi import APIRouter, Depends, Request
from fastapi import Path as PathParam
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AllowInfNan, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from cairn.doors._errors import PROBLEM_JSON, ErrorBody, problem
from cairn.errors import InvalidInput, Unauthenticated
from cairn.limits import MAX_REQUEST_BYTES, LimitExceeded, load_json
from cairn.model import PinKind, Principal, Reason, VersionPin
from cairn.workspace import Workspace

__all__ = [
    "API_PREFIX",
    "COMMON_ERRORS",
    "JsonFloat",
    "JsonInt",
    "JsonRoute",
    "ProposalId",
    "ReasonBody",
    "RecordId",
    "StrictBody",
    "Weights",
    "Who",
    "api_router",
    "authenticate_http",
    "branch_by_key",
    "principal_of_request",
    "selector_of",
    "single_valued",
]

API_PREFIX = "/v1"


class JsonRequest(Request):
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


class JsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Any]:
        handle = super().get_route_handler()

        async def route(request: Request) -> Response:
            answer: Response = await handle(JsonRequest(request.scope, request.receive))
            return answer

        return route


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _json_number(value: object) -> object:
    # JSON numbers only: no "10" strings and no booleans (pydantic's lax mode takes both).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


JsonInt = Annotated[int, BeforeValidator(_json_number)]


JsonFloat = Annotated[float, BeforeValidator(_json_number)]


# Weights of the two recall signals, as the schema states them: finite and at least 0. The
# kernel's rule (``retrieval.fuse.check_weights``) also refuses weights that leave the mode
# no signal, with the same message at every door.
Weights = Annotated[
    dict[
        Literal["keyword", "vector"],
        # the constraints come before the JSON-number check so that the schema states them
        Annotated[float, Ge(0), AllowInfNan(False), BeforeValidator(_json_number)],
    ],
    Field(max_length=2),
]


RecordId = Annotated[str, PathParam(min_length=1, description="a record id, e.g. rec_01J…")]


ProposalId = Annotated[str, PathParam(min_length=1, description="a proposal id, e.g. prp_01J…")]


def _error_example(status: int, description: str, code: str, detail: str) -> dict[str, Any]:
    example = problem(status, code, detail).model_dump(exclude_none=True)
    return {
        "model": ErrorBody,
        "description": description,
        "content": {PROBLEM_JSON: {"example": example}},
    }


# Every route may answer these; declaring them keeps the OpenAPI document honest.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error_example(
        400, "The body is not valid JSON", "malformed_json", "the body is not valid JSON"
    ),
    401: _error_example(
        401, "No key, or an unknown or revoked key", "unauthenticated", "unknown API key"
    ),
    403: _error_example(
        403,
        "The principal's role lacks the permission",
        "permission_denied",
        "only a curator may publish; agent is not one",
    ),
    405: _error_example(
        405, "The path does not take this method", "method_not_allowed", "Not Allowed"
    ),
    404: _error_example(
        404, "No such thing, or not visible to this principal", "not_found", "no record 'rec_1'"
    ),
    409: _error_example(
        409,
        "The world changed under the request",
        "stale_proposal",
        "proposal prp_1 is stale: rebase it first",
    ),
    413: _error_example(
        413,
        "The request body is larger than the server takes",
        "payload_too_large",
        f"the request body is over the limit of {MAX_REQUEST_BYTES:,} bytes",
    ),
    422: _error_example(422, "The request is invalid", "invalid_input", "title: must not be blank"),
    503: _error_example(
        503, "The store or the server's configuration failed", "store_error", "store locked"
    ),
}


class ReasonBody(StrictBody):
    """A body that carries only why (archive, restore, unlink)."""

    reason: Reason | None = None


def branch_by_key(key: str, otherwise: str) -> Callable[[Any], str]:
    def tag(value: Any) -> str:
        return key if isinstance(value, dict) and key in value else otherwise

    return tag


_bearer = HTTPBearer(auto_error=False, description="a cairn API key (`cairn keys create`)")


def principal_of_request(
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


Who = Annotated[Principal, Depends(principal_of_request)]


def selector_of(kind: PinKind, baseline_id: str | None, version_id: str | None) -> VersionPin:
    try:
        return VersionPin(kind=kind, baseline_id=baseline_id, version_id=version_id)
    except ValidationError as exc:
        raise InvalidInput.from_validation(exc) from None


# Query parameters that are lists; any other parameter given twice is refused, not guessed at.
_LIST_PARAMS: dict[str, frozenset[str]] = {f"{API_PREFIX}/records": frozenset({"kind", "status"})}


def single_valued(request: Request) -> None:
    route = request.scope.get("route")
    lists = _LIST_PARAMS.get(getattr(route, "path", ""), frozenset())
    keys = [key for key, _ in request.query_params.multi_items()]
    repeated = sorted({k for k in keys if keys.count(k) > 1 and k not in lists})
    if repeated:
        raise InvalidInput(
            f"query parameter {repeated[0]!r} given more than once", field=repeated[0]
        )


def api_router(*, under: str = "", tags: Sequence[str] = ()) -> APIRouter:
    """A router for routes under ``/v1`` (and ``under``): every error status the API may
    answer declared, a query parameter given twice refused, bodies read within the request
    limits. Every area's routes are built on one."""
    return APIRouter(
        prefix=API_PREFIX + under,
        responses=COMMON_ERRORS,
        dependencies=[Depends(single_valued)],
        tags=list(tags),
        route_class=JsonRoute,
    )
