"""``cairn.connect``: a cairn server's HTTP API (``/v1``), with the methods of ``cairn.open``.

Each method makes one request (``why`` two: the roles, then the question) and reads the
answer into the same pydantic types the kernel returns; an error answer is raised again as
the kernel's exception class, chosen by its ``code`` (``cairn.doors._errors``). The server
re-reads its principals on every request, so a revoked key stops working at once.

The key travels in the ``Authorization`` header of the underlying ``httpx.Client`` and
nowhere else: not in ``repr``, not in an error message.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from cairn import model
from cairn.client import ENV_KEY, MemoryClient, Move, WhyMode
from cairn.doors._errors import error_from_problem
from cairn.errors import (
    CairnError,
    InvalidInput,
    NotFound,
    StoreError,
    Unauthenticated,
    describe_validation,
)
from cairn.limits import STORED
from cairn.options import EventFilters, PublishChoice, ReadFilters, TimelineFilters
from cairn.retrieval.context import ReadContextRequest, ReadContextResponse, ValidationReport
from cairn.retrieval.types import RetrievalResult, SearchResult
from cairn.timeline.views import TimelineHits

if TYPE_CHECKING:
    from cairn.graph.why import WhyRequest

__all__ = ["RemoteMemory", "connect"]

T = TypeVar("T")

# What a key may hold: printable ASCII without spaces (``cairn_`` and URL-safe base64). Checked
# before a request is made, because an HTTP library refusing a header may quote its value.
_KEY = re.compile(r"^[\x21-\x7e]+$")


def connect(
    url: str,
    key: str | None = None,
    *,
    timeout: float = 30.0,
    transport: httpx.BaseTransport | None = None,
) -> RemoteMemory:
    """Connect to a cairn server (``cairn serve``) at ``url`` as the principal of ``key``
    (default: ``CAIRN_API_KEY``).

    The key is checked at once (``GET /v1/whoami``): a missing, unknown or revoked one raises
    ``Unauthenticated``, and a server that cannot be reached ``StoreError``, as ``cairn.open``
    does for a local store. ``timeout`` bounds each request, in seconds; ``transport`` is an
    ``httpx`` transport to use instead of the network (for tests, proxies, retries)."""
    return RemoteMemory(url, key, timeout=timeout, transport=transport)


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _parse(kind: type[T], data: Any) -> T:
    """The server's answer as ``kind``. Read as stored data is read (``STORED``): limits a
    newer server lowered never make an answer unreadable."""
    try:
        adapter: TypeAdapter[T] = _adapter(cast(Any, kind))
        return adapter.validate_python(data, context=STORED)
    except ValidationError as exc:
        problem = describe_validation(exc)
        raise CairnError(f"the server's answer is not what cairn expected: {problem}") from None


def _segment(value: str, field: str) -> str:
    """A path segment: quoted, so that an id cannot reach another route. An empty one names
    nothing, as it would locally."""
    if not value or value in {".", ".."}:
        raise NotFound(f"no {field.removesuffix('_id')} {value!r}", field=field)
    return quote(value, safe="")


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters, leaving out those not given."""
    return {name: value for name, value in values.items() if value is not None}


