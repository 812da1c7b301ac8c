"""The Librarian: the single governed write path.

Every mutation arrives as a ``Proposal`` pinned to the version it was based on. The gate
checks who is asking (role limits are not policy), validates the change, asks the policy,
and commits the outcome, the change and exactly one audit entry in one transaction. It is
the only caller of ``Store.commit`` (tests/governance/test_zero_bypass.py).

This module holds the gate's one-proposal verbs (submit, decide, approve many, rebase, the
drift relink) and its one commit. The rest lives next to it, a module a job:
``gate_core`` (shared state, proposals, audit entries), ``gate_checks`` (what a proposal
must pass), ``gate_rulings`` (the policy's facts and ruling), ``gate_plans`` (what an
accepted change writes), ``gate_outcomes`` (decisions written), ``gate_batch``,
``gate_graph`` and ``gate_events`` (the bulk paths).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from cairn.errors import Conflict, DuplicateContent, InvalidInput, StaleProposal
from cairn.governance import access, lifecycle
from cairn.governance.gate_batch import BatchGate
from cairn.governance.gate_core import (
    Chunker,
    PathHasher,
    checked_reason,
    decided_again_if_copied,
)
from cairn.governance.gate_events import EventGate
from cairn.governance.gate_graph import GraphGate, GraphLink
from cairn.governance.gate_outcomes import closed
from cairn.governance.policy import Policy
from cairn.limits import MAX_BULK_DECISIONS
from cairn.model import (
    Change,
    Content,
    PathLink,
    Principal,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    Record,
    Status,
    TransitionChange,
    Verdict,
    new_id,
    utcnow,
)
from cairn.store.base import (
    ChangeSet,
    ChunkDraft,
    ExpectNoCopies,
    ExpectProposal,
    ExpectRecord,
    PutEdge,
    PutPathLink,
    PutProposal,
    PutRecord,
    Store,
    Write,
)

__all__ = [
    "Chunker",
    "Gate",
    "GraphLink",
    "PathHasher",
]


def _no_files(path: str) -> str | None:
    return None


def _no_chunks(content: Content) -> tuple[ChunkDraft, ...]:
    return ()


def _contents_of(no_copies: ExpectNoCopies | None) -> list[tuple[str, str]]:
    """The (scope, content hash) pairs a proposal's duplicate check looked for."""
    if no_copies is None:
        return []
    return [(no_copies.scope, content_hash) for content_hash in no_copies.content_hashes]


