"""How search ranks: the ``[retrieval]`` table of a config file, or
``CAIRN_RETRIEVAL__<NAME>`` in the environment. The defaults are the values chosen by
cross-validation on the retrieval benchmarks (docs/retrieval.md says how); the rest of the
knobs are there for a store whose data is unlike theirs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from cairn.retrieval.endpoint_rerank import parse_reranker
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig

__all__ = ["RetrievalSettings"]


class RetrievalSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    context_weight: float = Field(
        default=DEFAULT_RANKING.context_weight, ge=0, le=10,
        description="how much a matching context chunk (the turns around a turn) adds",
    )  # fmt: skip
    session_weight: float = Field(
        default=DEFAULT_RANKING.session_weight, ge=0, le=10,
        description="session evidence: share of the session's best other hits added",
    )  # fmt: skip
    session_depth: int = Field(
        default=DEFAULT_RANKING.session_depth, ge=1, le=20,
        description="how many of the session's other hits count",
    )  # fmt: skip
    entity_weight: float = Field(
        default=DEFAULT_RANKING.entity_weight, ge=0, le=10,
        description="boost per share of the query's names and numbers a hit holds",
    )  # fmt: skip
    title_weight: float = Field(
        default=DEFAULT_RANKING.title_weight, ge=0, le=10,
        description="boost per share of the query's words in a hit's title",
    )  # fmt: skip
    time_weight: float = Field(
        default=DEFAULT_RANKING.time_weight, ge=0, le=10,
        description="boost for a hit said or written in the time the query names",
    )  # fmt: skip
    reranker: str = Field(
        default="off",
        description="off, or openai:URL#model for a reranking endpoint (POST URL/rerank, "
        "as vLLM, llama.cpp, Infinity and Jina serve it) that reorders the best hits",
    )
    reranker_key: SecretStr | None = Field(
        default=None, description="the reranking endpoint's API key"
    )
    reranker_timeout: float = Field(
        default=2.0, gt=0, le=60,
        description="seconds before a search gives up on the reranker and keeps its order",
    )  # fmt: skip
    rerank_top: int = Field(
        default=30, ge=1, le=200, description="how many of the best hits the reranker reorders"
    )

    @field_validator("reranker")
    @classmethod
    def _reranker_is_an_address(cls, value: str) -> str:
        parse_reranker(value)
        return value

    def ranking(self) -> RankingConfig:
        """The ranking knobs these settings choose."""
        return RankingConfig(
            context_weight=self.context_weight,
            session_weight=self.session_weight,
            session_depth=self.session_depth,
            entity_weight=self.entity_weight,
            title_weight=self.title_weight,
            time_weight=self.time_weight,
        )
