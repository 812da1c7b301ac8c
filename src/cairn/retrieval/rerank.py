"""Reranking: cheap signals over the fused candidates, no model and no network.

Two signals that recall and fusion do not weigh on their own:

- **entity overlap**: the names and numbers a question holds ("Caroline", "Tampa",
  "2022") are what it is about; a candidate holding more of them gains. Rank fusion only
  sees that a candidate matched, not which of the question's words it matched.
- **title overlap** (speaker match): the share of the question's content words found in the
  candidate's title, which for a conversation turn names who spoke. "What did Melanie
  paint?" is answered by what Melanie said.

A candidate's score is multiplied by ``1 + entity_weight × entity share + title_weight ×
title share``: a boost, never a cut, so nothing that recall found is lost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cairn.search.fts import DEFAULT_STOPWORDS

__all__ = ["boost", "overlaps", "query_entities", "query_words", "rerank_scores", "words"]

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> set[str]:
    """Lower-cased words of ``text``."""
    return {w.casefold() for w in _WORD.findall(text)}


def query_words(query: str) -> frozenset[str]:
    """The query's content words (stopwords and one-letter words left out)."""
    return frozenset(w for w in words(query) if len(w) > 1 and w not in DEFAULT_STOPWORDS)


def query_entities(query: str) -> frozenset[str]:
    """Names and numbers: words holding a digit, and capitalised words that do not open a
    sentence (a question's first word is capitalised whatever it is)."""
    found: set[str] = set()
    opens_sentence = True
    for match in re.finditer(r"[^\W_]+(?:['’][^\W_]+)*|[.!?]", query):
        token = match.group()
        if token in ".!?":
            opens_sentence = True
            continue
        folded = token.casefold()
        if any(ch.isdigit() for ch in token) or (
            token[0].isupper() and not opens_sentence and folded not in DEFAULT_STOPWORDS
        ):
            found.add(folded)
        opens_sentence = False
    return frozenset(found)


def overlaps(titles: Sequence[str], texts: Sequence[str], query: str) -> list[tuple[float, float]]:
    """Per candidate: (share of the query's entities it holds, share of the query's content
    words in its title). Kept apart from :func:`boost` so that trying several weights costs
    one pass over the text."""
    entities = query_entities(query)
    content = query_words(query)
    out: list[tuple[float, float]] = []
    for title, text in zip(titles, texts, strict=True):
        title_words = words(title)
        entity = len(entities & (title_words | words(text))) / len(entities) if entities else 0.0
        titled = len(content & title_words) / len(content) if content else 0.0
        out.append((entity, titled))
    return out


def boost(
    scores: Sequence[float],
    shares: Sequence[tuple[float, float]],
    *,
    entity_weight: float,
    title_weight: float,
) -> list[float]:
    """``score × (1 + entity_weight × entity share + title_weight × title share)``."""
    return [
        score * (1.0 + entity_weight * entity + title_weight * titled)
        for score, (entity, titled) in zip(scores, shares, strict=True)
    ]


def rerank_scores(
    scores: Sequence[float],
    titles: Sequence[str],
    texts: Sequence[str],
    query: str,
    *,
    entity_weight: float,
    title_weight: float,
) -> list[float]:
    """The candidates' scores after both boosts, in the order given."""
    if not (entity_weight or title_weight):
        return list(scores)
    return boost(
        scores,
        overlaps(titles, texts, query),
        entity_weight=entity_weight,
        title_weight=title_weight,
    )
