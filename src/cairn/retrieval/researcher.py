"""The Researcher: plan, retrieve, validate, retry within bounds, summarise.

Deterministic, no LLM: the plan comes from keywords in the question, the summary is
templated from the validated items and cites each one by (record, version).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from cairn.retrieval.context import ResearchAnswer, ResearchAttempt, ResearchPlan
from cairn.retrieval.types import Item, Mode, RetrievalResult

__all__ = [
    "MAX_ATTEMPTS",
    "MIN_CONFIDENCE",
    "MIN_RESULTS",
    "Retrieve",
    "plan",
    "research",
    "summarise",
]

MAX_ATTEMPTS = 3
MIN_RESULTS = 3
MIN_CONFIDENCE = 0.7

_KIND_WORDS = {
    "decision": ("decision", "decisions", "decided", "decide", "chose", "choice"),
    "belief": ("belief", "beliefs", "believe", "assume", "assumption", "assumptions"),
    "episode": ("episode", "episodes", "happened", "session", "sessions", "debugged", "incident"),
    "skill": ("skill", "skills", "how to", "how do", "procedure", "steps", "runbook"),
    "fact": ("fact", "facts"),
    "document": ("document", "documents", "doc", "docs", "spec", "readme"),
}
_RECENT = {
    "today": timedelta(days=1),
    "yesterday": timedelta(days=2),
    "this week": timedelta(days=7),
    "recent": timedelta(days=7),
    "recently": timedelta(days=7),
    "latest": timedelta(days=7),
    "last week": timedelta(days=14),
    "this month": timedelta(days=31),
    "last month": timedelta(days=62),
}
_FILLER = re.compile(
    r"\b(what|which|who|when|where|why|how|do|does|did|have|has|been|were|was|are|is|the|a|an|"
    r"about|made|any|there|recent|recently|latest|today|yesterday|this|last|week|month|"
    r"decisions?|beliefs?|episodes?|skills?|facts?)\b",
    re.IGNORECASE,
)

Retrieve = Callable[..., RetrievalResult]


def plan(question: str, *, now: datetime) -> ResearchPlan:
    lowered = f" {question.lower()} "
    kinds = tuple(
        kind
        for kind, words in _KIND_WORDS.items()
        if any(re.search(rf"\b{re.escape(w)}\b", lowered) for w in words)
    )
    created_after = None
    for phrase, span in _RECENT.items():
        if re.search(rf"\b{phrase}\b", lowered):
            created_after = now - span
            break
    primary = " ".join(_FILLER.sub(" ", question).split()) or question
    return ResearchPlan(primary_query=primary, memory_types=kinds, created_after=created_after)


def _mean_confidence(items: Sequence[Item]) -> float:
    """The mean confidence of the best ``MIN_RESULTS`` items (items come best first): an
    attempt is good enough when it found that many confident results. A mean over all of
    them would make a longer list look worse for its tail, the more so as confidence grows
    with the vector similarity, which spreads the tail out."""
    best = [i.scores.confidence or 0.0 for i in items[:MIN_RESULTS]]
    return sum(best) / len(best) if best else 0.0


def summarise(question: str, items: Sequence[Item], *, partial: bool) -> str:
    if not items:
        return f"Found nothing in memory that answers: {question}"
    kinds = sorted({i.kind for i in items})
    head = f"Found {len(items)} relevant {'/'.join(kinds)} record{'s' if len(items) > 1 else ''}:"
    lines = [head]
    for n, item in enumerate(items, start=1):
        when = item.valid_from[:10] if item.valid_from else ""
        lines.append(
            f"{n}. {item.title} [{item.kind}, v{item.version}{', ' + when if when else ''}, "
            f"confidence {item.scores.confidence or 0:.2f}] cite ({item.record_id}, "
            f"{item.version_id})"
        )
    if partial:
        lines.append("Warning: results are partial after 3 attempts; treat them with care.")
    return "\n".join(lines)


def research(
    question: str, retrieve: Retrieve, *, now: datetime, max_tokens: int
) -> ResearchAnswer:
    """Attempt 1: the plan, hybrid. 2: top-k 20, no time or kind limits. 3: keyword only."""
    chosen = plan(question, now=now)
    attempts: list[ResearchAttempt] = []
    settings: list[tuple[Mode, int, tuple[str, ...], datetime | None, str]] = [
        ("hybrid", chosen.top_k, chosen.memory_types, chosen.created_after, chosen.primary_query),
        ("hybrid", 20, (), None, question),
        ("keyword", 20, (), None, question),
    ]
    result: RetrievalResult | None = None
    best: tuple[tuple[int, float], RetrievalResult] | None = None
    for number, (mode, top_k, kinds, after, query) in enumerate(settings, start=1):
        result = retrieve(
            query, mode=mode, k=top_k, kinds=kinds, created_after=after, max_tokens=max_tokens
        )
        mean = _mean_confidence(result.items)
        attempts.append(
            ResearchAttempt(
                number=number, mode=mode, top_k=top_k, kinds=kinds, created_after=after,
                found=len(result.items), mean_confidence=round(mean, 4),
            )
        )  # fmt: skip
        quality = (min(len(result.items), MIN_RESULTS), mean)
        if best is None or quality > best[0]:
            best = (quality, result)
        if len(result.items) >= MIN_RESULTS and mean >= MIN_CONFIDENCE:
            break
    assert best is not None
    result = best[1]
    good_enough = attempts[-1].found >= MIN_RESULTS and attempts[-1].mean_confidence >= (
        MIN_CONFIDENCE
    )
    partial = not good_enough and len(attempts) == MAX_ATTEMPTS
    warnings = list(result.warnings)
    if partial:
        warnings.append("partial results: 3 attempts did not reach 3 confident results")
    if result.contradictions:
        warnings.append("contradictions found: flagged for review, not resolved")
    return ResearchAnswer(
        question=question,
        plan=chosen,
        summary=summarise(question, result.items, partial=partial),
        items=result.items,
        contradictions=result.contradictions,
        attempts=tuple(attempts),
        partial=partial,
        warnings=tuple(warnings),
    )
