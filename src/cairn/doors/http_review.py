"""The JSON API's review routes: the proposal queue, a curator's decisions and rebases, and
publishing baselines."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Query
from pydantic import Field, StrictBool

from cairn.doors.http_common import ProposalId, StrictBody, Who, api_router
from cairn.limits import MAX_COUNTER
from cairn.memory import Memory
from cairn.model import (
    Baseline,
    Id,
    Name,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    Reason,
    ScopePath,
)
from cairn.options import PublishChoice

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

    def choice(self) -> PublishChoice:
        """What to publish, as ``Memory.publish`` takes it: every field but the scope."""
        # ``publish`` refuses a name it does not take (``check_names``): a field added here
        # and not there fails the publish tests rather than being dropped without a word.
        return cast(PublishChoice, self.model_dump(exclude={"scope"}))


def review_router(memory: Memory) -> APIRouter:
    """``/v1/proposals``, ``/v1/publish`` and ``/v1/baselines``."""
    router = api_router(tags=["review"])

    @router.get("/proposals", summary="The review queue (curators see all; others their own)")
    def proposals(
        who: Who,
        status: ProposalStatus | None = ProposalStatus.PENDING,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_COUNTER)] = 0,
        after: Annotated[
            Id | None, Query(description="the last id of the previous page (keyset paging)")
        ] = None,
    ) -> list[Proposal]:
        return memory.proposals(
            principal=who, status=status, limit=limit, offset=offset, after=after
        )

    @router.get("/proposals/{proposal_id}", summary="One proposal")
    def proposal(proposal_id: ProposalId, who: Who) -> Proposal:
        return memory.proposal(proposal_id, principal=who)

    @router.post(
        "/proposals/{proposal_id}/decision",
        summary="Approve or reject a queued proposal (curators)",
    )
    def decide(proposal_id: ProposalId, body: DecisionBody, who: Who) -> ProposalOutcome:
        return memory.decide(proposal_id, approve=body.approve, principal=who, reason=body.reason)

    @router.post(
        "/proposals/{proposal_id}/rebase", summary="Re-base a stale proposal on the current version"
    )
    def rebase(proposal_id: ProposalId, who: Who) -> ProposalOutcome:
        return memory.rebase(proposal_id, principal=who)

    @router.post("/publish", summary="Publish a baseline for a scope (curators)")
    def publish(body: PublishBody, who: Who) -> ProposalOutcome:
        return memory.publish(body.scope, principal=who, **body.choice())

    @router.get("/baselines", summary="Baselines in the caller's scopes")
    def baselines(who: Who, scope: ScopePath | None = None) -> list[Baseline]:
        return memory.baselines(scope, principal=who)

    return router
