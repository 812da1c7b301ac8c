"""``Memory``'s reads built on retrieval: an agent's context for a scope, the check of cited
records and claims, records by path or symbol, and the Researcher."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cairn.errors import InvalidInput, NotFound
from cairn.governance import access
from cairn.governance.visible import readable_record
from cairn.memory.reads import ReadVerbs
from cairn.memory.search import SearchVerbs
from cairn.model import PinKind, Principal, Status
from cairn.retrieval.claims import claim_relation
from cairn.retrieval.context import (
    ClaimCheck,
    ClaimsReport,
    ReadContextRequest,
    ReadContextResponse,
    RecordCheck,
    ResearchAnswer,
    ValidationReport,
)
from cairn.retrieval.pipeline import clipped
from cairn.retrieval.researcher import research
from cairn.retrieval.types import Item, RetrievalResult
from cairn.retrieval.validate import direct_item, find_contradictions

__all__ = ["ContextVerbs"]


class ContextVerbs(SearchVerbs, ReadVerbs):
    """Mixed into ``Memory``: what an agent reads before and after it works."""

    def read_context(
        self, request: ReadContextRequest, *, principal: Principal
    ) -> ReadContextResponse:
        """Version-pinned, permission-trimmed context for a scope: what an agent reads before it
        works (a query ranks the scope's records; a ``record_id`` fetches one directly)."""
        if request.record_id is not None:
            view = self.get(request.record_id, principal=principal, selector=request.selector)
            if view.record.scope != request.scope:
                raise NotFound(f"no record {request.record_id} in {request.scope}")
            item = direct_item(view.record, view.version, "direct_fetch", scope=view.record.scope)
            return ReadContextResponse(
                scope=request.scope, selector_used=view.selector_used, items=(item,)
            )
        result = self.retrieve(
            request.query or "",
            principal=principal,
            max_tokens=request.max_tokens,
            mode=request.mode,
            k=request.k,
            scope=request.scope,
            selector=request.selector,
            include_drafts=request.include_drafts,
        )
        warnings = list(result.warnings)
        if request.selector.kind is PinKind.PUBLISHED and (
            # a scope the principal may not read reads exactly like one never published
            not access.in_scope(principal, request.scope)
            or self._store.published_baseline_id(request.scope) is None
        ):
            warnings.append(f"nothing is published in {request.scope} yet")
        return ReadContextResponse(
            scope=request.scope,
            selector_used=result.selector_used,
            items=result.items,
            contradictions=result.contradictions,
            token_budget_exceeded=result.token_budget_exceeded,
            excluded_count=result.excluded_count,
            warnings=tuple(warnings),
            trace=result.trace,
        )

    def validate(self, record_ids: Sequence[str], *, principal: Principal) -> ValidationReport:
        """May these cited records still be relied on? (exists, current, valid, active)"""
        now = self.clock()
        checks: list[RecordCheck] = []
        items: list[Item] = []
        for record_id in record_ids:
            record = readable_record(self._store, record_id, principal)
            if record is None:
                checks.append(
                    RecordCheck(record_id=record_id, valid=False, problems=("not_found",))
                )
                continue
            problems: list[str] = []
            if record.superseded_by:
                problems.append("superseded")
            if record.status is not Status.ACTIVE:
                problems.append(record.status.value)
            content = record.content
            if content.valid_to is not None and content.valid_to <= now:
                problems.append("expired")
            if content.valid_from is not None and content.valid_from > now:
                problems.append("not_yet_valid")
            checks.append(
                RecordCheck(
                    record_id=record_id,
                    valid=not problems,
                    status=record.status.value,
                    version_id=record.current_version_id,
                    resolved_id=self.resolve(record_id, principal=principal).id,
                    confidence_label=content.confidence.value,
                    problems=tuple(problems),
                )
            )
            version = self._store.get_version(record.current_version_id)
            if version is not None:
                items.append(direct_item(record, version, "direct_fetch", scope=record.scope))
        contradictions = find_contradictions(items)
        return ValidationReport(
            checked_at=now, records=tuple(checks), contradictions=tuple(contradictions)
        )

    def for_path(
        self, path: str, *, principal: Principal, k: int = 10, max_tokens: int = 8000
    ) -> RetrievalResult:
        """Records tied to a repository path (or anything under a directory), drafts
        included so that handoff notes are seen."""
        wanted = path.strip("/")
        record_ids = {
            link.record_id
            for link in self._store.list_path_links()
            if link.path == wanted or link.path.startswith(wanted + "/")
        }
        items: list[Item] = []
        for record in self._store.get_records(sorted(record_ids)).values():
            if not access.can_read(principal, record.scope, record.content.acl):
                continue
            if record.status not in (Status.ACTIVE, Status.DRAFT) or record.superseded_by:
                continue
            version = self._store.get_version(record.current_version_id)
            if version is not None:
                items.append(direct_item(record, version, "relationship_path", scope=record.scope))
        items.sort(key=lambda i: (i.status != "active", i.title))
        return clipped(path, items[:k], max_tokens)

    def for_symbol(
        self, symbol: str, *, principal: Principal, k: int = 10, max_tokens: int = 8000
    ) -> RetrievalResult:
        """Records that mention a code symbol, drafts included."""
        return self.retrieve(
            symbol,
            principal=principal,
            mode="keyword",
            k=k,
            max_tokens=max_tokens,
            include_drafts=True,
        )

    def validate_claims(
        self, text: str, *, principal: Principal, scope: str | None = None
    ) -> ClaimsReport:
        """Check each sentence of an agent's claims against memory: supported,
        contradicted (never resolved) or unknown, with the evidence cited."""
        claims = [c.strip() for c in re.split(r"(?<=[.!?])\s+|\n+", text) if c.strip()]
        if not claims:
            raise InvalidInput("no claims to validate", field="text")
        checked: list[ClaimCheck] = []
        for claim in claims[:20]:
            found = self.retrieve(
                claim,
                principal=principal,
                k=3,
                scope=scope,
                mode="hybrid" if self.indexer else "keyword",
            )
            evidence = tuple(found.items)
            verdict = "unknown"
            for item in evidence:
                relation = claim_relation(claim, item.title + ". " + item.content)
                if relation != "unknown":
                    verdict = relation
                    break
            checked.append(ClaimCheck(claim=claim, verdict=verdict, evidence=evidence))
        return ClaimsReport(claims=tuple(checked))

    def research(
        self,
        question: str,
        *,
        principal: Principal,
        scope: str | None = None,
        max_tokens: int = 4000,
    ) -> ResearchAnswer:
        """The Researcher: plan, retrieve, retry ≤ 3 times, summarise with citations."""
        if not question.strip():
            raise InvalidInput("the question is empty", field="question")

        def attempt(query: str, **options: Any) -> RetrievalResult:
            if options.get("mode") != "keyword" and self.indexer is None:
                options["mode"] = "keyword"
            return self.retrieve(query, principal=principal, scope=scope, **options)

        return research(question, attempt, now=self.clock(), max_tokens=max_tokens)
