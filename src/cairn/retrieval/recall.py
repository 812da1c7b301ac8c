"""Stage 2, recall: keyword (BM25 over FTS5) and vector (cosine over the catalog).

Both take the preselected ``ChunkFilter`` and apply it inside their index.
"""

from __future__ import annotations

from cairn.search.catalog import FloatArray, VectorCatalog
from cairn.search.fts import build_match_query
from cairn.store.base import ChunkFilter, Store


def keyword_recall(store: Store, query: str, where: ChunkFilter, k: int) -> list[tuple[int, float]]:
    # Very common terms make FTS5 OR-queries slow and add nothing to ranking: drop them.
    match = build_match_query(query, doc_freq=store.doc_freq, total_docs=store.chunk_count())
    if match is None:
        return []
    return store.keyword_search(match, where, k)


def vector_recall(
    catalog: VectorCatalog, query_vector: FloatArray, where: ChunkFilter, k: int
) -> list[tuple[int, float]]:
    return catalog.search(query_vector, where, k)
