"""The HTTP client every optional OpenAI-compatible endpoint is reached through (embeddings,
timeline summaries, graph answers): one place that sets the base URL, the bearer key and
the timeout, so the three callers cannot drift apart."""

from __future__ import annotations

import httpx

__all__ = ["endpoint_client"]


def endpoint_client(
    base_url: str,
    *,
    api_key: str | None,
    timeout: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(
        base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
    )
