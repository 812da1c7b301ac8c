"""How a host and a port are written together, for every door that prints or binds one."""

from __future__ import annotations

__all__ = ["host_port", "http_base"]


def host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:8765``), as URLs and gRPC
    addresses need it."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def http_base(host: str, port: int) -> str:
    """The base URL of a server listening on ``host`` and ``port``."""
    return f"http://{host_port(host, port)}"
