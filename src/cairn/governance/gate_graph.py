"""The gate's graph path: vertices, new versions of them and the edges between them, each a
proposal the policy must approve, committed whole or not at all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cairn import model
from cairn.errors import NotFound, PermissionDenied
from cairn.governance import access, links
from cairn.governance._gc import collector_paused
from cairn.governance.gate_core import ORIGIN_OF, as_create
from cairn.governance.gate_outcomes import GateOutcomes
from cairn.governance.gate_plans import Plan
from cairn.governance.gate_rulings import GateRulings
from cairn.model import Content, Principal, Proposal, Record
from cairn.store.base import ChangeSet, PutEdge

__all__ = ["GraphGate", "GraphLink"]


@dataclass(frozen=True)
class GraphLink:
    """One edge of a graph written whole (``Gate.submit_graph``): its draft (whose own
    ``src``/``dst`` are replaced) and its ends, each a stored record's id or the index of
    a record the same graph creates."""

    draft: model.EdgeDraft
    src: str | int
    dst: str | int


class GraphGate(GateOutcomes, GateRulings):
    """Mixed into ``Gate``: ``submit_graph``."""

    def submit_graph(
        self,
        creates: Sequence[Content],
        updates: Sequence[tuple[str, Content]],
        edges: Sequence[GraphLink],
        principal: Principal,
        *,
        reason: str,
        unlinks: Sequence[str] = (),
    ) -> list[model.ProposalOutcome]:
        """New records, new versions of stored ones and edges between any of them, each
        a proposal the policy rules on, all committed in one transaction or none: a graph
        is never half-written. An edge's end is a stored record's id or the index of one
        of ``creates``; ``unlinks`` are stored edges the graph replaces (edges are never
        edited: a changed edge is the old one removed and a new one linked). Every proposal
        must be approved by the policy (for a curator, the default policy's
        ``curators-decide``); one the policy would queue or reject refuses the whole graph,
        naming it, since an edge cannot wait on a record not yet made."""
        access.require_curator(principal, "ingest a decision graph")
        now = self.clock()
        changesets: list[ChangeSet] = []
        outcomes: list[model.ProposalOutcome] = []

        def approve(proposal: Proposal, target: Record | None, plan: Plan | None) -> None:
            verdict, rule, why = self._ruling(proposal, principal, target)
            if verdict is not model.Verdict.APPROVE:
                raise PermissionDenied(
                    f"the policy rule {rule!r} would {verdict.value} "
                    f"{proposal.change.op} in {proposal.scope}; a graph is written whole, "
                    "so nothing was written",
                    field="policy",
                )
            outcome, changeset = self._acceptance(
                proposal, principal, rule=rule, reason=why or reason, auto=True,
                stored=False, now=now, plan=plan,
            )  # fmt: skip
            outcomes.append(outcome)
            changesets.append(changeset)

        made: list[Record] = []
        # The stored ends of the edges, read at once (nothing is written before the end).
        stored_ends = self.store.get_records(
            [end for link in edges for end in (link.src, link.dst) if isinstance(end, str)]
        )

        def end_record(end: str | int) -> Record:
            if isinstance(end, int):
                return made[end]
            record = stored_ends.get(end)
            if record is None:
                raise NotFound(f"no record {end}", field="record_id")
            return record

        for content in creates:
            change = as_create(self._stamp(model.CreateChange(content=content), principal))
            access.require_scope(principal, change.content.scope)
            self.policy.check_kind(change.content.kind)
            proposal = self._proposal(change, principal, scope=change.content.scope, now=now)
            approve(proposal, None, None)
            assert outcomes[-1].record is not None
            made.append(outcomes[-1].record)
        for record_id, content in updates:
            target = self._record(record_id)
            access.require_scope(principal, target.scope)
            patch = model.ContentPatch(**{
                name: getattr(content, name)
                for name in ("title", "body", "tags", "metadata", "acl", "valid_from", "valid_to")
            })  # fmt: skip
            update = self._stamp(model.UpdateChange(record_id=record_id, patch=patch), principal)
            proposal = self._proposal(
                update, principal, scope=target.scope, now=now, target=target,
                base_version_id=target.current_version_id,
            )  # fmt: skip
            approve(proposal, target, None)
        for edge_id in unlinks:
            stored = self.store.get_edge(edge_id)
            if stored is None:
                raise NotFound(f"no edge {edge_id}", field="edge_id")
            access.require_scope(principal, stored.scope)
            unlink = self._stamp(model.UnlinkChange(edge_id=edge_id), principal)
            proposal = self._proposal(unlink, principal, scope=stored.scope, now=now)
            removed = links.removed_edge(stored, actor=principal.id, now=now)
            approve(
                proposal, None,
                Plan(writes=[PutEdge(removed)], expects=[], subject=removed.id, edge=removed),
            )  # fmt: skip
        for link in edges:
            src, dst = end_record(link.src), end_record(link.dst)
            draft = link.draft.model_copy(
                update={"src": src.id, "dst": dst.id, "origin": ORIGIN_OF[principal.kind]}
            )
            links.check_ends(self.policy, draft, src, dst)
            proposal = self._proposal(
                model.LinkChange(edge=draft), principal, scope=src.scope, now=now
            )
            edge = links.linked_edge(
                draft, src, actor=principal.id, proposal_id=proposal.id, now=now
            )
            approve(
                proposal, None,
                Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge),
            )  # fmt: skip
        if changesets:
            with collector_paused():
                self._write(changesets)
        return outcomes
