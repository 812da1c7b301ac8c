"""The gate's decisions, written: a proposal queued, rejected (a duplicate with feedback)
or accepted, each closed with who decided and why, audited and committed."""

from __future__ import annotations

from datetime import datetime
from typing import NoReturn, TypedDict, Unpack

from cairn.errors import DuplicateContent
from cairn.governance import links
from cairn.governance.gate_plans import GatePlans, Plan
from cairn.model import Principal, Proposal, ProposalOutcome, ProposalStatus, Record, Verdict
from cairn.store.base import (
    ChangeSet,
    ExpectProposal,
    Precondition,
    PutEdge,
    PutProposal,
    Write,
)

__all__ = ["Acceptance", "GateOutcomes", "closed", "duplicate_feedback"]


def duplicate_feedback(existing: Record) -> str:
    return (
        f"Rejected: duplicate content. Hash {existing.content.content_hash()[:12]} matches "
        f"existing record {existing.id} ({existing.content.title!r}, "
        f"v{existing.current_version}) in scope {existing.scope}. "
        f"Consider updating {existing.id} instead."
    )


def closed(
    proposal: Proposal,
    status: ProposalStatus,
    principal: Principal,
    *,
    rule: str,
    reason: str | None,
    now: datetime,
    **results: str | None,
) -> Proposal:
    """``proposal`` decided: its new status, the rule and reason, who decided and when, and
    (accepted) what it made."""
    update = {"status": status, "rule": rule, "reason": reason, "decided_by": principal.id}
    return proposal.model_copy(update={**update, "decided_at": now, **results})


class Acceptance(TypedDict):
    """How a proposal is accepted: by which rule and why, whether the gate decided it alone
    (``auto``), and whether it waited in the queue (``stored``: its commit must then find it
    still pending)."""

    rule: str
    reason: str | None
    auto: bool
    stored: bool


