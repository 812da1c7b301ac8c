"""The fields a settings table gives an optional OpenAI-compatible endpoint it calls (the
graph's answer writer, the timeline's summariser, the reranker): its API key, and how long
to wait for it before falling back to what cairn does without one. One rule for each, so
every table bounds and defaults them alike."""

from __future__ import annotations

from typing import Any

from pydantic import Field

__all__ = ["endpoint_key", "endpoint_timeout"]

# How long an endpoint may be waited for at most, unless a table sets a tighter bound.
_MAX_TIMEOUT_SECONDS = 600


def endpoint_key(description: str) -> Any:
    """An endpoint's API key field (declare it ``SecretStr | None``): unset by default, for
    an endpoint that needs none."""
    return Field(default=None, description=description)


def endpoint_timeout(
    default: float, description: str, *, most: float = _MAX_TIMEOUT_SECONDS
) -> Any:
    """The seconds an endpoint is waited for before the fallback: more than 0, at most
    ``most``."""
    return Field(default=default, gt=0, le=most, description=description)
