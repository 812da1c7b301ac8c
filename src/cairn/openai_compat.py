"""The HTTP client every optional OpenAI-compatible endpoint is reached through (embeddings,
timeline summaries, graph answers): one place that sets the base URL, the bearer key and
the timeout, so the three callers cannot drift apart."""

from __future__ import annotations

from typing import NotRequired, TypedDict, Unpack

import httpx

__all__ = ["ChatEndpoint", "ChatEndpointOptions", "endpoint_client"]


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


class ChatEndpointOptions(TypedDict):
    """Where a chat model is served and how long to wait for it (``transport``: tests)."""

    base_url: str
    model: str
    timeout: float
    api_key: NotRequired[str | None]
    transport: NotRequired[httpx.BaseTransport | None]


class ChatEndpoint:
    """One chat model behind an endpoint's ``/chat/completions``: what graph answers and
    timeline summaries each ask."""

    def __init__(self, **options: Unpack[ChatEndpointOptions]) -> None:
        self.model = options["model"]
        self._client = endpoint_client(
            options["base_url"],
            api_key=options.get("api_key"),
            timeout=options["timeout"],
            transport=options.get("transport"),
        )
