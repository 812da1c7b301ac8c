"""The gRPC door's server: the timeline service, the standard health service and server
reflection on one port. ``cairn serve --grpc-port N`` starts it in the HTTP server's process,
on the same ``Memory``, and stops it before that memory closes.

Health and reflection answer without a key, as ``GET /health`` and the OpenAPI document do:
they tell whether the door is up and what the proto says, nothing about the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cairn.doors._net import host_port
from cairn.doors.grpc_gen import timeline_pb2_grpc
from cairn.doors.grpc_timeline import SERVICE_NAME, TimelineService
from cairn.limits import MAX_REQUEST_BYTES
from cairn.memory import Memory
from cairn.workspace import Workspace

__all__ = ["GRACE_SECONDS", "DecodeGuard", "GrpcDoor", "start_grpc_door"]

# In-flight calls get this long to finish on shutdown; then they are cancelled.
GRACE_SECONDS = 5.0
# Calls run on these threads, as HTTP requests run on uvicorn's pool (Memory is thread-safe).
# Health watches do not hold one: the health servicer answers them without blocking.
WORKERS = 16

log = logging.getLogger("cairn.grpc")


class _Undecodable:
    """Stands for a request that could not be decoded, so that its call can refuse it."""


_UNDECODABLE = _Undecodable()
_NOT_DECODED = (
    "the request could not be decoded: it is not the method's protocol buffer message, "
    "holds a string that is not UTF-8, or nests deeper than 100 levels"
)


class DecodeGuard(grpc.ServerInterceptor):
    """Answer a request that cannot be decoded with INVALID_ARGUMENT, as the HTTP doors
    answer a body they cannot read. Left to itself grpcio answers INTERNAL and logs an error
    with a traceback, for anyone, key or none, who sends a few bad bytes."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler  # server reflection streams requests; it decodes them itself
        decode = handler.request_deserializer

        def tolerant(data: bytes) -> Any:
            try:
                return decode(data)
            except Exception:  # a DecodeError, or the decoder's recursion limit
                return _UNDECODABLE

        def refuse(request: Any, context: grpc.ServicerContext) -> None:
            if request is _UNDECODABLE:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, _NOT_DECODED)

        if handler.unary_unary is not None:
            unary = handler.unary_unary

            def unary_call(request: Any, context: grpc.ServicerContext) -> Any:
                refuse(request, context)
                return unary(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary_call, tolerant, handler.response_serializer
            )
        if handler.unary_stream is not None:
            streaming = handler.unary_stream

            def stream_call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                refuse(request, context)
                yield from streaming(request, context)

            return grpc.unary_stream_rpc_method_handler(
                stream_call, tolerant, handler.response_serializer
            )
        return handler


@dataclass(frozen=True)
class GrpcDoor:
    """A started gRPC server and what it answers health checks with."""

    server: grpc.Server
    health: health.HealthServicer
    address: str
    port: int  # the port bound (the one asked for, or the system's pick for 0)

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        """Say NOT_SERVING, refuse new calls, give in-flight ones ``grace`` seconds."""
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()
        log.info("grpc stopped", extra={"fields": {"address": self.address}})


def start_grpc_door(workspace: Workspace, memory: Memory, *, host: str, port: int) -> GrpcDoor:
    """Serve the timeline, health and reflection on ``host:port`` (0: any free port).

    Raises ``RuntimeError`` when the address cannot be bound (the port is taken)."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="cairn-grpc"),
        interceptors=[DecodeGuard()],
        options=[
            # the same ceiling as every HTTP door's request body
            ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
            # a port another server holds is an error, not silently shared (grpcio's
            # default on Linux sets SO_REUSEPORT)
            ("grpc.so_reuseport", 0),
        ],
    )
    timeline_pb2_grpc.add_TimelineServiceServicer_to_server(
        TimelineService(memory, workspace), server
    )
    checks = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    address = host_port(host, port)
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise RuntimeError(f"the gRPC door cannot listen on {address}: {exc}") from None
    for service in (health.OVERALL_HEALTH, SERVICE_NAME):
        checks.set(service, health_pb2.HealthCheckResponse.SERVING)
    server.start()
    log.info("grpc listening", extra={"fields": {"address": host_port(host, bound)}})
    return GrpcDoor(server, checks, host_port(host, bound), bound)
