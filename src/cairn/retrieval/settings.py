"""How search ranks: the ``[retrieval]`` table of a config file, or
``CAIRN_RETRIEVAL__<NAME>`` in the environment. The defaults are the values chosen by
cross-validation on the retrieval benchmarks (docs/retrieval.md says how); the rest of the
knobs are there for a store whose data is unlike theirs."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from cairn.endpoint_settings import endpoint_key, endpoint_timeout
from cairn.retrieval.endpoint_rerank import parse_reranker
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig
from cairn.retrieval.weights import Fusion

__all__ = ["RetrievalSettings"]


def _knob(default: float, description: str, *, most: float = 10) -> Any:
    """A ranking knob's field: its default is the kernel's, its range 0 to ``most``."""
    return Field(default=default, ge=0, le=most, description=description)


class RetrievalSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    fusion: Fusion = Field(
        default=DEFAULT_RANKING.fusion,
        description="how keyword and vector results are combined: similarity (keywords by "
        "rank, vectors by similarity) or rrf (both by rank: reciprocal rank fusion)",
    )
    context_weight: float = _knob(
        DEFAULT_RANKING.context_weight, "what a matching context chunk (nearby turns) adds"
    )
    session_weight: float = _knob(
        DEFAULT_RANKING.session_weight, "session evidence: share of its best other hits added"
    )
    session_depth: int = _knob(
        DEFAULT_RANKING.session_depth, "how many of the session's other hits count", most=20
    )
    entity_weight: float = _knob(
        DEFAULT_RANKING.entity_weight, "boost per share of the query's names and numbers held"
    )
    title_weight: float = _knob(
        DEFAULT_RANKING.title_weight, "boost per share of the query's words in the title"
    )
    time_weight: float = _knob(
        DEFAULT_RANKING.time_weight, "boost for a hit said or written in the time the query names"
    )
    reranker: str = Field(
        default="off",
        description="off, or openai:URL#model for a reranking endpoint (POST URL/rerank, "
        "as vLLM, llama.cpp, Infinity and Jina serve it) that reorders the best hits",
    )
    reranker_key: SecretStr | None = endpoint_key("the reranking endpoint's API key")
    reranker_timeout: float = endpoint_timeout(
        2.0, "seconds before a search gives up on the reranker and keeps its order", most=60
    )
    rerank_top: int = Field(
        default=30, ge=1, le=200, description="how many of the best hits the reranker reorders"
    )

    @field_validator("reranker")
    @classmethod
    def _reranker_is_an_address(cls, value: str) -> str:
        parse_reranker(value)
        return value

    def ranking(self) -> RankingConfig:
        """The ranking knobs these settings choose (the fields both share by name)."""
        knobs = {f.name for f in dataclasses.fields(RankingConfig)} & set(type(self).model_fields)
        return RankingConfig(**self.model_dump(include=knobs))
