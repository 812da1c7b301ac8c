"""What every part of the ``Gate`` stands on: the store and policy it writes through, the
clock, a proposal made and read back, its audit entry and system edges, and the checks
of a free-text reason."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ParamSpec, TypeVar

from cairn.errors import Conflict, CopiedMeanwhile, NotFound
from cairn.governance import links
from cairn.governance.policy import Policy
from cairn.governance.visible import visible_proposal, visible_record
from cairn.limits import MAX_REASON_CHARS, check_input
from cairn.model import (
    AuditEntry,
    Change,
    Content,
    CreateChange,
    Edge,
    Origin,
    Principal,
    PrincipalKind,
    Proposal,
    ProposalStatus,
    PublishChange,
    Record,
    Status,
    new_id,
)
from cairn.store.base import ChangeSet, ChunkDraft, Precondition, Store, Write

__all__ = [
    "ORIGIN_OF",
    "Chunker",
    "GateCore",
    "PathHasher",
    "as_create",
    "checked_reason",
    "decided_again_if_copied",
]

PathHasher = Callable[[str], str | None]


Chunker = Callable[[Content], tuple[ChunkDraft, ...]]


ORIGIN_OF: dict[PrincipalKind, Origin] = {
    PrincipalKind.AGENT: Origin.AGENT,
    PrincipalKind.HUMAN: Origin.HUMAN,
    PrincipalKind.SYSTEM: Origin.SYSTEM,
}


def checked_reason(reason: str | None) -> str | None:
    return None if reason is None else check_input(reason, "reason", MAX_REASON_CHARS)


Params = ParamSpec("Params")
Decided = TypeVar("Decided")


def decided_again_if_copied(verb: Callable[Params, Decided]) -> Callable[Params, Decided]:
    """``verb`` (a gate verb that checks for duplicates), run once more when its commit finds
    a copy of its content stored since its check looked (``CopiedMeanwhile``).

    Trigger: another writer stored the same content between the check and the commit.
    Why: the copy may be one the caller may not read, and refusing would tell them it
    exists. Outcome: decided again on the store as it now is, the change meets what it
    would have met arriving second: a copy the caller may read refuses it as a duplicate;
    one it may not read is no duplicate of its (the check never names it), and the change
    is stored beside it. Nothing was written by the first try (its commit was refused)."""

    @functools.wraps(verb)
    def decided(*args: Params.args, **kwargs: Params.kwargs) -> Decided:
        try:
            return verb(*args, **kwargs)
        except CopiedMeanwhile:
            return verb(*args, **kwargs)

    return decided


def as_create(change: Change) -> CreateChange:
    assert isinstance(change, CreateChange)  # stamping keeps a change's type
    return change


class GateCore:
    """The state every part of the gate shares, and what they all read and write with."""

    store: Store
    policy: Policy
    clock: Callable[[], datetime]
    path_hasher: PathHasher
    # Index updates commit in the same transaction as the change they index.
    chunker: Chunker
    on_commit: Callable[[], None]

    def _write(self, changesets: list[ChangeSet]) -> None:
        """Commit ``changesets`` in one transaction: ``Gate._write``, the one caller of
        ``Store.commit`` (tests/governance/test_zero_bypass.py), lives in ``gate.py``."""
        raise NotImplementedError

    def _commit(
        self,
        audit: AuditEntry,
        writes: Sequence[Write],
        *,
        expects: Sequence[Precondition] = (),
    ) -> None:
        """Commit one change set (``audit`` with its ``writes``, if ``expects`` still hold):
        what most verbs write."""
        self._write([ChangeSet(audit=audit, writes=tuple(writes), expects=tuple(expects))])

    def _proposal(
        self,
        change: Change,
        principal: Principal,
        *,
        scope: str,
        now: datetime,
        target: Record | None = None,
        base_version_id: str | None = None,
        reason: str | None = None,
    ) -> Proposal:
        """A new proposal of ``change``, pending."""
        return Proposal(
            id=new_id("prp"),
            change=change,
            scope=scope,
            record_id=target.id if target else None,
            base_version_id=base_version_id,
            base_baseline_id=self._base_baseline_id(change, scope),
            principal_id=principal.id,
            principal_roles=principal.roles,
            status=ProposalStatus.PENDING,
            created_at=now,
            reason=reason,
        )

    def _base_baseline_id(self, change: Change, scope: str) -> str | None:
        """What a publish is pinned to: the scope's published baseline as it is now (a
        change of any other kind is pinned to its record's version instead)."""
        if isinstance(change, PublishChange):
            return self.store.published_baseline_id(scope)
        return None

    def is_stale(self, proposal: Proposal) -> bool:
        if isinstance(proposal.change, PublishChange):
            return self.store.published_baseline_id(proposal.scope) != proposal.base_baseline_id
        if proposal.record_id is None:
            return False
        return self._current_version_id(proposal) != proposal.base_version_id

    def _bookkeeping(
        self, relation: str, src: str, dst: str, proposal: Proposal, now: datetime
    ) -> Edge:
        """A system edge about a proposal: read under its record's ACL, or by curators only
        when it concerns no record (a publish)."""
        record = self.store.get_record(proposal.record_id) if proposal.record_id else None
        acl = record.content.acl if record is not None else links.CURATORS_ONLY
        return links.system_edge(
            relation, src, dst, scope=proposal.scope, acl=acl, now=now, proposal_id=proposal.id
        )

    def _record(self, record_id: str) -> Record:
        record = self.store.get_record(record_id)
        if record is None:
            raise NotFound(f"no record {record_id}", field="record_id")
        return record

    def _visible(self, record_id: str, principal: Principal) -> Record:
        return visible_record(self.store, record_id, principal)

    def _current_version_id(self, proposal: Proposal) -> str | None:
        if proposal.record_id is None:
            return None
        record = self.store.get_record(proposal.record_id)
        return record.current_version_id if record else None

    def _pending(self, proposal_id: str, principal: Principal) -> Proposal:
        proposal = visible_proposal(self.store, proposal_id, principal)
        if proposal.status is not ProposalStatus.PENDING:
            raise Conflict(f"proposal {proposal_id} is already {proposal.status.value}")
        return proposal

    def _audit(
        self,
        principal: Principal,
        action: str,
        *,
        subject: str | None,
        proposal: Proposal | None = None,
        rule: str | None = None,
        reason: str | None = None,
        from_status: Status | None = None,
        to_status: Status | None = None,
        details: dict[str, object] | None = None,
    ) -> AuditEntry:
        return AuditEntry(
            id=new_id("aud"),
            at=self.clock(),
            actor=principal.id,
            actor_roles=principal.roles,
            action=action,
            subject_id=subject,
            proposal_id=proposal.id if proposal else None,
            rule=rule,
            reason=reason,
            from_status=from_status.value if from_status else None,
            to_status=to_status.value if to_status else None,
            details=dict(details or {}),
        )
