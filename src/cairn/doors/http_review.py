"""The JSON API's review routes: the proposal queue, a curator's decisions and rebases,
publishing baselines, and the audit log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field, StrictBool

from cairn.doors.http_common import ProposalId, StrictBody, Who, api_router
from cairn.limits import MAX_COUNTER
from cairn.memory import Memory
from cairn.model import (
    AuditEntry,
    AuditQuery,
    Baseline,
    Id,
    Name,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    Reason,
    ScopePath,
    Timestamp,
)

__all__ = ["review_router"]


class DecisionBody(StrictBody):
    approve: StrictBool
    reason: Reason | None = None


class PublishBody(StrictBody):
    scope: ScopePath
    record_ids: Annotated[list[Id], Field(max_length=10_000)] | None = None
    pins: Annotated[dict[Id, Id | None], Field(max_length=10_000)] | None = None
    name: Name | None = None
    replace: StrictBool = False
    reason: Reason | None = None


def review_router(memory: Memory) -> APIRouter:
    """``/v1/proposals``, ``/v1/publish``, ``/v1/baselines`` and ``/v1/audit``."""
    router = api_router()

    @router.get(
        "/proposals",
        tags=["review"],
        summary="The review queue (curators see all; others their own)",
    )
    def proposals(
        who: Who,
        status: ProposalStatus | None = ProposalStatus.PENDING,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
        after: Annotated[
            Id | None, Query(description="the last id of the previous page (keyset paging)")
        ] = None,
    ) -> list[Proposal]:
        return memory.proposals(
            principal=who, status=status, limit=limit, offset=offset, after=after
        )

    @router.get("/proposals/{proposal_id}", tags=["review"], summary="One proposal")
    def proposal(proposal_id: ProposalId, who: Who) -> Proposal:
        return memory.proposal(proposal_id, principal=who)

    @router.post(
        "/proposals/{proposal_id}/decision",
        tags=["review"],
        summary="Approve or reject a queued proposal (curators)",
    )
    def decide(proposal_id: ProposalId, body: DecisionBody, who: Who) -> ProposalOutcome:
        return memory.decide(proposal_id, approve=body.approve, principal=who, reason=body.reason)

    @router.post(
        "/proposals/{proposal_id}/rebase",
        tags=["review"],
        summary="Re-base a stale proposal on the current version",
    )
    def rebase(proposal_id: ProposalId, who: Who) -> ProposalOutcome:
        return memory.rebase(proposal_id, principal=who)

    @router.post("/publish", tags=["review"], summary="Publish a baseline for a scope (curators)")
    def publish(body: PublishBody, who: Who) -> ProposalOutcome:
        return memory.publish(
            body.scope,
            principal=who,
            record_ids=body.record_ids,
            pins=body.pins,
            name=body.name,
            replace=body.replace,
            reason=body.reason,
        )

    @router.get("/baselines", tags=["review"], summary="Baselines in the caller's scopes")
    def baselines(who: Who, scope: ScopePath | None = None) -> list[Baseline]:
        return memory.baselines(scope, principal=who)

    @router.get("/audit", tags=["admin"], summary="The audit log (curators)")
    def audit(
        who: Who,
        actor: Name | None = None,
        action: Name | None = None,
        subject_id: Name | None = None,
        proposal_id: Name | None = None,
        rule: Name | None = None,
        since: Timestamp | None = None,
        until: Timestamp | None = None,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 100,
        after_seq: Annotated[
            int | None, Query(ge=0, le=MAX_COUNTER, description="the last seq of the previous page")
        ] = None,
    ) -> list[AuditEntry]:
        query = AuditQuery(
            actor=actor,
            action=action,
            subject_id=subject_id,
            proposal_id=proposal_id,
            rule=rule,
            since=since,
            until=until,
            limit=limit,
            after_seq=after_seq,
        )
        return memory.audit(query, principal=who)

    return router
