"""Does a memory support or contradict a claim? A transparent heuristic, no LLM.

Supported: the memory covers most of the claim's content words with the same polarity and
no conflicting numbers. Contradicted: it covers them but one side negates, or the numbers
differ. Anything else is unknown. False positives are possible; it flags, never resolves.
"""

from __future__ import annotations

import re

from cairn.retrieval.validate import NEGATIONS
from cairn.search.fts import DEFAULT_STOPWORDS, fts_tokens

__all__ = [
    "COVERAGE",
    "claim_relation",
]

COVERAGE = 0.6
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _content_words(text: str) -> set[str]:
    return {t for t in fts_tokens(text) if t not in DEFAULT_STOPWORDS or t in NEGATIONS}


def claim_relation(claim: str, evidence: str) -> str:
    claim_words = _content_words(claim) - NEGATIONS
    evidence_words = _content_words(evidence)
    if not claim_words:
        return "unknown"
    coverage = len(claim_words & evidence_words) / len(claim_words)
    if coverage < COVERAGE:
        return "unknown"
    negated_claim = bool(set(fts_tokens(claim)) & NEGATIONS)
    negated_evidence = bool(set(fts_tokens(evidence)) & NEGATIONS)
    claim_numbers = set(_NUMBER.findall(claim))
    evidence_numbers = set(_NUMBER.findall(evidence))
    if negated_claim != negated_evidence:
        return "contradicted"
    if claim_numbers and evidence_numbers and not claim_numbers <= evidence_numbers:
        return "contradicted"
    return "supported"