class Gate(BatchGate, GraphGate, EventGate):
    """The Librarian: every change to memory is a proposal it decides, audits and commits."""

    def __init__(
        self,
        store: Store,
        policy: Policy,
        *,
        clock: Callable[[], datetime] = utcnow,
        path_hasher: PathHasher = _no_files,
        chunker: Chunker = _no_chunks,
        on_commit: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.clock = clock
        self.path_hasher = path_hasher
        # Index updates commit in the same transaction as the change they index.
        self.chunker = chunker
        self.on_commit = on_commit

    def _write(self, changesets: list[ChangeSet]) -> None:
        """The one call to ``Store.commit``; ``on_commit`` hears of every commit (the
        background indexer wakes up on it)."""
        self.store.commit(changesets)
        self.on_commit()

    # ---- public verbs ----------------------------------------------------------------

    @decided_again_if_copied
    def submit(
        self,
        change: Change,
        principal: Principal,
        *,
        base_version_id: str | None = None,
        reason: str | None = None,
        kernel_provenance: bool = False,
    ) -> ProposalOutcome:
        """Propose ``change``; commit it at once if the policy approves, else queue it.

        ``kernel_provenance`` is for the kernel's own writers (ingest): it keeps the origin
        and ``provenance.source_kind`` they set. Doors never pass it, so a caller's claim to
        be ingested evidence or the system is replaced by what the kernel knows."""
        access.require_op(principal, change.op)
        reason = checked_reason(reason)
        target = self._target(change, principal)
        if not kernel_provenance:
            change = self._stamp(change, principal)
        scope = self._scope_of(change, target, principal)
        access.require_scope(principal, scope)
        if target is not None:
            current = target.current_version_id
            if base_version_id is None:
                base_version_id = current
            elif base_version_id != current:
                raise StaleProposal(
                    f"version {base_version_id} of {target.id} is no longer current "
                    f"(head is v{target.current_version}): read it again and re-propose",
                    record_id=target.id,
                )
        proposal = self._proposal(
            change,
            principal,
            scope=scope,
            now=self.clock(),
            target=target,
            base_version_id=base_version_id,
            reason=reason,
        )
        self._validate(proposal, principal)
        duplicate, no_copies = self._duplicate_of(proposal, principal)
        if duplicate is not None:
            self._reject_duplicate(proposal, principal, duplicate)
        decision, rule, why = self._ruling(proposal, principal, target)
        if decision is Verdict.APPROVE:
            return self._accept(
                proposal, principal, rule=rule, reason=why, auto=True, stored=False,
                also_expects=no_copies,
            )  # fmt: skip
        if decision is Verdict.REJECT:
            return self._reject(proposal, principal, rule=rule, reason=why or "", stored=False)
        return self._queue(proposal, principal, rule=rule, reason=why)

    @decided_again_if_copied
    def decide(
        self, proposal_id: str, *, approve: bool, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        """A curator approves or rejects a queued proposal."""
        access.require_curator(principal, "approve or reject proposals")
        reason = checked_reason(reason)
        proposal = self._pending(proposal_id, principal)
        if not approve:
            if not reason or not reason.strip():
                raise InvalidInput("a rejection needs a reason", field="reason")
            return self._reject(proposal, principal, rule="curator", reason=reason, stored=True)
        no_copies = self._check_approvable(proposal, principal)
        return self._accept(
            proposal, principal, rule="curator", reason=reason, auto=False, stored=True,
            also_expects=no_copies,
        )  # fmt: skip

    @decided_again_if_copied
    def approve_many(
        self, proposal_ids: Sequence[str], *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves many queued proposals with one reason. Each is checked as
        ``decide`` checks one and audited as ``decide`` audits one, and every approval
        commits in one transaction: one that cannot be approved refuses them all."""
        access.require_curator(principal, "approve or reject proposals")
        checked = checked_reason(reason)
        if not checked or not checked.strip():
            raise InvalidInput("a bulk approval needs a reason", field="reason")
        if not proposal_ids:
            raise InvalidInput("choose at least one proposal", field="proposal_ids")
        if len(proposal_ids) > MAX_BULK_DECISIONS:
            raise InvalidInput(
                f"approve at most {MAX_BULK_DECISIONS} proposals at a time", field="proposal_ids"
            )
        if len(set(proposal_ids)) != len(proposal_ids):
            raise InvalidInput("a proposal is listed twice", field="proposal_ids")
        proposals = [self._pending(pid, principal) for pid in proposal_ids]
        # Trigger: two approvals that write one record, or two new records with one content.
        # Why: each was planned against the store as it is, so the second would overwrite
        # the first or duplicate it. Outcome: refused; approve such proposals one by one.
        targets: set[str] = set()
        contents: set[tuple[str, str]] = set()
        no_copies: dict[str, ExpectNoCopies | None] = {}
        for proposal in proposals:
            if proposal.record_id is not None:
                if proposal.record_id in targets:
                    raise Conflict(
                        f"two of these proposals change {proposal.record_id}: approve them "
                        "one at a time",
                        field="proposal_ids",
                    )
                targets.add(proposal.record_id)
            seen = no_copies[proposal.id] = self._check_approvable(proposal, principal)
            # two of them bringing the same content (a create, an update, a supersession)
            for key in _contents_of(seen):
                if key in contents:
                    raise Conflict(
                        f"proposal {proposal.id} has the same content as another of these",
                        field="proposal_ids",
                    )
                contents.add(key)
        now = self.clock()
        outcomes: list[ProposalOutcome] = []
        changesets: list[ChangeSet] = []
        for proposal in proposals:
            outcome, changeset = self._acceptance(
                proposal, principal, rule="curator", reason=checked, auto=False, stored=True,
                now=now, bulk=True, also_expects=no_copies[proposal.id],
            )  # fmt: skip
            outcomes.append(outcome)
            changesets.append(changeset)
        self._write(changesets)
        return outcomes

    def _check_approvable(self, proposal: Proposal, principal: Principal) -> ExpectNoCopies | None:
        """Raise unless a curator may approve the pending ``proposal`` as it stands; what its
        commit must still find (no copy of its content stored meanwhile)."""
        if self.is_stale(proposal):
            raise StaleProposal(
                f"proposal {proposal.id} is stale: the version it was based on is no longer "
                f"current; run 'cairn rebase {proposal.id}' and review the new proposal",
                proposal_id=proposal.id,
            )
        self._validate(proposal, principal)
        duplicate, no_copies = self._duplicate_of(proposal, principal)
        if duplicate is not None:
            # Nothing is written: an automatic rejection would store the duplicate's id and
            # title in a reason the proposer reads, and the proposer may not see that record.
            raise DuplicateContent(
                f"proposal {proposal.id} duplicates record {duplicate.id} "
                f"({duplicate.content.title!r}) in {duplicate.scope}; reject it with a reason, "
                f"or update {duplicate.id} instead",
                proposal_id=proposal.id,
                existing_record_id=duplicate.id,
            )
        return no_copies

    def rebase(self, proposal_id: str, *, principal: Principal) -> ProposalOutcome:
        """Re-pin a stale proposal on the current version as a new, linked proposal."""
        old = self._pending(proposal_id, principal)
        if not self.is_stale(old):
            raise Conflict(f"proposal {old.id} is not stale; review it as it is")
        now = self.clock()
        new = old.model_copy(
            update={
                "id": new_id("prp"),
                "created_at": now,
                "base_version_id": self._current_version_id(old),
                "base_baseline_id": self._base_baseline_id(old.change, old.scope),
                # the proposer stays the author; the audit entry records who rebased
                "rebased_from": old.id,
            }
        )
        retired = old.model_copy(
            update={"status": ProposalStatus.REBASED, "rebased_to": new.id, "decided_at": now}
        )
        audit = self._audit(
            principal,
            "rebase",
            subject=old.record_id,
            proposal=new,
            reason="rebased on head",
            details={"from_proposal": old.id, "base_version_id": new.base_version_id},
        )
        rebased_to = PutEdge(self._bookkeeping("REBASED_TO", old.id, new.id, new, now))
        self._commit(
            audit,
            [PutProposal(retired), PutProposal(new), rebased_to],
            expects=[ExpectProposal(old.id, ProposalStatus.PENDING)],
        )
        return ProposalOutcome(proposal=new, decision=Verdict.QUEUE)

    # ---- helpers ---------------------------------------------------------------------

    def relink(
        self,
        record: Record,
        links: Sequence[PathLink],
        to: Status,
        *,
        principal: Principal,
        reason: str,
    ) -> ProposalOutcome:
        """Drift detection's write: a system lifecycle move plus the links' drift flags,
        as one accepted proposal (rule ``drift``) in one transaction."""
        lifecycle.check_transition(record.status, to, principal)
        now = self.clock()
        moved = record.model_copy(
            update={"status": to, "updated_at": now, "status_changed_at": now}
        )
        change = TransitionChange(record_id=record.id, to=to)
        made = self._proposal(
            change,
            principal,
            scope=record.scope,
            now=now,
            target=record,
            base_version_id=record.current_version_id,
            reason=reason,
        )
        proposal = closed(
            made,
            ProposalStatus.ACCEPTED,
            principal,
            rule="drift",
            reason=reason,
            now=now,
            result_record_id=record.id,
        )
        writes: list[Write] = [PutProposal(proposal), PutRecord(moved)]
        writes += [PutPathLink(link) for link in links]
        audit = self._audit(
            principal,
            "approve",
            subject=record.id,
            proposal=proposal,
            rule="drift",
            reason=reason,
            from_status=record.status,
            to_status=to,
            details={"op": "transition", "auto": True, "paths": [link.path for link in links]},
        )
        self._commit(
            audit,
            writes,
            expects=[ExpectRecord(record.id, record.current_version_id, record.status)],
        )
        return ProposalOutcome(proposal=proposal, decision=Verdict.APPROVE, record=moved)
