"""The fusion weights of the two recall signals: their defaults and the one rule every door
applies to the weights a caller gives. Kept apart from the fusion stage so that the Python
client checks a call by the kernel's rule without loading the kernel."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from cairn.errors import InvalidInput
from cairn.retrieval.types import Mode

__all__ = [
    "DEFAULT_CONTEXT_WEIGHT",
    "DEFAULT_FUSION",
    "DEFAULT_WEIGHTS",
    "SIGNALS",
    "STATIC_EMBEDDER_WEIGHTS",
    "Fusion",
    "check_weights",
    "chosen_weights",
    "embedder_weights",
]

# These defaults, the fusion and the ranking knobs' (retrieval/ranking.py) are what
# cross-validation chose on two benchmarks at once (bench/defaults.py), both embedded with
# MiniLM: keyword by rank and vector by similarity, keyword 0.4 / vector 0.6, context at
# full weight, chosen in every held-out fold (docs/retrieval.md, docs/benchmarks.md).
DEFAULT_WEIGHTS: Mapping[str, float] = {"vector": 0.6, "keyword": 0.4}
#: The static embedder's vectors (the fast tier: a table distilled from MiniLM) are weaker:
#: the same procedure, on captures of both benchmarks made with it, chose keyword 0.7 /
#: vector 0.3 (similarity fusion, context 1) in seven held-out folds of eight.
STATIC_EMBEDDER_WEIGHTS: Mapping[str, float] = {"vector": 0.3, "keyword": 0.7}
#: How much a matching context chunk (the turns around a turn) adds to its record's score.
DEFAULT_CONTEXT_WEIGHT = 1.0
#: How the signals' candidate lists are fused. ``similarity``: keyword by rank (weight x
#: 61 / (60 + rank), 1 at the top) plus vector by similarity (weight x its cosine scaled to
#: 0-1 over the candidates); ``rrf``: both by rank (weight / (60 + rank), reciprocal rank
#: fusion). Keyword scores' sizes are never used: they count withheld records.
Fusion = Literal["rrf", "similarity"]
DEFAULT_FUSION: Fusion = "similarity"
# The signals each mode ranks by.
SIGNALS: dict[Mode, tuple[str, ...]] = {
    "hybrid": ("keyword", "vector"),
    "keyword": ("keyword",),
    "vector": ("vector",),
}


def embedder_weights(embedder: object) -> Mapping[str, float]:
    """The default fusion weights of a store whose vectors ``embedder`` makes (a spec such
    as ``"static"`` or ``"minilm"``, or an embedder, by its name)."""
    name = embedder if isinstance(embedder, str) else str(getattr(embedder, "name", ""))
    static = name == "static" or name.startswith("static-")
    return STATIC_EMBEDDER_WEIGHTS if static else DEFAULT_WEIGHTS


def chosen_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """The defaults, with the signals ``weights`` names weighed as it says."""
    return {**DEFAULT_WEIGHTS, **(weights or {})}


def check_weights(weights: Mapping[str, float] | None, mode: Mode) -> None:
    """The rule for fusion weights, whichever door they come through: each names
    ``keyword`` or ``vector`` and is a finite number of at least 0 (a weight a caller
    gives replaces that signal's default), and the signals ``mode`` uses are not all 0."""
    if weights is None:
        return
    for name, weight in weights.items():
        if name not in ("keyword", "vector"):
            raise InvalidInput(
                f"unknown weight {name!r}: weights name 'keyword' and 'vector'", field="weights"
            )
        if not math.isfinite(weight) or weight < 0:
            raise InvalidInput(
                f"the weight of {name!r} must be a finite number of at least 0", field="weights"
            )
    chosen = chosen_weights(weights)
    if sum(chosen[name] for name in SIGNALS[mode]) <= 0:
        raise InvalidInput(f"every weight used by {mode} search is 0", field="weights")
