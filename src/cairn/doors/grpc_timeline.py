"""The timeline over gRPC (``cairn.timeline.v1.TimelineService``): a thin door over
``Memory``'s verbs, as ``http_timeline`` is over HTTP.

Each call authenticates its own ``authorization: Bearer <key>`` metadata (so a revoked key
stops working at once), converts the request (``_grpc_wire``), makes one kernel call and
converts the answer. What the caller may read is the kernel's to trim, as on every door. A
kernel error becomes the status of ``_errors.GRPC_STATUS``, with its message, and its code
(and field) in the trailing metadata ``cairn-code`` (``cairn-field``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import grpc
from pydantic import ValidationError

from cairn.doors import _grpc_wire as wire
from cairn.doors._errors import grpc_status
from cairn.doors.grpc_gen import timeline_pb2 as pb
from cairn.doors.grpc_gen import timeline_pb2_grpc as pb_grpc
from cairn.errors import CairnError, InvalidInput, Unauthenticated
from cairn.memory import Memory
from cairn.model import Principal
from cairn.workspace import Workspace

__all__ = ["SERVICE_NAME", "TimelineService"]

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["TimelineService"].full_name

log = logging.getLogger("cairn.grpc")

Request = TypeVar("Request")
Response = TypeVar("Response")
Verb = Callable[["TimelineService", Request, Principal], Response]
Rpc = Callable[["TimelineService", Request, grpc.ServicerContext], Response]


def _rpc(verb: Verb[Request, Response]) -> Rpc[Request, Response]:
    """The RPC of a method written as ``(request, principal) -> response``: authenticate,
    run it, and say any failure as a gRPC status; one log line per call."""
    name = verb.__name__

    @functools.wraps(verb)
    def call(self: TimelineService, request: Request, context: grpc.ServicerContext) -> Response:
        start = time.perf_counter()
        try:
            answer = verb(self, request, self.principal(context))
        except CairnError as exc:
            failure = exc
        except ValidationError as exc:  # a value the kernel's own models refused
            failure = InvalidInput.from_validation(exc)
        except Exception:
            # The caller learns only that it failed; the details are for the operator.
            log.exception("rpc failed", extra={"fields": {"rpc": name}})
            _log_call(name, "INTERNAL", start)
            context.abort(
                grpc.StatusCode.INTERNAL, "internal error; the server log has the details"
            )
        else:
            _log_call(name, "OK", start)
            return answer
        status = grpc_status(failure)
        _log_call(name, status, start)
        trailing = [("cairn-code", failure.code)]
        # metadata values are printable ASCII; a field path is, unless it quotes a caller's key
        if failure.field and failure.field.isascii() and failure.field.isprintable():
            trailing.append(("cairn-field", failure.field))
        context.set_trailing_metadata(tuple(trailing))
        context.abort(grpc.StatusCode[status], failure.public_message)

    return call


def _log_call(name: str, status: str, start: float) -> None:
    ms = round((time.perf_counter() - start) * 1000, 1)
    log.info("rpc", extra={"fields": {"rpc": name, "status": status, "ms": ms}})


def _required(value: str, what: str) -> str:
    if not value:
        raise InvalidInput(f"{what} is required", field=what)
    return value


class TimelineService(pb_grpc.TimelineServiceServicer):
    """``TimelineService`` on one ``Memory``, for the principals of one workspace."""

    def __init__(self, memory: Memory, workspace: Workspace) -> None:
        self._memory = memory
        self._workspace = workspace

    def principal(self, context: grpc.ServicerContext) -> Principal:
        """Who the call's bearer key belongs to; the principals file is read per call."""
        sent = [v for k, v in context.invocation_metadata() if k == "authorization"]
        if not sent:
            raise Unauthenticated("no API key: send the metadata 'authorization: Bearer <key>'")
        if len(sent) > 1:
            raise Unauthenticated("send one 'authorization' metadata entry, not several")
        value = sent[0]
        scheme, _, key = value.partition(" ") if isinstance(value, str) else ("", "", "")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthenticated("the 'authorization' metadata must be 'Bearer <key>'")
        return self._workspace.authenticate(key.strip())

    @_rpc
    def IngestEvent(self, request: pb.IngestEventRequest, who: Principal) -> pb.IngestEventResponse:
        report = self._memory.append_events(wire.drafts(request), principal=who)
        return pb.IngestEventResponse(stored=report.stored, duplicates=report.duplicates)

    @_rpc
    def GetTocRoot(self, request: pb.GetTocRootRequest, who: Principal) -> pb.GetTocRootResponse:
        years = self._memory.timeline_root(principal=who, scope=wire.text(request.scope))
        return pb.GetTocRootResponse(nodes=[wire.node_message(n) for n in years])

    @_rpc
    def GetNode(self, request: pb.GetNodeRequest, who: Principal) -> pb.TocNode:
        if request.version < 0:
            raise InvalidInput("version must be 1 or more (0 for the latest)", field="version")
        node = self._memory.timeline_node(
            _required(request.node_id, "node_id"), principal=who, version=request.version or None
        )
        return wire.node_message(node)

    @_rpc
    def BrowseToc(self, request: pb.BrowseTocRequest, who: Principal) -> pb.BrowseTocResponse:
        page = self._memory.timeline_browse(
            _required(request.node_id, "node_id"),
            principal=who,
            after=wire.text(request.after),
            limit=request.limit or 20,
        )
        return wire.page_message(page)

    @_rpc
    def GetEvents(self, request: pb.GetEventsRequest, who: Principal) -> pb.GetEventsResponse:
        events = self._memory.events(
            principal=who,
            scope=wire.text(request.scope),
            session_id=wire.text(request.session_id),
            since=wire.moment(request.since, "since") if request.HasField("since") else None,
            until=wire.moment(request.until, "until") if request.HasField("until") else None,
            after=wire.cursor(request.after) if request.HasField("after") else None,
            limit=request.limit or 100,
        )
        return pb.GetEventsResponse(events=[wire.event_message(e) for e in events])

    @_rpc
    def ExpandGrip(self, request: pb.ExpandGripRequest, who: Principal) -> pb.ExpandGripResponse:
        expanded = self._memory.expand_grip(
            _required(request.grip_id, "grip_id"),
            principal=who,
            before=request.before if request.HasField("before") else 3,
            after=request.after if request.HasField("after") else 3,
        )
        return wire.expanded_message(expanded)

    @_rpc
    def TeleportQuery(
        self, request: pb.TeleportQueryRequest, who: Principal
    ) -> pb.TeleportQueryResponse:
        found = self._memory.timeline_search(
            request.query,
            principal=who,
            scope=wire.text(request.scope),
            k=request.k or 10,
            since=wire.moment(request.since, "since") if request.HasField("since") else None,
            until=wire.moment(request.until, "until") if request.HasField("until") else None,
        )
        return pb.TeleportQueryResponse(
            hits=[wire.hit_message(h) for h in found.hits], warnings=found.warnings
        )

    @_rpc
    def IndexStatus(self, request: pb.IndexStatusRequest, who: Principal) -> pb.IndexStatusResponse:
        return wire.status_message(self._memory.timeline_status(principal=who))
