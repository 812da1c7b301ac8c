"""Summaries of timeline nodes: title, 3–7 bullets, keywords, and the grips behind them.

``Summarizer`` is the seam: the default, ``ExtractiveSummarizer``, needs no model and gives
the same summary for the same events every time. It cuts a segment into consecutive
stretches of conversation, one per bullet, and quotes each stretch's most telling
sentence; the bullet's grip holds that sentence (a substring of one event's text) and the
range of events the stretch covers. A rollup keeps its children's best bullets with their
grips, so every grip, at every level, points at real events.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cairn.errors import InvalidInput
from cairn.model import Bullet, Event, EventRole, Grip, TocNode
from cairn.search.fts import DEFAULT_STOPWORDS, fts_tokens
from cairn.timeline import ids
from cairn.timeline.settings import TimelineSettings

__all__ = [
    "ExtractiveSummarizer",
    "Quoted",
    "Summarizer",
    "Summary",
    "clip",
    "grip_for",
    "make_summarizer",
    "sentences",
    "terms",
]

MAX_BULLETS = 7
MIN_BULLETS = 3
MAX_EXCERPT_CHARS = 200
MAX_TITLE_CHARS = 80
MAX_KEYWORDS = 8
# Sentences: runs of text up to a full stop, question or exclamation mark, or line end.
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
# A speaker's own words say more about a conversation than tool output does.
_ROLE_WEIGHT = {
    EventRole.USER: 1.0,
    EventRole.ASSISTANT: 0.9,
    EventRole.TOOL: 0.5,
    EventRole.SYSTEM: 0.4,
}


@dataclass(frozen=True)
class Summary:
    title: str
    bullets: tuple[Bullet, ...]
    keywords: tuple[str, ...]
    grips: tuple[Grip, ...]
    summarizer: str


class Summarizer(Protocol):
    """What the rollup needs from a summarizer. ``name`` is stamped on every node it made."""

    name: str

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event]) -> Summary:
        """A segment's summary. ``context`` (the overlap with the previous segment) may
        inform it; grips point into ``events`` only."""
        ...

    def summarize_children(self, label: str, children: Sequence[TocNode]) -> Summary:
        """A day's, week's, month's or year's summary from its children's (in time order)."""
        ...


class Quoted(Protocol):
    """What a grip needs of the event that holds its excerpt."""

    @property
    def scope(self) -> str: ...
    @property
    def event_id(self) -> str: ...
    @property
    def ts(self) -> datetime: ...
    @property
    def session_id(self) -> str: ...


def grip_for(excerpt: str, first_id: str, last_id: str, holder: Quoted) -> Grip:
    """The grip for ``excerpt`` (a piece of ``holder``'s text) standing for the events from
    ``first_id`` to ``last_id`` of ``holder``'s scope."""
    return Grip(
        grip_id=ids.grip_id(holder.scope, excerpt, first_id, last_id, holder.event_id),
        excerpt=excerpt,
        event_id_start=first_id,
        event_id_end=last_id,
        event_id=holder.event_id,
        ts=holder.ts,
        source=f"session:{holder.session_id}",
    )


def terms(text: str) -> list[str]:
    """The words a summary counts: indexable terms, no stop words, no bare numbers."""
    return [
        t for t in fts_tokens(text) if len(t) > 2 and not t.isdigit() and t not in DEFAULT_STOPWORDS
    ]


def clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters (a prefix of it, so a
    clipped excerpt is still a substring of its event's text)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip()


def sentences(text: str) -> list[str]:
    return [s for s in (m.group().strip() for m in _SENTENCE.finditer(text)) if s]


def _keywords(weights: Mapping[str, float]) -> tuple[str, ...]:
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(term for term, _ in ranked[:MAX_KEYWORDS])


def _bullet_count(texts: int) -> int:
    if texts <= MIN_BULLETS:
        return max(1, texts)
    return min(MAX_BULLETS, max(MIN_BULLETS, math.ceil(texts / 3)))


def _stretches(events: Sequence[Event], count: int) -> list[Sequence[Event]]:
    """``events`` cut into ``count`` consecutive stretches of near-equal length."""
    size = len(events)
    bounds = [round(i * size / count) for i in range(count + 1)]
    return [events[bounds[i] : bounds[i + 1]] for i in range(count) if bounds[i] < bounds[i + 1]]


class ExtractiveSummarizer:
    """Deterministic, model-free summaries (see the module's docstring)."""

    name = "extractive"

    def summarize_events(self, events: Sequence[Event], context: Sequence[Event]) -> Summary:
        weights: Counter[str] = Counter()
        for event in (*context, *events):
            weights.update(set(terms(event.text)))
        spoken = [e for e in events if e.text.strip()]
        bullets: list[Bullet] = []
        grips: list[Grip] = []
        for stretch in _stretches(events, _bullet_count(len(spoken))):
            excerpt, holder = self._best_sentence(stretch, weights)
            grip = grip_for(excerpt, stretch[0].event_id, stretch[-1].event_id, holder)
            text = excerpt or f"{len(stretch)} {holder.kind.replace('_', ' ')} event(s)"
            bullets.append(Bullet(text=text, grip_ids=(grip.grip_id,)))
            grips.append(grip)
        title = self._title(events, weights)
        return Summary(title, tuple(bullets), _keywords(weights), tuple(grips), self.name)

    def _best_sentence(self, stretch: Sequence[Event], weights: Counter[str]) -> tuple[str, Event]:
        best: tuple[float, str, Event] | None = None
        for event in stretch:
            for sentence in sentences(event.text):
                words = set(terms(sentence))
                if not words:
                    continue
                salience = sum(math.log1p(weights[w]) for w in words) / math.sqrt(len(words) + 1)
                score = salience * _ROLE_WEIGHT.get(event.role, 0.5)
                if best is None or score > best[0]:
                    best = (score, clip(sentence, MAX_EXCERPT_CHARS), event)
        if best is None:
            # Nothing worth quoting (tool calls without text, session markers): the grip
            # still points at the stretch, with an empty excerpt.
            return "", stretch[0]
        return best[1], best[2]

    def _title(self, events: Sequence[Event], weights: Counter[str]) -> str:
        """The first thing the user said that has some substance (three or more words that
        count), else the segment's top keywords."""
        for event in events:
            if event.role is EventRole.USER:
                for sentence in sentences(event.text):
                    if len(set(terms(sentence))) >= 3:
                        return clip(sentence, MAX_TITLE_CHARS)
        keywords = _keywords(weights)
        if keywords:
            return ", ".join(keywords[:4])
        kinds = sorted({e.kind for e in events})
        return clip(f"{len(events)} events: {', '.join(kinds)}", MAX_TITLE_CHARS)

    def summarize_children(self, label: str, children: Sequence[TocNode]) -> Summary:
        weights: dict[str, float] = defaultdict(float)
        for child in children:
            for rank, keyword in enumerate(child.keywords):
                weights[keyword] += max(1, child.event_count) / (rank + 1)
        grips_by_id = {g.grip_id: g for child in children for g in child.grips}
        # Each child's bullets, best first by the period's keywords.
        ranked: list[list[tuple[int, Bullet]]] = []
        for index, child in enumerate(children):
            scored = sorted(
                enumerate(child.bullets),
                key=lambda ib: (-sum(weights[t] for t in set(terms(ib[1].text))), ib[0]),
            )
            ranked.append([(index, bullet) for _, bullet in scored])
        # Take the best bullet of each child, busiest child first, then the second-best of
        # each, and so on, so a busy period keeps its breadth; then restore time order.
        order = sorted(range(len(children)), key=lambda i: (-children[i].event_count, i))
        chosen: list[tuple[int, int, Bullet]] = []
        depth = 0
        while len(chosen) < MAX_BULLETS and any(depth < len(r) for r in ranked):
            for i in order:
                if depth < len(ranked[i]) and len(chosen) < MAX_BULLETS:
                    chosen.append((i, depth, ranked[i][depth][1]))
            depth += 1
        chosen.sort(key=lambda c: (c[0], children[c[0]].bullets.index(c[2])))
        bullets = tuple(c[2] for c in chosen)
        grips = tuple(
            dict.fromkeys(grips_by_id[g] for b in bullets for g in b.grip_ids if g in grips_by_id)
        )
        keywords = _keywords(weights)
        title = f"{label}: {', '.join(keywords[:4])}" if keywords else label
        return Summary(clip(title, MAX_TITLE_CHARS * 2), bullets, keywords, grips, self.name)


def make_summarizer(settings: TimelineSettings) -> Summarizer:
    """The summarizer the settings name: ``extractive`` (the default), or
    ``openai:URL#model`` for an OpenAI-compatible chat endpoint, which falls back to the
    extractive summary whenever the endpoint fails."""
    spec = settings.summarizer
    if spec == "extractive":
        return ExtractiveSummarizer()
    if spec.startswith("openai:"):
        from cairn.timeline.chat_summarizer import ChatSummarizer

        return ChatSummarizer.from_spec(spec[len("openai:") :], timeout=settings.summarizer_timeout)
    raise InvalidInput(
        f"unknown summarizer {spec!r}: use extractive or openai:URL#model", field="summarizer"
    )