class RemoteMemory(MemoryClient):
    """A ``cairn.MemoryClient`` over a cairn server's HTTP API, acting for one key's
    principal. ``cairn.connect`` makes one; close it when done (or use ``with``).

    Where the HTTP API takes less than the kernel, the client says so rather than guess:
    ``list_records`` cannot filter by metadata over HTTP (``InvalidInput``)."""

    def __init__(
        self,
        url: str,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if key is None:
            key = os.environ.get(ENV_KEY)
        if not key:
            raise Unauthenticated(f"no API key: pass key or set {ENV_KEY}", field="key")
        if not _KEY.match(key):
            raise Unauthenticated("that is not an API key: keys are printable, without spaces")
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(
                "connect takes a server's http:// or https:// address; "
                "cairn.open opens a folder or a database",
                field="url",
            )
        # the server's address; its API lives under /v1 (an address naming it works too)
        self.url = url.rstrip("/").removesuffix("/v1")
        self._http = httpx.Client(
            base_url=f"{self.url}/v1",
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            transport=transport,
        )
        try:
            self._principal: model.Principal = _parse(model.Principal, self._call("GET", "/whoami"))
        except BaseException:
            self._http.close()
            raise

    def __repr__(self) -> str:
        return f"<RemoteMemory {self.url} as {self._principal.id}>"

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        try:
            answer = self._http.request(method, path, params=params, json=body, headers=headers)
        except httpx.TransportError as exc:
            # "server unreachable" reads as the store being unreachable, as on the CLI
            raise StoreError(
                f"could not reach the cairn server at {self.url} ({type(exc).__name__})"
            ) from exc
        if answer.is_success:
            try:
                return answer.json()
            except ValueError:
                raise CairnError(f"the server at {self.url} answered without JSON") from None
        try:
            problem = answer.json()
        except ValueError:
            problem = None
        raise error_from_problem(answer.status_code, problem if isinstance(problem, dict) else None)

    def close(self) -> None:
        self._http.close()

    # ---- writes --------------------------------------------------------------------------

    def _remember(
        self, content: model.Content, *, draft: bool, paths: Sequence[str], reason: str | None
    ) -> model.ProposalOutcome:
        body = {
            "content": content.model_dump(mode="json"),
            "draft": draft,
            "paths": list(paths),
            "reason": reason,
        }
        return _parse(model.ProposalOutcome, self._call("POST", "/records", body=body))

    def _update(
        self, record_id: str, patch: model.ContentPatch, base: str | None, reason: str | None
    ) -> model.ProposalOutcome:
        body = {
            "patch": patch.model_dump(mode="json", exclude_none=True),
            "base_version_id": base,
            "reason": reason,
        }
        path = f"/records/{_segment(record_id, 'record_id')}"
        return _parse(model.ProposalOutcome, self._call("PATCH", path, body=body))

    def _supersede(
        self, record_id: str, *, by: str | None, content: model.Content | None, reason: str | None
    ) -> model.ProposalOutcome:
        body: dict[str, Any] = {"reason": reason}
        if content is not None:
            body["content"] = content.model_dump(mode="json")
        else:
            body["by"] = by
        path = f"/records/{_segment(record_id, 'record_id')}/supersede"
        return _parse(model.ProposalOutcome, self._call("POST", path, body=body))

    def _move(self, record_id: str, move: Move, reason: str | None) -> model.ProposalOutcome:
        path = f"/records/{_segment(record_id, 'record_id')}/{move}"
        return _parse(model.ProposalOutcome, self._call("POST", path, body={"reason": reason}))

    # ---- reads ---------------------------------------------------------------------------

    def _get(
        self, record_id: str, version: int | None, selector: model.VersionPin | None
    ) -> model.RecordView:
        path = f"/records/{_segment(record_id, 'record_id')}"
        if version is not None:
            return _parse(model.RecordView, self._call("GET", f"{path}/versions/{version}"))
        pin = selector or model.VersionPin.head()
        params = _params(
            selector=pin.kind.value, baseline_id=pin.baseline_id, version_id=pin.version_id
        )
        return _parse(model.RecordView, self._call("GET", path, params=params))

    def _resolve(self, record_id: str) -> model.Record:
        path = f"/records/{_segment(record_id, 'record_id')}/resolve"
        return _parse(model.Record, self._call("GET", path))

    def _history(self, record_id: str, *, after: int, limit: int) -> list[model.Version]:
        path = f"/records/{_segment(record_id, 'record_id')}/versions"
        found = self._call("GET", path, params={"after": after, "limit": limit})
        return _parse(list[model.Version], found)

    def _list_records(self, query: model.RecordQuery) -> list[model.Record]:
        if query.metadata:
            raise InvalidInput(
                "the HTTP API does not filter records by metadata; filter the page you get",
                field="metadata",
            )
        params = _params(
            kind=list(query.kinds) or None,
            status=[s.value for s in query.statuses] or None,
            scope=query.scope,
            created_after=_time(query.created_after),
            created_before=_time(query.created_before),
            limit=query.limit,
            offset=query.offset,
            after=query.after,
        )
        return _parse(list[model.Record], self._call("GET", "/records", params=params))

    def _search(self, query: str, filters: ReadFilters) -> SearchResult:
        body = _read_body(query, filters)
        return _parse(SearchResult, self._call("POST", "/search", body=body))

    def _retrieve(self, query: str, max_tokens: int, filters: ReadFilters) -> RetrievalResult:
        body = _read_body(query, filters)
        body["max_tokens"] = max_tokens
        return _parse(RetrievalResult, self._call("POST", "/retrieve", body=body))

    def _read_context(self, request: ReadContextRequest) -> ReadContextResponse:
        # the body's own keys choose its shape: a query or a record_id, never both
        body = request.model_dump(mode="json", exclude_none=True)
        return _parse(ReadContextResponse, self._call("POST", "/read_context", body=body))

    def _validate(self, record_ids: Sequence[str]) -> ValidationReport:
        found = self._call("POST", "/validate", body={"ids": list(record_ids)})
        return _parse(ValidationReport, found)

    def _status(self) -> dict[str, int]:
        return _parse(dict[str, int], self._call("GET", "/status"))

    # ---- review --------------------------------------------------------------------------

    def _proposals(
        self, status: model.ProposalStatus, *, limit: int, offset: int, after: str | None
    ) -> list[model.Proposal]:
        params = _params(status=status.value, limit=limit, offset=offset, after=after)
        return _parse(list[model.Proposal], self._call("GET", "/proposals", params=params))

    def _proposal(self, proposal_id: str) -> model.Proposal:
        path = f"/proposals/{_segment(proposal_id, 'proposal_id')}"
        return _parse(model.Proposal, self._call("GET", path))

    def _decide(
        self, proposal_id: str, *, approve: bool, reason: str | None
    ) -> model.ProposalOutcome:
        path = f"/proposals/{_segment(proposal_id, 'proposal_id')}/decision"
        body = {"approve": approve, "reason": reason}
        return _parse(model.ProposalOutcome, self._call("POST", path, body=body))

    def _rebase(self, proposal_id: str) -> model.ProposalOutcome:
        path = f"/proposals/{_segment(proposal_id, 'proposal_id')}/rebase"
        return _parse(model.ProposalOutcome, self._call("POST", path))

    def _publish(self, scope: str, choice: PublishChoice) -> model.ProposalOutcome:
        body = {"scope": scope, **_json_values(choice)}
        return _parse(model.ProposalOutcome, self._call("POST", "/publish", body=body))

    def _audit(self, query: model.AuditQuery) -> list[model.AuditEntry]:
        # the query's fields are the endpoint's parameters, named alike
        given = query.model_dump(exclude_none=True)
        params = {name: _time(v) if isinstance(v, datetime) else v for name, v in given.items()}
        return _parse(list[model.AuditEntry], self._call("GET", "/audit", params=params))

    # ---- the timeline and the decision graph -----------------------------------------------

    def _append_events(self, events: Sequence[model.EventDraft]) -> model.AppendReport:
        body = {"events": [event.model_dump(mode="json") for event in events]}
        return _parse(model.AppendReport, self._call("POST", "/timeline/events", body=body))

    def _events(self, filters: EventFilters) -> list[model.Event]:
        # the cursor travels as its parts (and its scope only where it names one)
        params = _params(**_json_values({**filters, "after": None}))
        after = filters.get("after")
        if after is not None:
            params |= {"after_ts": _time(after[0]), "after_id": after[1]}
            if len(after) == 3:
                params["after_scope"] = after[2]
        return _parse(list[model.Event], self._call("GET", "/timeline/events", params=params))

    def _timeline_search(self, query: str, filters: TimelineFilters) -> TimelineHits:
        params = _params(q=query, **_json_values(filters))
        found = self._call("GET", "/timeline/search", params=params)
        return _parse(TimelineHits, found)

    def _graph_roles(self) -> list[dict[str, Any]]:
        return _parse(list[dict[str, Any]], self._call("GET", "/graph/roles"))

    def _why(self, request: WhyRequest, passport: dict[str, str], mode: WhyMode) -> dict[str, Any]:
        body = request.model_dump(mode="json")
        found = self._call("POST", f"/graph/{mode}", body=body, headers=passport)
        return _parse(dict[str, Any], found)


def _read_body(query: str, filters: ReadFilters) -> dict[str, Any]:
    """The body of ``/search`` and ``/retrieve``: the query and the filters given (the body
    calls ``k`` ``top_k``)."""
    body = {"query": query, **_json_values(filters)}
    if "k" in body:
        body["top_k"] = body.pop("k")
    return body


def _json_values(options: Mapping[str, object]) -> dict[str, Any]:
    """Keyword options as JSON, by their own names (the server's too): a version pin as its
    fields, a moment in ISO 8601, lists and mappings as such. Options left out are left out:
    the server reads them as the kernel does."""
    return {name: _json_value(value) for name, value in options.items()}


def _json_value(value: object) -> Any:
    if isinstance(value, model.VersionPin):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return _time(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value
