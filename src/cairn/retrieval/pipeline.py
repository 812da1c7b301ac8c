"""The read path, one stage at a time, each timed into the trace.

preselect → recall (keyword, vector) → fuse → validate → budget → compose.
Stages are pure functions in their own modules; this runner only feeds them and times them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from cairn.governance import access
from cairn.limits import is_id
from cairn.model import Principal, VersionPin
from cairn.retrieval.budget import BudgetResult, apply_budget, estimate_item_tokens
from cairn.retrieval.endpoint_rerank import EndpointReranker
from cairn.retrieval.fuse import max_fused_score
from cairn.retrieval.preselect import Preselection, ReadRequest, preselect
from cairn.retrieval.ranking import DEFAULT_RANKING, RankingConfig, rank
from cairn.retrieval.recall import keyword_recall, vector_recall
from cairn.retrieval.types import (
    Excluded,
    Hit,
    Item,
    Mode,
    RetrievalResult,
    SearchResult,
    Trace,
    vector_warnings,
)
from cairn.retrieval.validate import validate
from cairn.retrieval.when import TimeWindow
from cairn.store.base import ChunkRow, Store
from cairn.store.filters import admitted

if TYPE_CHECKING:
    from cairn.retrieval.indexer import Indexer

__all__ = [
    "Recall",
    "Recalled",
    "SearchPlan",
    "clipped",
    "compose",
    "run_candidates",
    "run_recall",
    "run_retrieve",
    "run_search",
]

_RECALL_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cairn-recall")


@dataclass(frozen=True)
class SearchPlan:
    query: str
    mode: Mode = "hybrid"
    k: int = 10
    candidates: int = 50
    weights: Mapping[str, float] | None = None
    request: ReadRequest = field(default_factory=ReadRequest)
    ranking: RankingConfig = DEFAULT_RANKING
    #: the time the query names (``when.query_window``), read when the plan was made and
    #: only when its ranking weighs time
    window: TimeWindow | None = None
    #: the reranking endpoint ``[retrieval] reranker`` names, if any
    reranker: EndpointReranker | None = None


@contextmanager
def _timed(trace: Trace, stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        trace.timings_ms[stage] = round((time.perf_counter() - start) * 1000, 3)


def _preselect(store: Store, principal: Principal, request: ReadRequest) -> Preselection:
    def pins(baseline_id: str) -> Mapping[str, str] | None:
        # A baseline of a scope the principal may not read does not exist for it.
        baseline = store.get_baseline(baseline_id) if is_id(baseline_id) else None
        if baseline is None or not access.in_scope(principal, baseline.scope):
            return None
        return baseline.pins

    return preselect(
        principal,
        request,
        acls=store.acls(),
        scopes=store.scopes(),
        baseline_pins=pins,
        published_baseline=store.published_baseline_id,
    )


@dataclass(frozen=True)
class Recalled:
    """Recall's output: ``(chunk id, score)`` lists, best first, for the later stages."""

    keyword: list[tuple[int, float]]
    vector: list[tuple[int, float]]
    chosen: Preselection
    #: the vector list, as recalled, was shorter than asked for: it held every chunk the
    #: reader may see (decided before the re-check, whose drops must not change it)
    vector_complete: bool = False


def recall_depth(plan: SearchPlan) -> int:
    """How many candidates recall asks each signal for."""
    return max(plan.candidates, plan.k)


def run_recall(
    store: Store,
    indexer: Callable[[], Indexer] | None,
    principal: Principal,
    plan: SearchPlan,
    trace: Trace,
) -> Recalled:
    """Preselect, then keyword and vector recall to ``max(candidates, k)`` chunks each."""
    with _timed(trace, "preselect"):
        chosen = _preselect(store, principal, plan.request)
    keyword: list[tuple[int, float]] = []
    vector: list[tuple[int, float]] = []
    depth = recall_depth(plan)

    def run_keyword() -> list[tuple[int, float]]:
        with _timed(trace, "recall.keyword"):
            return keyword_recall(store, plan.query, chosen.where, depth)

    def run_vector(live: Indexer) -> list[tuple[int, float]]:
        # A read never embeds: it mirrors what is already indexed and says how many of the
        # chunks it may see still wait for a vector (the background worker or `cairn
        # reindex` embeds them). Keyword search sees them meanwhile. Nor does it wait while
        # another thread builds, loads or saves the index, or past its patience: it answers
        # by keyword and says so.
        with _timed(trace, "recall.vector"):
            found = vector_recall(live, plan.query, chosen.where, depth)
        trace.vector_lag, trace.vector_index_busy = found.waiting or 0, found.busy
        trace.vector_lag_uncounted = found.waiting is None
        return list(found.hits)

    if plan.query.strip():
        wants_keyword = plan.mode in ("hybrid", "keyword")
        live = indexer() if plan.mode in ("hybrid", "vector") and indexer is not None else None
        if wants_keyword and live is not None:
            # SQLite's FTS scoring and numpy's product both release the GIL: on two cores
            # the two signals genuinely overlap (and keyword search need not wait for the
            # vector side's turn with the index).
            pending = _RECALL_POOL.submit(run_keyword)
            vector = run_vector(live)
            keyword = pending.result()
        elif wants_keyword:
            keyword = run_keyword()
        elif live is not None:
            vector = run_vector(live)
    trace.candidates = {"keyword": len(keyword), "vector": len(vector)}
    return Recalled(keyword, vector, chosen, vector_complete=len(vector) < depth)