class GateOutcomes(GatePlans):
    """Mixed into ``Gate``: a decided proposal, its writes, its audit entry."""

    def _queued(self, proposal: Proposal, *, rule: str, reason: str | None) -> ProposalOutcome:
        proposal = proposal.model_copy(update={"rule": rule})
        return ProposalOutcome(proposal=proposal, decision=Verdict.QUEUE, feedback=reason)

    def _rejected(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        rule: str,
        feedback: str,
        now: datetime,
    ) -> ProposalOutcome:
        rejected = closed(
            proposal, ProposalStatus.REJECTED, principal, rule=rule, reason=feedback, now=now
        )
        return ProposalOutcome(proposal=rejected, decision=Verdict.REJECT, feedback=feedback)

    def _accepted(
        self, proposal: Proposal, principal: Principal, *, rule: str, reason: str | None,
        now: datetime, plan: Plan | None = None,
    ) -> tuple[ProposalOutcome, Plan]:  # fmt: skip
        """The accepted proposal's outcome, and its plan with every write it makes (the
        proposal's own row and its ACCEPTED_AS edge included). ``plan`` is given when the
        change names records the same transaction makes (a graph's edges)."""
        plan = plan if plan is not None else self._plan(proposal, now)
        accepted = closed(
            proposal, ProposalStatus.ACCEPTED, principal, rule=rule, reason=reason, now=now,
            result_record_id=plan.record.id if plan.record else None,
            result_version_id=plan.version.id if plan.version else None,
        )  # fmt: skip
        plan.writes.insert(0, PutProposal(accepted))
        if plan.version is not None:
            accepted_as = links.system_edge(
                "ACCEPTED_AS",
                proposal.id,
                plan.version.id,
                scope=plan.version.content.scope,
                acl=plan.version.content.acl,
                now=now,
                proposal_id=proposal.id,
            )
            plan.writes.append(PutEdge(accepted_as))
        outcome = ProposalOutcome(
            proposal=accepted,
            decision=Verdict.APPROVE,
            record=plan.record,
            version=plan.version,
            edge=plan.edge,
            feedback=reason,
        )
        return outcome, plan

    def _decided(
        self,
        proposal: Proposal,
        principal: Principal,
        ruling: tuple[Verdict, str, str | None],
        *,
        now: datetime,
    ) -> tuple[ProposalOutcome, list[Write]]:
        """The outcome of a new proposal the ``ruling`` decided, and what it writes."""
        decision, rule, why = ruling
        if decision is Verdict.APPROVE:
            outcome, plan = self._accepted(proposal, principal, rule=rule, reason=why, now=now)
            return outcome, plan.writes
        if decision is Verdict.REJECT:
            outcome = self._rejected(proposal, principal, rule=rule, feedback=why or "", now=now)
        else:
            outcome = self._queued(proposal, rule=rule, reason=why)
        return outcome, [PutProposal(outcome.proposal)]

    def _queue(
        self, proposal: Proposal, principal: Principal, *, rule: str, reason: str | None
    ) -> ProposalOutcome:
        outcome = self._queued(proposal, rule=rule, reason=reason)
        audit = self._audit(
            principal,
            "propose",
            subject=proposal.record_id,
            proposal=outcome.proposal,
            rule=rule,
            reason=reason,
            details={"op": proposal.change.op, "queued": True},
        )
        self._commit(audit, [PutProposal(outcome.proposal)])
        return outcome

    def _reject(
        self, proposal: Proposal, principal: Principal, *, rule: str, reason: str, stored: bool
    ) -> ProposalOutcome:
        return self._close_rejected(proposal, principal, rule=rule, feedback=reason, stored=stored)

    def _reject_duplicate(
        self, proposal: Proposal, principal: Principal, existing: Record
    ) -> NoReturn:
        """Reject (and audit) a new proposal duplicating ``existing``, then raise
        ``DuplicateContent`` carrying the outcome."""
        feedback = duplicate_feedback(existing)
        outcome = self._close_rejected(
            proposal,
            principal,
            rule="duplicate_content",
            feedback=feedback,
            existing_record_id=existing.id,
            stored=False,
        )
        raise DuplicateContent(
            feedback,
            proposal_id=proposal.id,
            existing_record_id=existing.id,
            outcome=outcome.model_dump(mode="json"),
        )

    def _close_rejected(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        rule: str,
        feedback: str,
        existing_record_id: str | None = None,
        stored: bool,
    ) -> ProposalOutcome:
        """``stored``: the proposal waited in the queue (a decision on it must find it still
        pending), rather than being decided as it was made."""
        outcome = self._rejected(
            proposal, principal, rule=rule, feedback=feedback, now=self.clock()
        )
        details: dict[str, object] = {"op": proposal.change.op}
        if existing_record_id:
            details["existing_record_id"] = existing_record_id
        audit = self._audit(
            principal,
            "reject",
            subject=proposal.record_id,
            proposal=proposal,
            rule=rule,
            reason=feedback,
            details=details,
        )
        expects = (ExpectProposal(proposal.id, ProposalStatus.PENDING),) if stored else ()
        self._commit(audit, [PutProposal(outcome.proposal)], expects=expects)
        return outcome

    def _accept(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        also_expects: Precondition | None = None,
        **how: Unpack[Acceptance],
    ) -> ProposalOutcome:
        outcome, changeset = self._acceptance(
            proposal, principal, now=self.clock(), also_expects=also_expects, **how
        )
        self._write([changeset])
        return outcome

    def _acceptance(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        now: datetime,
        bulk: bool = False,
        plan: Plan | None = None,
        also_expects: Precondition | None = None,
        **how: Unpack[Acceptance],
    ) -> tuple[ProposalOutcome, ChangeSet]:
        """The accepted proposal's outcome and the change set (writes and audit) that
        commits it, if its plan's preconditions and ``also_expects`` (what the checks before
        it saw) still hold; nothing is written here."""
        rule, reason = how["rule"], how["reason"]
        outcome, plan = self._accepted(
            proposal, principal, rule=rule, reason=reason, now=now, plan=plan
        )
        expects = list(plan.expects)
        if how["stored"]:
            expects.append(ExpectProposal(proposal.id, ProposalStatus.PENDING))
        if also_expects is not None:
            expects.append(also_expects)
        details: dict[str, object] = {
            "op": proposal.change.op,
            "auto": how["auto"],
            "version_id": plan.version.id if plan.version else None,
        }
        if bulk:
            details["bulk"] = True
        audit = self._audit(
            principal,
            "approve",
            subject=plan.subject or (plan.record.id if plan.record else proposal.record_id),
            proposal=outcome.proposal,
            rule=rule,
            reason=reason,
            from_status=plan.from_status,
            to_status=plan.to_status,
            details=details,
        )
        changeset = ChangeSet(audit=audit, writes=tuple(plan.writes), expects=tuple(expects))
        return outcome, changeset
