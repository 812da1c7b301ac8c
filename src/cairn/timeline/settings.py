"""How the timeline cuts and summarises: the ``[timeline]`` table of a config file, or
``CAIRN_TIMELINE__<NAME>`` in the environment."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cairn.endpoint_settings import endpoint_timeout
from cairn.timeline.segmenter import SegmentRules

__all__ = ["TimelineSettings"]


class TimelineSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gap_minutes: float = Field(
        default=30, gt=0, le=24 * 60, description="a pause this long closes a segment"
    )
    max_tokens: int = Field(
        default=4000,
        ge=50,
        le=1_000_000,
        description="a segment closes before it grows past this many tokens",
    )
    overlap_minutes: float = Field(
        default=5,
        ge=0,
        le=24 * 60,
        description="a segment starts with the previous one's events from this close to its start",
    )
    overlap_tokens: int = Field(
        default=500, ge=0, le=100_000, description="... but no more than this many tokens of them"
    )
    timezone: str = Field(
        default="UTC", description="the time zone days, weeks and months are cut in (an IANA name)"
    )
    agents: Literal["shared", "separate"] = Field(
        default="shared",
        description=(
            "shared: one timeline per scope with events tagged by agent; "
            "separate: one per scope and agent"
        ),
    )
    summarizer: str = Field(
        default="extractive",
        description="extractive, or openai:URL#model for an OpenAI-compatible chat endpoint",
    )
    summarizer_timeout: float = endpoint_timeout(
        20, "seconds before an endpoint summary falls back to the extractive one"
    )

    rollup_every_seconds: float = Field(
        default=60,
        ge=0,
        le=86_400,
        description="how often cairn serve rolls up new events in the background (0: never; "
        "appends made through the server also wake it)",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    def rules(self) -> SegmentRules:
        return SegmentRules(
            gap=timedelta(minutes=self.gap_minutes),
            max_tokens=self.max_tokens,
            overlap=timedelta(minutes=self.overlap_minutes),
            overlap_tokens=self.overlap_tokens,
        )