def _checked(store: Store, recalled: Recalled) -> tuple[Recalled, dict[int, ChunkRow]]:
    """Recall's candidates checked once more against the reader's filter on the store's own
    rows (recall filtered them already, in the index: see ``filters.admitted``), with those
    rows; a candidate that fails leaves both lists, as if recall had never found it."""
    ids = {i for i, _ in recalled.keyword} | {i for i, _ in recalled.vector}
    rows = store.chunk_rows(sorted(ids))
    metas = {i: row.meta for i, row in rows.items()}
    kept = admitted(recalled.chosen.where, metas, store.heads_readable)
    checked = dataclasses.replace(
        recalled,
        keyword=[hit for hit in recalled.keyword if hit[0] in kept],
        vector=[hit for hit in recalled.vector if hit[0] in kept],
    )
    return checked, {i: row for i, row in rows.items() if i in kept}


def _settled(
    store: Store,
    indexer: Callable[[], Indexer] | None,
    plan: SearchPlan,
    recalled: Recalled,
) -> tuple[Recalled, dict[int, ChunkRow]]:
    """``_checked``; and when the check dropped a candidate from a full vector list (the
    index answered from a moment before a change the database already holds: a record
    archived, a reader's access narrowed), the vector side asked once more. The index
    mirrors the database before it answers, so whether the list holds every chunk there is,
    and what comes past the cut, are then what a read after the change finds, not what the
    dropped candidate made them."""
    checked, rows = _checked(store, recalled)
    if recalled.vector_complete or indexer is None or checked.vector == recalled.vector:
        return checked, rows
    depth = recall_depth(plan)
    # Timed as part of the stage that checks (fuse), not as a stage of its own: the
    # trace's stage timings add up to the read.
    found = vector_recall(indexer(), plan.query, recalled.chosen.where, depth)
    if found.busy:  # another thread holds the index: what the first answer left stands
        return checked, rows
    again = dataclasses.replace(
        recalled, vector=list(found.hits), vector_complete=len(found.hits) < depth
    )
    return _checked(store, again)


@dataclass(frozen=True)
class Recall:
    """Recall's candidates for one query, exactly as ``search`` gathers them, before any
    ranking: ``cairn.retrieval.ranking.rank(keyword, vector, rows, scopes, query=query,
    mode=mode, k=k, weights=weights, config=ranking, window=window,
    vector_complete=vector_complete)`` gives
    ``search``'s hits.

    Everything here is permission-trimmed: the lists hold only chunks the principal may
    read (preselection filters recall itself), ``rows`` only those chunks and ``scopes``
    only their scopes' names.
    """

    query: str
    mode: Mode
    k: int
    weights: Mapping[str, float] | None
    #: ``(chunk id, score)``, best first, from the keyword index and the vector index
    keyword: tuple[tuple[int, float], ...]
    vector: tuple[tuple[int, float], ...]
    #: chunk id -> its row, for every chunk in either list
    rows: Mapping[int, ChunkRow]
    #: scope id -> scope name, for the scopes of ``rows``
    scopes: Mapping[int, str]
    #: the time the query names, as ranking is given it (``SearchPlan.window``)
    window: TimeWindow | None
    #: recall found fewer vector candidates than it asked for: the list held every chunk
    #: the reader may see (``fuse``)
    vector_complete: bool
    #: the memory's ranking knobs (``[retrieval]``), as search ranks with them
    ranking: RankingConfig


def run_candidates(
    store: Store,
    indexer: Callable[[], Indexer] | None,
    principal: Principal,
    plan: SearchPlan,
) -> Recall:
    """``run_recall`` with the chunk rows and scope names ranking needs, nothing ranked."""
    recalled = run_recall(store, indexer, principal, plan, Trace())
    recalled, rows = _settled(store, indexer, plan, recalled)
    # Only the names of scopes holding a returned chunk: the others are none of the
    # caller's business (it may not read them).
    scope_ids = {row.meta.scope_id for row in rows.values()}
    scopes = {i: name for i, name in store.scopes().items() if i in scope_ids}
    return Recall(
        query=plan.query,
        mode=plan.mode,
        k=plan.k,
        weights=plan.weights,
        keyword=tuple(recalled.keyword),
        vector=tuple(recalled.vector),
        rows=rows,
        scopes=scopes,
        window=plan.window,
        vector_complete=recalled.vector_complete,
        ranking=plan.ranking,
    )


