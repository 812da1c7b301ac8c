"""What a read returns: items with version-pinned citations, scores and a trace."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cairn.model import CairnModel, Provenance, VersionPin

__all__ = [
    "UNCOUNTED_WAITING",
    "VECTOR_INDEX_BUSY",
    "Citation",
    "Contradiction",
    "Excerpt",
    "Excluded",
    "Hit",
    "Item",
    "Mode",
    "RetrievalResult",
    "Scores",
    "SearchResult",
    "Trace",
    "Why",
    "vector_warnings",
]

Mode = Literal["hybrid", "keyword", "vector"]
Why = Literal["keyword_match", "vector_match", "relationship_path", "direct_fetch"]


class Excerpt(CairnModel):
    """Where in the version's body the cited passage lies (for highlighting)."""

    chunk_key: str
    start: int
    end: int


class Citation(CairnModel):
    """Machine-checkable: exactly one ``(record_id, version_id)`` pair."""

    record_id: str
    version_id: str
    scope: str
    chunk_key: str | None = None
    excerpt: Excerpt | None = None


class Scores(CairnModel):
    """Why an item ranked where it did. ``keyword`` (the BM25 score) is shown only to a
    curator of every scope: its word weights count withheld records too. Every reader gets
    the ranks and the vector similarity, from which ``fused`` is computed (the keyword side
    by rank alone)."""

    fused: float = 0.0
    keyword: float | None = None
    keyword_rank: int | None = None
    vector: float | None = None
    vector_rank: int | None = None
    confidence: float | None = None


class _RecordVersion(CairnModel):
    """Which record version a result is, and what kind, where and in what state: the first
    fields of both a hit and the item made from it."""

    record_id: str
    version_id: str
    version: int
    kind: str
    scope: str
    status: str
    title: str


class Hit(_RecordVersion):
    """One ranked record version, with the chunks that matched."""

    text: str
    chunk_ids: tuple[int, ...]
    citations: tuple[Citation, ...]
    why_included: tuple[Why, ...]
    scores: Scores
    metadata: dict[str, object] = Field(default_factory=dict)


class Item(_RecordVersion):
    content: str
    origin: str
    confidence_label: str
    provenance: Provenance
    valid_from: str | None = None
    valid_to: str | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    citations: tuple[Citation, ...]
    why_included: tuple[Why, ...]
    scores: Scores
    flags: tuple[str, ...] = ()
    tokens: int = 0


class Contradiction(CairnModel):
    record_ids: tuple[str, str]
    version_ids: tuple[str, str]
    reason: str


class Excluded(CairnModel):
    record_id: str
    version_id: str
    reason: Literal["token_budget"]
    tokens: int


class Trace(BaseModel):
    """What happened on the way: counts withheld by policy (never ids), timings per stage.

    Mutable on purpose: the pipeline runner fills it in stage by stage.
    """

    model_config = ConfigDict(extra="forbid")

    candidates: dict[str, int] = Field(default_factory=dict)
    withheld: dict[str, int] = Field(default_factory=dict)
    dropped_by_validation: dict[str, int] = Field(default_factory=dict)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: how many chunks the reader may see still wait for a vector (keyword search found
    #: them, vector search could not)
    vector_lag: int = 0
    #: too many chunks wait for a vector (a large import) to count them on a read: chunks
    #: the reader may see may wait beyond ``vector_lag`` (then 0)
    vector_lag_uncounted: bool = False
    #: the vector index was busy in another thread (its first build or load, a save, or a
    #: turn longer than the read's patience): the read did not wait for it and had no
    #: vector recall
    vector_index_busy: bool = False
    #: the time the query named, when ranking weighed it: its words, start and end
    time_window: dict[str, str] | None = None
    #: the reranking endpoint that ordered the hits (``openai:MODEL``), or why it did not
    #: (``fallback: timeout``); None when no reranker is configured
    reranker: str | None = None


# What a read says when it answered without vectors because the index was busy.
VECTOR_INDEX_BUSY = (
    "the vector index is busy (being built, saved or brought up to date): keyword search "
    "answered alone"
)


# What a read says when too many chunks wait for a vector to count them on a read.
UNCOUNTED_WAITING = (
    "too many chunks wait for a vector to count them here (a large import): vector search "
    "may miss some you may see (keyword search sees them)"
)


def vector_warnings(*, waiting: int | None, busy: bool) -> tuple[str, ...]:
    """What a read says of its vector side: ``waiting`` of the chunks it may see still wait
    for a vector (keyword search found them, vector search could not; None: too many wait
    to count them on a read), and whether the index was ``busy`` and keyword search
    answered alone."""
    said: tuple[str, ...] = ()
    if waiting is None:
        said = (UNCOUNTED_WAITING,)
    elif waiting:
        said = (f"{waiting} chunks are not embedded yet (keyword search sees them)",)
    return (*said, VECTOR_INDEX_BUSY) if busy else said


class SearchResult(CairnModel):
    query: str
    mode: Mode
    scope: str | None
    selector_used: VersionPin
    hits: tuple[Hit, ...]
    trace: Trace


class RetrievalResult(CairnModel):
    query: str
    mode: Mode
    scope: str | None
    selector_used: VersionPin
    items: tuple[Item, ...]
    contradictions: tuple[Contradiction, ...] = ()
    token_budget: int
    used_tokens: int
    token_budget_exceeded: bool
    excluded_count: int
    excluded: tuple[Excluded, ...] = ()
    warnings: tuple[str, ...] = ()
    trace: Trace
