"""Stage 2, recall: keyword (BM25 over FTS5) and vector (cosine over the catalog).

Both take the preselected ``ChunkFilter`` and apply it inside their index.
"""

from __future__ import annotations

from cairn.retrieval.indexer import Indexer
from cairn.search.catalog import FloatArray
from cairn.search.fts import build_match_query, fts_tokens
from cairn.store.base import ChunkFilter, Store

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


def keyword_recall(store: Store, query: str, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
    total = store.chunk_count()
    if total < PRUNE_FROM_CHUNKS:
        match = build_match_query(query)
    else:
        hopeless = HOPELESS_DF_RATIO * total
        useful = [t for t in fts_tokens(query) if store.doc_freq(t) <= hopeless]
        match = build_match_query(
            " ".join(useful),
            doc_freq=store.doc_freq,
            total_docs=total,
            max_df_ratio=MAX_DF_RATIO,
            keep_rarest=1,
        )
    if match is None:
        return []
    return store.keyword_search(match, where, k)


def vector_recall(
    indexer: Indexer, query_vector: FloatArray, where: ChunkFilter, k: int
) -> list[tuple[int, float]]:
    return indexer.search(query_vector, where, k)
