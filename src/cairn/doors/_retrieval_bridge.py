"""The one seam between the doors and retrieval, which the kernel does not offer yet.

Every retrieval-shaped route, tool and skill (read_context, retrieve, search, validate,
for_path, ingest, validate_claims) calls a function here and nothing else. Today they fall
back on ``Memory.list_records`` / ``Memory.get`` (a plain substring match, clearly labelled
``mode: "fallback"``) or raise ``NotAvailableYet``; once ``Memory.read_context / retrieve /
search / validate / for_path`` exist, each function becomes a one-line call and no door
changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from cairn.doors._errors import NotAvailableYet
from cairn.errors import CairnError
from cairn.memory import Memory
from cairn.model import Principal, Record, RecordQuery, Selector, SelectorKind, Status, utcnow

__all__ = [
    "Citation",
    "ContextResult",
    "RetrievalItem",
    "RetrievalResult",
    "ValidationIssue",
    "ValidationReport",
    "for_path",
    "ingest",
    "read_context",
    "retrieve",
    "search",
    "validate",
    "validate_claims",
]

SearchMode = Literal["vector", "keyword", "hybrid"]


class Citation(BaseModel):
    record_id: str
    version_id: str
    version: int
    scope: str


class RetrievalItem(BaseModel):
    id: str
    kind: str
    scope: str
    status: Status
    title: str
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    confidence: str
    citation: Citation
    why_included: str = "keyword_match"
    score: float = 0.0


class RetrievalResult(BaseModel):
    results: list[RetrievalItem]
    metadata: dict[str, Any] = Field(default_factory=dict)
    mode: str = Field(
        default="fallback",
        description="'fallback' while retrieval is being built: a plain substring match",
    )


class ContextResult(BaseModel):
    scope: str
    selector_used: Selector
    items: list[RetrievalItem]
    mode: str = "fallback"


class ValidationIssue(BaseModel):
    type: str
    ids: list[str]
    reason: str


class ValidationReport(BaseModel):
    valid: bool
    issues: list[ValidationIssue]


def _item(record: Record, why: str = "keyword_match", score: float = 0.0) -> RetrievalItem:
    content = record.content
    return RetrievalItem(
        id=record.id,
        kind=record.kind,
        scope=record.scope,
        status=record.status,
        title=content.title,
        content=content.body,
        metadata=content.metadata,
        confidence=content.confidence.value,
        citation=Citation(
            record_id=record.id,
            version_id=record.current_version_id,
            version=record.current_version,
            scope=record.scope,
        ),
        why_included=why,
        score=score,
    )


def _matches(
    memory: Memory,
    principal: Principal,
    query: str,
    *,
    scope: str | None,
    statuses: tuple[Status, ...],
    top_k: int,
) -> list[RetrievalItem]:
    terms = [t for t in query.casefold().split() if t]
    found: list[RetrievalItem] = []
    records = memory.list_records(
        RecordQuery(scope=scope, statuses=statuses, limit=10_000), principal=principal
    )
    for record in records:
        text = f"{record.content.title}\n{record.content.body}".casefold()
        hits = sum(1 for t in terms if t in text)
        if hits or not terms:
            found.append(_item(record, score=hits / max(len(terms), 1)))
    found.sort(key=lambda item: -item.score)
    return found[:top_k]


def retrieve(
    memory: Memory,
    principal: Principal,
    *,
    query: str,
    top_k: int = 10,
    scope: str | None = None,
    max_tokens: int = 8000,
    include_archived: bool = False,
) -> RetrievalResult:
    statuses = (Status.ACTIVE, Status.ARCHIVED) if include_archived else (Status.ACTIVE,)
    items = _matches(memory, principal, query, scope=scope, statuses=statuses, top_k=top_k)
    return RetrievalResult(
        results=items,
        metadata={
            "token_budget_exceeded": False,
            "excluded_count": 0,
            "contradiction_detected": False,
            "max_tokens": max_tokens,
        },
    )


def search(
    memory: Memory,
    principal: Principal,
    *,
    query: str,
    mode: SearchMode = "hybrid",
    top_k: int = 10,
    scope: str | None = None,
    include_drafts: bool = False,
) -> RetrievalResult:
    statuses = (Status.ACTIVE, Status.DRAFT) if include_drafts else (Status.ACTIVE,)
    items = _matches(memory, principal, query, scope=scope, statuses=statuses, top_k=top_k)
    return RetrievalResult(results=items, metadata={"requested_mode": mode})


def read_context(
    memory: Memory,
    principal: Principal,
    *,
    scope: str,
    query: str | None = None,
    record_id: str | None = None,
    selector: Selector | None = None,
    top_k: int = 10,
) -> ContextResult:
    selector = selector or Selector.published()
    if record_id is not None:
        view = memory.get(record_id, principal=principal, selector=selector)
        record = view.record.model_copy(
            update={
                "content": view.version.content,
                "current_version_id": view.version.id,
                "current_version": view.version.number,
            }
        )
        return ContextResult(
            scope=scope, selector_used=view.selector_used, items=[_item(record, why="direct_fetch")]
        )
    if selector.kind is not SelectorKind.HEAD:
        raise NotAvailableYet(
            "read_context over a baseline needs the retrieval pipeline, which is not available "
            "yet; pass selector kind 'head' or a record_id",
            field="selector",
        )
    items = _matches(
        memory, principal, query or "", scope=scope, statuses=(Status.ACTIVE,), top_k=top_k
    )
    return ContextResult(scope=scope, selector_used=selector, items=items)


def for_path(
    memory: Memory, principal: Principal, *, path: str, top_k: int = 10, scope: str | None = None
) -> RetrievalResult:
    raise NotAvailableYet("memory for a path is not available yet (retrieval is being built)")


def validate(
    memory: Memory, principal: Principal, *, ids: list[str], now: datetime | None = None
) -> ValidationReport:
    now = now or utcnow()
    issues: list[ValidationIssue] = []
    for record_id in ids:
        try:
            record = memory.get(record_id, principal=principal).record
        except CairnError as exc:
            issues.append(ValidationIssue(type="missing", ids=[record_id], reason=exc.message))
            continue
        valid_to = record.content.valid_to
        if valid_to is not None and valid_to <= now:
            issues.append(
                ValidationIssue(
                    type="expired", ids=[record_id], reason=f"valid until {valid_to.isoformat()}"
                )
            )
        if record.superseded_by:
            issues.append(
                ValidationIssue(
                    type="superseded",
                    ids=[record_id],
                    reason=f"superseded by {record.superseded_by}",
                )
            )
        if record.status is not Status.ACTIVE:
            issues.append(
                ValidationIssue(
                    type=record.status.value,
                    ids=[record_id],
                    reason=f"record is {record.status.value}",
                )
            )
    return ValidationReport(valid=not issues, issues=issues)


def validate_claims(
    memory: Memory, principal: Principal, *, text: str, scope: str | None = None
) -> ValidationReport:
    raise NotAvailableYet("claim validation is not available yet (retrieval is being built)")


def ingest(
    memory: Memory, principal: Principal, *, source: str, scope: str | None = None
) -> dict[str, Any]:
    raise NotAvailableYet("ingest is not available over the doors yet")
