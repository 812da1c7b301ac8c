"""``Memory``'s review queue: proposals as their author or a curator may see them, one
curator's decisions (one, many, or every one a filter matches), and the audit log."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.governance.visible import proposal_visible, visible_proposal
from cairn.limits import MAX_BULK_DECISIONS, MAX_COUNTER
from cairn.memory.core import MemoryCore
from cairn.model import (
    AuditEntry,
    AuditQuery,
    Principal,
    Proposal,
    ProposalFilter,
    ProposalOutcome,
    ProposalStatus,
)

__all__ = ["ReviewVerbs"]


class ReviewVerbs(MemoryCore):
    """Mixed into ``Memory``: reading and deciding proposals, reading the audit."""

    def proposal(self, proposal_id: str, *, principal: Principal) -> Proposal:
        return visible_proposal(self._store, proposal_id, principal)

    def proposals(
        self,
        *,
        principal: Principal,
        status: ProposalStatus | None = ProposalStatus.PENDING,
        limit: int = 100,
        offset: int = 0,
        after: str | None = None,
        narrow: ProposalFilter | None = None,
    ) -> list[Proposal]:
        """The review queue: curators see the proposals of their scopes, anyone else only
        their own. A page, by id, bounded in the store (``after``: the last id seen);
        ``narrow`` filters it by change, kind, scope, author, rule and age."""
        if not 0 <= offset <= MAX_COUNTER:
            raise InvalidInput(f"offset must be from 0 to {MAX_COUNTER}", field="offset")
        curates = access.is_curator(principal)
        found = self._store.list_proposals(
            status=status,
            limit=limit,
            offset=offset,
            after=after,
            proposer=principal.id,
            scope_globs=principal.scopes if curates else None,
            narrow=narrow,
        )
        return [p for p in found if proposal_visible(self._store, p, principal)]

    def is_stale(self, proposal: Proposal) -> bool:
        return self._gate.is_stale(proposal)

    def decide(
        self, proposal_id: str, *, approve: bool, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        decided = self._gate.decide(
            proposal_id, approve=approve, principal=principal, reason=reason
        )
        return self._shown_outcome(decided, principal)

    def rebase(self, proposal_id: str, *, principal: Principal) -> ProposalOutcome:
        return self._gate.rebase(proposal_id, principal=principal)

    def approve_many(
        self, proposal_ids: Sequence[str], *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves many queued proposals with one reason, all in one transaction:
        if any of them cannot be approved (stale, duplicate, already decided, not visible),
        none is and the error names the first."""
        outcomes = self._gate.approve_many(proposal_ids, principal=principal, reason=reason)
        return [self._shown_outcome(o, principal) for o in outcomes]

    def approve_matching(
        self, narrow: ProposalFilter, *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves every pending proposal the filter matches (the review
        queue's filters, across all its pages) with one reason, in one transaction as
        ``approve_many``. A filter matching more than can be decided at once is refused,
        naming the limit, with nothing approved."""
        access.require_curator(principal, "approve or reject proposals")
        found = self.proposals(principal=principal, narrow=narrow, limit=MAX_BULK_DECISIONS + 1)
        if len(found) > MAX_BULK_DECISIONS:
            raise InvalidInput(
                f"more than {MAX_BULK_DECISIONS:,} proposals match; narrow the filters",
                field="filters",
            )
        if not found:
            raise InvalidInput("no pending proposal matches these filters", field="filters")
        return self.approve_many([p.id for p in found], principal=principal, reason=reason)

    def audit(self, query: AuditQuery, *, principal: Principal) -> list[AuditEntry]:
        """The audit log names records, proposals and baselines of every scope, so only a
        curator of every scope (``"*"``) reads it."""
        access.require_curator_of_every_scope(
            principal, "read the audit log", "the audit log covers every scope"
        )
        return self._store.list_audit(query)
