"""The transport the optional model endpoints are reached through: httpx's own, with every
socket wait (connecting, sending, each read of the status line, the headers, interim
``1xx`` answers and the body) cut to the time left before the call's deadline.

httpx's timeouts bound each wait, not the exchange: an endpoint that sends a header line,
a ``102 Processing`` or a byte of body just inside the timeout, again and again, would hold
a search (the reranker and query embedding run on the read path) for as long as it liked.
httpx has no whole-exchange timeout for synchronous clients, so the deadline is kept here,
at the socket, where each wait is made. Imported only when an endpoint is configured.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

__all__ = ["DeadlineTransport", "deadline", "environment_mounts"]

# Proxies whose sockets the deadline can be kept on (httpcore's HTTPProxy; SOCKS is not).
_DEADLINE_PROXY_SCHEMES = ("http", "https")

# When the exchange this thread (or task) is making must be over, by the monotonic clock.
_deadline: ContextVar[float | None] = ContextVar("cairn_endpoint_deadline", default=None)


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Every socket wait of the endpoint calls made in the block ends ``seconds`` from now
    (None: no deadline beyond each wait's own timeout)."""
    token = _deadline.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before the deadline; ``late`` when none is left."""
    ends = _deadline.get()
    if ends is None:
        return timeout
    left = ends - time.monotonic()
    if left <= 0:
        raise late("no whole answer within the endpoint's timeout")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    # Passed through as httpcore calls them (by keyword), with the timeout cut.
    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        kwargs["timeout"] = _left(kwargs.get("timeout"), httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        kwargs["timeout"] = _left(kwargs.get("timeout"), httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` (its request and answer handling, its errors) over a pool
    whose sockets keep the deadline of ``deadline()``; through ``proxy`` (an ``http://`` or
    ``https://`` proxy URL, credentials in it sent as httpx sends them) when one is given,
    whose sockets keep it too."""

    def __init__(self, proxy: str | None = None) -> None:
        # httpx takes no network backend for its pool, so the pool is made here as httpx
        # makes it, with the backend that keeps the deadline. (httpx's own __init__ is not
        # called: it would build a pool and an SSL context to be dropped, about 17 ms a
        # client; the pool is all the rest of the class uses.)
        limits = httpx.Limits()
        shared: dict[str, Any] = {
            "ssl_context": httpx.create_ssl_context(),
            "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry,
            "network_backend": _DeadlineBackend(),
        }
        if proxy is None:
            self._pool = httpcore.ConnectionPool(**shared)
            return
        via = httpx.Proxy(proxy)
        if via.url.scheme not in _DEADLINE_PROXY_SCHEMES:
            raise ValueError(f"only http and https proxies keep the deadline, not {via.url}")
        self._pool = httpcore.HTTPProxy(
            proxy_url=httpcore.URL(
                scheme=via.url.raw_scheme,
                host=via.url.raw_host,
                port=via.url.port,
                target=via.url.raw_path,
            ),
            proxy_auth=via.raw_auth,
            proxy_headers=via.headers.raw,
            proxy_ssl_context=via.ssl_context,
            **shared,
        )


def environment_mounts(base_url: str) -> dict[str, httpx.BaseTransport | None]:
    """The proxies the environment names (``HTTPS_PROXY``, ``ALL_PROXY`` …) for ``base_url``,
    mounted as httpx itself mounts them when it reads the environment, ``NO_PROXY``
    exemptions included (a client given a transport of its own reads none of it): an http or
    https proxy through a ``DeadlineTransport``, any other (SOCKS) through httpx's own
    transport, which keeps each wait's timeout but not the whole exchange's (``post_bounded``
    then checks it between the pieces of the answer); an exempted pattern maps to None, the
    client's own transport. Only the pattern httpx would route ``base_url`` by is mounted
    (an endpoint client asks nothing else), so a proxy set for other hosts, even one this
    machine cannot go through (SOCKS without ``socksio``), does not stop it."""
    # httpx's own reading of the variables and its own patterns, so that a host NO_PROXY
    # exempts (by name, port, scheme or address, as httpx and curl read it) is exempted
    # exactly as httpx would; httpx offers them only from a private module, hence the
    # version range in pyproject.toml.
    from httpx._utils import URLPattern, get_environment_proxies

    url = httpx.URL(base_url)
    # The one pattern httpx would route base_url by: the first that matches, most specific
    # first, in httpx's own order of its patterns.
    chosen = next(
        (
            (pattern, proxy)
            for pattern, proxy in sorted(
                get_environment_proxies().items(), key=lambda item: URLPattern(item[0])
            )
            if URLPattern(pattern).matches(url)
        ),
        None,
    )
    if chosen is None:
        return {}
    pattern, proxy = chosen
    if proxy is None:
        return {pattern: None}
    if httpx.URL(proxy).scheme in _DEADLINE_PROXY_SCHEMES:
        return {pattern: DeadlineTransport(proxy)}
    return {pattern: httpx.HTTPTransport(proxy=proxy)}
