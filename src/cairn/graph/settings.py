"""How the decision graph answers: the ``[graph]`` table of a config file, or
``CAIRN_GRAPH__<NAME>`` in the environment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from cairn.endpoint_settings import endpoint_key, endpoint_timeout

__all__ = ["GraphSettings"]


class GraphSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: str = Field(
        default="off",
        description="off, or openai:URL#model for an OpenAI-compatible chat endpoint that "
        "writes the answers of graph queries (without one, queries get the templated answer)",
    )
    llm_key: SecretStr | None = endpoint_key("the endpoint's API key (CAIRN_GRAPH__LLM_KEY)")
    llm_timeout: float = endpoint_timeout(20, "seconds before a query falls back to the template")
    trace_days: int = Field(
        default=30, ge=1, le=3650, description="days a graph answer's trace bundle is kept"
    )
    traces_per_day: int = Field(
        default=500,
        ge=1,
        le=100_000,
        description="the most trace bundles kept per asker per day; past it the asker's "
        "oldest of the day are removed, so a key asking in a loop cannot fill the disk",
    )
