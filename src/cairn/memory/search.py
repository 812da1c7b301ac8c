"""``Memory``'s ranked reads: a query checked and planned once, then searched raw,
retrieved validated within a token budget, or recalled unranked (for replaying ranking)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Unpack

from cairn.errors import InvalidInput
from cairn.limits import MAX_QUERY_CHARS, MAX_SCOPE_CHARS, check_input
from cairn.memory.indexing import IndexVerbs
from cairn.model import Principal, VersionPin
from cairn.options import DEFAULT_MODE, KernelReadFilters, check_names
from cairn.retrieval.pipeline import Recall, SearchPlan, run_candidates, run_retrieve, run_search
from cairn.retrieval.preselect import ReadRequest
from cairn.retrieval.ranking import RankingConfig
from cairn.retrieval.types import Mode, RetrievalResult, SearchResult
from cairn.retrieval.weights import check_weights, embedder_weights
from cairn.retrieval.when import query_window

if TYPE_CHECKING:
    from cairn.retrieval.endpoint_rerank import EndpointReranker
    from cairn.retrieval.indexer import Indexer

__all__ = ["SearchVerbs"]


class SearchVerbs(IndexVerbs):
    """Mixed into ``Memory``: ``search``, ``retrieve`` and ``recall``."""

    def _indexer_for(self, mode: Mode) -> Callable[[], Indexer] | None:
        # Handed over uncalled: recall asks for the vector index only when it has a query
        # to embed. A keyword read needs none (and must work on a keyword-only store).
        return self._need_indexer if mode != "keyword" else None

    # how ranking weighs its stages, and the optional reranking endpoint ([retrieval])
    _ranking: RankingConfig
    _reranker: EndpointReranker | None

    def _plan(self, query: str, filters: KernelReadFilters) -> SearchPlan:
        """The checked query and filters, with every filter left out at its default."""
        check_names(filters, KernelReadFilters.__optional_keys__)
        mode = filters.get("mode", DEFAULT_MODE)
        k = filters.get("k", 10)
        scope = filters.get("scope")
        weights = filters.get("weights")
        kinds = filters.get("kinds", ())
        candidates = filters.get("candidates")
        record_ids = filters.get("record_ids")
        if k < 1 or k > 1000:
            raise InvalidInput("k must be between 1 and 1000", field="k")
        check_input(query, "query", MAX_QUERY_CHARS)
        if scope is not None:
            check_input(scope, "scope", MAX_SCOPE_CHARS)
        if weights is not None:
            check_weights(weights, mode)
        for kind in kinds:
            self._policy.check_kind(kind)
        if candidates is not None and not 1 <= candidates <= 10_000:
            raise InvalidInput("candidates must be between 1 and 10000", field="candidates")
        if mode not in ("hybrid", "keyword", "vector"):
            raise InvalidInput(f"unknown mode {mode!r}: hybrid, keyword or vector", field="mode")
        if mode != "keyword":
            self._need_indexer()
        now = self.clock()
        request = ReadRequest(
            scope=scope,
            selector=filters.get("selector") or VersionPin.head(),
            kinds=tuple(kinds),
            include_drafts=filters.get("include_drafts", False),
            valid_at=now,
            created_after=filters.get("created_after"),
            created_before=filters.get("created_before"),
            record_ids=frozenset(record_ids) if record_ids is not None else None,
        )
        return SearchPlan(
            query=query,
            mode=mode,
            k=k,
            candidates=candidates or max(50, 5 * k),
            # the defaults of this store's embedder, with the signals the caller names as it
            # says (``weights.embedder_weights``)
            weights={**embedder_weights(self._embedder_spec), **(weights or {})},
            request=request,
            ranking=self._ranking,
            # read only when ranking weighs it (``[retrieval] time_weight``)
            window=query_window(query, now=now) if self._ranking.time_weight else None,
            reranker=self._reranker,
        )

    def search(
        self, query: str, *, principal: Principal, **filters: Unpack[KernelReadFilters]
    ) -> SearchResult:
        """Raw ranked search (no validation, no budget): permission-trimmed, fused. The
        filters (``mode``, ``k``, ``scope``, …) are ``KernelReadFilters``'."""
        plan = self._plan(query, filters)
        return run_search(self._store, self._indexer_for(plan.mode), principal, plan)[0]

    def retrieve(
        self,
        query: str,
        *,
        principal: Principal,
        max_tokens: int = 8000,
        **filters: Unpack[KernelReadFilters],
    ) -> RetrievalResult:
        """Validated retrieval clipped to a token budget, every item cited to its version
        (filtered as ``search`` is)."""
        if max_tokens < 1:
            raise InvalidInput("max_tokens must be positive", field="max_tokens")
        plan = self._plan(query, filters)
        return run_retrieve(
            self._store,
            self._indexer_for(plan.mode),
            principal,
            plan,
            max_tokens=max_tokens,
            now=self.clock(),
        )

    def recall(
        self, query: str, *, principal: Principal, **filters: Unpack[KernelReadFilters]
    ) -> Recall:
        """What ``search`` ranks, unranked: the keyword and vector ``(chunk id, score)``
        lists and their chunk rows, permission-trimmed as ``search`` is. Read-only; for
        replaying ranking offline (``cairn.retrieval.ranking.rank`` on it gives ``search``'s
        hits for the same arguments, at the same moment, when no reranking endpoint is
        configured: that stage is the endpoint's, not replayable; ``search`` then leaves
        out the keyword scores for a reader who does not see everything). In-process only:
        no door hands these lists out."""
        plan = self._plan(query, filters)
        return run_candidates(self._store, self._indexer_for(plan.mode), principal, plan)
