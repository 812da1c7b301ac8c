"""Stage 2, recall: keyword (each store's text index) and vector (cosine over the catalog).

Both take the preselected ``ChunkFilter`` and apply it inside their index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn.search.fts import DEFAULT_STOPWORDS, fts_tokens, select_terms
from cairn.store.base import ChunkFilter, KeywordQuery, Store

if TYPE_CHECKING:
    from cairn.retrieval.indexer import Indexer, VectorRead

__all__ = [
    "FULL_QUERY_REACH",
    "HOPELESS_DF_RATIO",
    "HOPELESS_POSTINGS",
    "MAX_DF_POSTINGS",
    "MAX_DF_RATIO",
    "PRUNE_FROM_CHUNKS",
    "keyword_match",
    "keyword_recall",
    "vector_recall",
]

# Terms in more than this share of chunks are dropped from keyword queries: they match
# (and make the index score) a large part of the corpus while adding little to ranking.
MAX_DF_RATIO = 0.1
# A term in more than a fifth of all chunks has almost no BM25 weight (idf ≤ ln 4) yet
# costs a scan of that fifth of the index; a query made only of such terms is left to
# vector recall.
HOPELESS_DF_RATIO = 0.2
# Pruning exists to keep large indexes fast; below this size every term is kept, since in
# a small corpus frequencies say little and a dropped term is a lost match.
PRUNE_FROM_CHUNKS = 5000
# The same two limits as absolute posting counts, which bind from 200k / 250k chunks on.
# FTS5 scores every match of the OR query (~1.2 us each, a docsize lookup and a position
# list apiece), so the share-based limits let a query's cost grow with the store: at 1M
# chunks a term in 10% of them is 100k matches, and the bench's keyword query took 200 ms
# of CPU at p95. With these caps its queries scan ~30k postings at p95 at 1M (against
# 125k; 31 ms of CPU with the two-step query), and a query made only of words in more than
# 50k chunks (idf below ln 20) is left to vector recall, as hopeless ones already were
# (20% of the bench's queries at 1M, against 10%).
MAX_DF_POSTINGS = 20_000
HOPELESS_POSTINGS = 50_000
# When the index restricts a search to the reader's scopes (Store.keyword_reach), a term
# costs a seek per chunk of those scopes at most, whatever its frequency in the store; up
# to this many chunks every term is kept, each then costing no more than the store-wide
# rule lets one term cost. Frequencies are the store's, not the scope's: a
# word common across a large store ("recommend" in a store of chat logs) can be the one
# that singles out the right chunk of a small scope, and dropping it lost LongMemEval
# questions as its store grew (docs/benchmarks.md).
FULL_QUERY_REACH = MAX_DF_POSTINGS


def keyword_match(
    store: Store, query: str, where: ChunkFilter | None = None
) -> KeywordQuery | None:
    """The terms keyword recall searches for ``query`` under ``where`` (None: nothing worth
    searching)."""
    total = store.chunk_count()
    if total < PRUNE_FROM_CHUNKS:
        return _query(select_terms(query))
    reach = store.keyword_reach(where) if where is not None else None
    if reach is not None and reach <= FULL_QUERY_REACH:
        return _query(select_terms(query))
    hopeless = min(HOPELESS_DF_RATIO * total, HOPELESS_POSTINGS)
    # Stopwords are dropped below whatever their counts, and they are the words in most
    # chunks: counting one walks a posting list to the cap, the first time a process
    # meets it, for nothing.
    useful = [
        t
        for t in dict.fromkeys(fts_tokens(query))
        if t not in DEFAULT_STOPWORDS and store.doc_freq(t) <= hopeless
    ]
    terms = select_terms(
        " ".join(useful),
        doc_freq=store.doc_freq,
        total_docs=total,
        max_df_ratio=min(MAX_DF_RATIO, MAX_DF_POSTINGS / total),
        keep_rarest=1,
    )
    return _query(terms)


def _query(terms: tuple[str, ...]) -> KeywordQuery | None:
    return KeywordQuery(terms) if terms else None


def keyword_recall(store: Store, query: str, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
    match = keyword_match(store, query, where)
    if match is None:
        return []
    return store.keyword_search(match, where, k)


def vector_recall(indexer: Indexer, query: str, where: ChunkFilter, k: int) -> VectorRead:
    """The ``k`` chunks ``where`` admits nearest ``query``, with how many it admits still wait
    for a vector, or a busy index (``Indexer.read``: record and timeline search alike)."""
    return indexer.read(query, where, k)
