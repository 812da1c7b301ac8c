"""What the gate asks the policy: the facts of a proposal its rules match on, the ruling
(a review the change needs comes first), and the key of facts a batch asks about once."""

from __future__ import annotations

from collections.abc import Hashable

from cairn import model
from cairn.governance.gate_checks import GateChecks
from cairn.governance.policy import ProposalFacts, evaluate
from cairn.model import Principal, Proposal, Record

__all__ = ["GateRulings"]


class GateRulings(GateChecks):
    """Mixed into ``Gate``: a proposal's facts and the policy's ruling on them."""

    def _facts(self, proposal: Proposal, principal: Principal) -> ProposalFacts:
        change = proposal.change
        kind: str | None = None
        origin: model.Origin | None = None
        metadata: dict[str, object] = {}
        draft = False
        if isinstance(change, model.CreateChange):
            kind, origin = change.content.kind, change.content.origin
            metadata, draft = change.content.metadata, change.draft
        elif isinstance(change, model.SupersedeChange) and change.content is not None:
            kind, origin, metadata = (
                change.content.kind,
                change.content.origin,
                change.content.metadata,
            )
        elif proposal.record_id is not None:
            record = self._record(proposal.record_id)
            kind, origin, metadata = record.kind, record.content.origin, record.content.metadata
            if isinstance(change, model.UpdateChange) and change.patch.metadata is not None:
                metadata = change.patch.metadata
        relation: str | None = None
        if isinstance(change, model.LinkChange):
            relation, metadata = change.edge.type, change.edge.metadata
        elif isinstance(change, model.UnlinkChange):
            edge = self.store.get_edge(change.edge_id)
            relation = edge.type if edge else None
        return ProposalFacts(
            relation=relation,
            op=change.op,
            kind=kind,
            origin=origin,
            roles=principal.roles,
            principal=principal.id,
            scope=proposal.scope,
            draft=draft,
            metadata=metadata,
        )

    def _ruling(
        self, proposal: Proposal, principal: Principal, target: Record | None
    ) -> tuple[model.Verdict, str, str | None]:
        """What the gate decides on a checked proposal that duplicates nothing: the
        decision, the rule that made it and the reason it gives."""
        if principal.kind is model.PrincipalKind.SYSTEM:
            # Trigger: drift, retention and other system housekeeping. Why: these moves are
            # fixed by the lifecycle and must not wait on a policy a user may have edited.
            return model.Verdict.APPROVE, "system", proposal.reason
        decision, rule, why = evaluate(self.policy, self._facts(proposal, principal))
        if decision is model.Verdict.APPROVE:
            forced = self._needs_review(proposal, principal, target)
            if forced is not None:
                return model.Verdict.QUEUE, *forced
            return decision, rule, why or proposal.reason
        if decision is model.Verdict.REJECT:
            return decision, rule, why or "refused by policy"
        return decision, rule, why

    def _decision_key(self, proposal: Proposal, principal: Principal) -> Hashable:
        """What the ruling on a new record depends on: its policy facts, as far as the
        policy's rules tell them apart (``Policy.facts_key``), and the principal."""
        return (
            principal.id,
            principal.kind,
            self.policy.facts_key(self._facts(proposal, principal)),
        )
