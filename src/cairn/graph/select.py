"""The selector: rank the sanitized candidates once, with cheap deterministic signals.

Signals per candidate (all computed from what the role may see, so nothing withheld can
sway an order): ``importance`` (the vertex's own prior, 0–1), ``recency_days`` (days
between it and the anchor), ``sim`` (token overlap of its visible text with the anchor's
and the question's), ``adjacent`` (reached in one hop), ``quality`` (a penalty for text too
short to say anything or too long to be a fact) and, for the anchor, ``completeness``
(decision maker, date and rationale present). Near-duplicates (light Jaccard over tokens)
are dropped after the first. The order is score, then date (newest first), then id, so
the same candidates always rank the same: the name of that order is ``RANKING_POLICY``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cairn.graph.preselect import Candidate, CandidateSet

__all__ = ["RANKING_POLICY", "Ranked", "Selection", "rank", "tokens"]

RANKING_POLICY = "why_v1:score_desc__ts_iso_desc__id_asc"
WEIGHTS = {"sim": 0.35, "importance": 0.30, "recency": 0.20, "adjacent": 0.10, "quality": 0.05}
# Two candidates whose token sets overlap this much say the same thing: the second is dropped.
DUPLICATE_JACCARD = 0.8
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "to",
        "was",
        "we",
        "were",
        "with",
        "this",
        "that",
        "our",
        "its",
        "by",
        "into",
        "not",
        "no",
    ]
)


def tokens(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1)


def _visible_text(c: Candidate) -> str:
    parts = [c.title, str(c.fields.get("snippet", "")), " ".join(c.fields.get("tags", []))]
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    score: float
    signals: dict[str, float | int | None]


@dataclass(frozen=True)
class Selection:
    ordered: tuple[Ranked, ...]
    duplicates: tuple[str, ...]
    anchor_completeness: float


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _quality(c: Candidate) -> float:
    words = len(str(c.fields.get("text", c.title)).split())
    if words < 3:
        return 0.3
    return 1.0 if words <= 150 else 0.6


def rank(candidates: CandidateSet, question: str | None = None) -> Selection:
    """The neighbours, best first (the anchor is not ranked: it always leads)."""
    anchor = candidates.anchor
    focus = tokens(_visible_text(anchor) + " " + (question or ""))
    scored: list[Ranked] = []
    for c in candidates.neighbours:
        words = tokens(_visible_text(c))
        sim = len(words & focus) / len(words | focus) if words | focus else 0.0
        days = (
            abs((c.date - anchor.date).days)
            if c.date is not None and anchor.date is not None
            else None
        )
        recency = 1.0 / (1.0 + days / 30.0) if days is not None else 0.0
        adjacent = 1.0 if c.hops == 1 else 0.0
        quality = _quality(c)
        score = (
            WEIGHTS["sim"] * sim
            + WEIGHTS["importance"] * c.importance
            + WEIGHTS["recency"] * recency
            + WEIGHTS["adjacent"] * adjacent
            + WEIGHTS["quality"] * quality
        )
        signals: dict[str, float | int | None] = {
            "sim": round(sim, 4),
            "recency_days": days,
            "importance": c.importance,
            "adjacent": adjacent,
            "quality": quality,
        }
        scored.append(Ranked(c, round(score, 6), signals))
    date_key = {
        r.candidate.id: (r.candidate.date.isoformat() if r.candidate.date else "") for r in scored
    }
    # Score descending, then the newest date, then the id: one total order.
    scored.sort(key=lambda r: r.candidate.id)
    scored.sort(key=lambda r: date_key[r.candidate.id], reverse=True)
    scored.sort(key=lambda r: r.score, reverse=True)
    kept: list[Ranked] = []
    duplicates: list[str] = []
    seen: list[frozenset[str]] = [tokens(_visible_text(anchor))]
    for r in scored:
        words = tokens(_visible_text(r.candidate))
        if words and any(_jaccard(words, other) >= DUPLICATE_JACCARD for other in seen):
            duplicates.append(r.candidate.id)
            continue
        seen.append(words)
        kept.append(r)
    present = [
        anchor.fields.get("decision_maker") is not None,
        anchor.date is not None,
        bool(anchor.fields.get("text")),
    ]
    return Selection(tuple(kept), tuple(duplicates), round(sum(present) / len(present), 4))