def run_search(
    store: Store,
    indexer: Callable[[], Indexer] | None,
    principal: Principal,
    plan: SearchPlan,
) -> tuple[SearchResult, Preselection]:
    trace = Trace()
    recalled = run_recall(store, indexer, principal, plan, trace)
    chosen = recalled.chosen
    window = plan.window
    if window is not None:
        trace.time_window = {
            "phrase": window.phrase,
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
        }
    with _timed(trace, "fuse"):  # the rows read back for the check included
        recalled, rows = _settled(store, indexer, plan, recalled)
        hits = rank(
            recalled.keyword,
            recalled.vector,
            rows,
            store.scopes(),
            query=plan.query,
            mode=plan.mode,
            k=max(plan.k, plan.reranker.top) if plan.reranker is not None else plan.k,
            weights=plan.weights,
            config=plan.ranking,
            window=window,
            vector_complete=recalled.vector_complete,
        )
    if plan.reranker is not None and hits:
        reranked = plan.reranker.rerank(plan.query, hits, plan.k)
        hits = reranked.hits
        trace.reranker = reranked.note
        trace.timings_ms["rerank"] = reranked.ms
    if not access.sees_everything(principal):
        hits = [_without_keyword_score(hit) for hit in hits]
    result = SearchResult(
        query=plan.query,
        mode=plan.mode,
        scope=plan.request.scope,
        selector_used=chosen.selector_used,
        hits=tuple(hits),
        trace=trace,
    )
    return result, chosen


def _without_keyword_score(hit: Hit) -> Hit:
    """``hit`` with its keyword rank but not its keyword score. A keyword score weighs the
    query's words by how many chunks of the whole index hold them, withheld ones included:
    read exactly, the score of a reader's own record would count the withheld records
    holding a word of the reader's choosing. Fusion takes keyword results by rank alone."""
    if hit.scores.keyword is None:
        return hit
    return hit.model_copy(update={"scores": hit.scores.model_copy(update={"keyword": None})})


def compose(budget: BudgetResult[Item]) -> tuple[tuple[Item, ...], tuple[Excluded, ...]]:
    """The included items with their token cost, and what the budget left out (and why)."""
    items = tuple(
        item.model_copy(update={"tokens": estimate_item_tokens(item.content)})
        for item in budget.included
    )
    excluded = tuple(
        Excluded(
            record_id=e.item.record_id,
            version_id=e.item.version_id,
            reason="token_budget",
            tokens=e.tokens,
        )
        for e in budget.excluded
    )
    return items, excluded


def clipped(query: str, items: Sequence[Item], max_tokens: int) -> RetrievalResult:
    """Items that need no ranking (direct or relationship reads), through the same budget."""
    budget = apply_budget(items, lambda item: estimate_item_tokens(item.content), max_tokens)
    included, excluded = compose(budget)
    return RetrievalResult(
        query=query,
        mode="keyword",
        scope=None,
        selector_used=VersionPin.head(),
        items=included,
        token_budget=max_tokens,
        used_tokens=budget.used_tokens,
        token_budget_exceeded=budget.token_budget_exceeded,
        excluded_count=budget.excluded_count,
        excluded=excluded,
        trace=Trace(),
    )


def run_retrieve(
    store: Store,
    indexer: Callable[[], Indexer] | None,
    principal: Principal,
    plan: SearchPlan,
    *,
    max_tokens: int,
    now: datetime,
) -> RetrievalResult:
    searched, _ = run_search(store, indexer, principal, plan)
    trace = searched.trace
    hits: list[Hit] = list(searched.hits)
    with _timed(trace, "validate"):
        records = store.get_records([h.record_id for h in hits])
        versions = {h.version_id: store.get_version(h.version_id) for h in hits}
        # A read the busy index left to keyword search alone is scored as one.
        mode = "keyword" if trace.vector_index_busy else plan.mode
        live = indexer() if indexer is not None and mode != "keyword" else None
        checked = validate(
            hits,
            records=records,
            versions={k: v for k, v in versions.items() if v is not None},
            now=now,
            best_possible=max_fused_score(plan.weights, mode, plan.ranking.fusion),
            vector_of=live.catalog.vector_of if live else (lambda _chunk: None),
        )
    trace.dropped_by_validation = checked.dropped
    with _timed(trace, "budget"):
        budget = apply_budget(
            checked.items, lambda item: estimate_item_tokens(item.content), max_tokens
        )
    with _timed(trace, "compose"):
        items, excluded = compose(budget)
    waiting = None if trace.vector_lag_uncounted else trace.vector_lag
    warnings = vector_warnings(waiting=waiting, busy=trace.vector_index_busy)
    return RetrievalResult(
        query=plan.query,
        mode=plan.mode,
        scope=plan.request.scope,
        selector_used=searched.selector_used,
        items=items,
        contradictions=tuple(checked.contradictions),
        token_budget=max_tokens,
        used_tokens=budget.used_tokens,
        token_budget_exceeded=budget.token_budget_exceeded,
        excluded_count=budget.excluded_count,
        excluded=excluded,
        warnings=warnings,
        trace=trace,
    )
