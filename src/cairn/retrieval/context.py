"""The ``read_context`` contract and the other report shapes of the read side."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from cairn.model import CairnModel, Id, Name, QueryText, VersionPin, exactly_one_of
from cairn.retrieval.types import Contradiction, Item, Mode, Trace

__all__ = [
    "ClaimCheck",
    "ClaimsReport",
    "ReadContextRequest",
    "ReadContextResponse",
    "RecordCheck",
    "ResearchAnswer",
    "ResearchAttempt",
    "ResearchPlan",
    "ValidationReport",
]


class ReadContextRequest(CairnModel):
    """Either a ``query`` (ranked recall) or a ``record_id`` (direct fetch), within a scope."""

    scope: Name
    selector: VersionPin = Field(default_factory=VersionPin.published)
    query: QueryText | None = None
    record_id: Id | None = None
    max_tokens: int = Field(default=8000, ge=1, le=1_000_000)
    k: int = Field(default=10, ge=1, le=100)
    mode: Mode = "hybrid"
    include_drafts: bool = False

    _query_or_record = exactly_one_of(
        "query", "record_id", "give exactly one of 'query' or 'record_id'"
    )


class ReadContextResponse(CairnModel):
    scope: str
    selector_used: VersionPin
    items: tuple[Item, ...]
    contradictions: tuple[Contradiction, ...] = ()
    token_budget_exceeded: bool = False
    excluded_count: int = 0
    warnings: tuple[str, ...] = ()
    trace: Trace = Field(default_factory=Trace)


class RecordCheck(CairnModel):
    """Whether one cited record may still be relied on, and why not."""

    record_id: str
    valid: bool
    status: str | None = None
    version_id: str | None = None
    resolved_id: str | None = None
    confidence_label: str | None = None
    problems: tuple[str, ...] = ()


class ValidationReport(CairnModel):
    checked_at: datetime
    records: tuple[RecordCheck, ...]
    contradictions: tuple[Contradiction, ...] = ()


class ClaimCheck(CairnModel):
    claim: str
    verdict: str  # supported | contradicted | unknown
    evidence: tuple[Item, ...] = ()


class ClaimsReport(CairnModel):
    claims: tuple[ClaimCheck, ...]


class ResearchPlan(CairnModel):
    primary_query: str
    memory_types: tuple[str, ...] = ()
    created_after: datetime | None = None
    top_k: int = 10


class ResearchAttempt(CairnModel):
    number: int
    mode: Mode
    top_k: int
    kinds: tuple[str, ...]
    created_after: datetime | None
    found: int
    #: the mean confidence of its best three results
    mean_confidence: float


class ResearchAnswer(CairnModel):
    question: str
    plan: ResearchPlan
    summary: str
    items: tuple[Item, ...]
    contradictions: tuple[Contradiction, ...] = ()
    attempts: tuple[ResearchAttempt, ...]
    partial: bool = False
    warnings: tuple[str, ...] = ()
