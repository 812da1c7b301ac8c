"""The Librarian: the single governed write path.

Every mutation arrives as a ``Proposal`` pinned to the version it was based on. The gate
checks who is asking (role limits are not policy), validates the change, asks the policy,
and commits the outcome, the change and exactly one audit entry in one transaction. It is
the only caller of ``Store.commit`` (tests/governance/test_zero_bypass.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NoReturn

from cairn.errors import (
    Conflict,
    DuplicateContent,
    InvalidInput,
    NotFound,
    PermissionDenied,
    StaleProposal,
    SupersessionCycle,
)
from cairn.governance import access, lifecycle, links
from cairn.governance._gc import collector_paused
from cairn.governance.policy import Policy, ProposalFacts, evaluate
from cairn.limits import (
    MAX_BULK_DECISIONS,
    MAX_EVENT_BATCH,
    MAX_LIST_ITEMS,
    MAX_REASON_CHARS,
    MAX_RECORD_BATCH,
    LimitExceeded,
    check_text,
    is_id,
)
from cairn.model import (
    AppendReport,
    AuditEntry,
    Baseline,
    Change,
    Confidence,
    Content,
    ContentPatch,
    CreateChange,
    Edge,
    EdgeDraft,
    Event,
    EventDraft,
    LinkChange,
    Origin,
    PathLink,
    Principal,
    PrincipalKind,
    Proposal,
    ProposalOutcome,
    ProposalStatus,
    PublishChange,
    Record,
    Status,
    SupersedeChange,
    TransitionChange,
    UnlinkChange,
    UpdateChange,
    Verdict,
    Version,
    new_id,
    utcnow,
)
from cairn.store.base import (
    ChangeSet,
    ChunkDraft,
    ExpectProposal,
    ExpectPublished,
    ExpectRecord,
    Precondition,
    PutBaseline,
    PutBatch,
    PutEdge,
    PutEvents,
    PutPathLink,
    PutProposal,
    PutRecord,
    PutTocNode,
    PutVersion,
    SetPublished,
    Store,
    Write,
)

__all__ = [
    "Chunker",
    "Gate",
    "GraphLink",
    "PathHasher",
]

PathHasher = Callable[[str], str | None]
Chunker = Callable[[Content], tuple[ChunkDraft, ...]]


@dataclass
class _Plan:
    """What accepting a proposal would write, before it is committed."""

    writes: list[Write]
    expects: list[Precondition]
    record: Record | None = None
    version: Version | None = None
    from_status: Status | None = None
    to_status: Status | None = None
    subject: str | None = None
    edge: Edge | None = None


@dataclass(frozen=True)
class GraphLink:
    """One edge of a graph written whole (``Gate.submit_graph``): its draft (whose own
    ``src``/``dst`` are replaced) and its ends, each a stored record's id or the index of
    a record the same graph creates."""

    draft: EdgeDraft
    src: str | int
    dst: str | int


_ORIGIN_OF: dict[PrincipalKind, Origin] = {
    PrincipalKind.AGENT: Origin.AGENT,
    PrincipalKind.HUMAN: Origin.HUMAN,
    PrincipalKind.SYSTEM: Origin.SYSTEM,
}


def _checked_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    try:
        return check_text(reason, "reason", MAX_REASON_CHARS)
    except LimitExceeded as exc:
        raise InvalidInput(str(exc), field="reason") from None


def _no_files(path: str) -> str | None:
    return None


def _no_chunks(content: Content) -> tuple[ChunkDraft, ...]:
    return ()


def _duplicates(record: Record, proposal_record_id: str | None, principal: Principal) -> bool:
    """Whether stored ``record``, found by content hash, is what a proposal (of a change to
    ``proposal_record_id``, if any) duplicates: another record, still live, that
    ``principal`` may read (one it may not read is never named: the check is no oracle)."""
    return (
        record.id != proposal_record_id
        and record.status not in (Status.REJECTED, Status.ARCHIVED)
        and access.can_read(principal, record.scope, record.content.acl)
    )


def _duplicate_feedback(existing: Record) -> str:
    return (
        f"Rejected: duplicate content. Hash {existing.content.content_hash()[:12]} matches "
        f"existing record {existing.id} ({existing.content.title!r}, "
        f"v{existing.current_version}) in scope {existing.scope}. "
        f"Consider updating {existing.id} instead."
    )


def _closed(
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


def _create(change: Change) -> CreateChange:
    assert isinstance(change, CreateChange)  # stamping keeps a change's type
    return change


def _counts(values: Iterable[str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return counted


class Gate:
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

    # ---- batching: many new records, one transaction -------------------------------------

    def submit_many(
        self,
        changes: Sequence[CreateChange],
        principal: Principal,
        *,
        kernel_provenance: bool = False,
    ) -> list[ProposalOutcome]:
        """Propose many new records; every decision commits in one transaction, or none
        does, audited by one entry naming every record and proposal the batch made.

        Each record gets what ``submit`` gives one: its scope and kind are checked, its
        content stamped, its duplicates looked for (among stored records the principal may
        read and the batch's earlier records), and the policy decides on it. Duplicates are
        rejected item by item; a refusal of the caller (op, scope, kind, limits) refuses the
        whole batch with nothing written. What is the same for many records is done once:
        a scope or kind is checked once, the policy asked once per set of facts its rules
        can tell apart, the stored duplicates looked up with one query per scope, and every
        table written with one statement."""
        if len(changes) > MAX_RECORD_BATCH:
            raise InvalidInput(
                f"send at most {MAX_RECORD_BATCH} records at a time", field="contents"
            )
        if not changes:
            return []
        with collector_paused():
            return self._submit_many(changes, principal, kernel_provenance=kernel_provenance)

    def _submit_many(
        self, changes: Sequence[CreateChange], principal: Principal, *, kernel_provenance: bool
    ) -> list[ProposalOutcome]:
        access.require_op(principal, "create")
        if not kernel_provenance:
            changes = [_create(self._stamp(change, principal)) for change in changes]
        checked: set[tuple[str, str]] = set()
        for change in changes:
            content = change.content
            if ("scope", content.scope) not in checked:
                access.require_scope(principal, content.scope)
                checked.add(("scope", content.scope))
            if ("kind", content.kind) not in checked:
                self.policy.check_kind(content.kind)
                checked.add(("kind", content.kind))
        hashes = [change.content.content_hash() for change in changes]
        stored = self._stored_duplicates(changes, hashes, principal)
        made: dict[tuple[str, str], Record] = {}  # the batch's records, by scope and hash
        rulings: dict[Hashable, tuple[Verdict, str, str | None]] = {}
        now = self.clock()
        outcomes: list[ProposalOutcome] = []
        writes: list[Write] = []
        for change, content_hash in zip(changes, hashes, strict=True):
            proposal = self._proposal(change, principal, scope=change.content.scope, now=now)
            key = (change.content.scope, content_hash)
            existing = made.get(key) or stored.get(key)
            if existing is not None:
                outcome = self._rejected(
                    proposal, principal, rule="duplicate_content",
                    feedback=_duplicate_feedback(existing), now=now,
                )  # fmt: skip
                writes.append(PutProposal(outcome.proposal))
            else:
                decision_key = self._decision_key(proposal, principal)
                ruling = rulings.get(decision_key)
                if ruling is None:
                    ruling = rulings[decision_key] = self._ruling(proposal, principal, None)
                outcome, done = self._decided(proposal, principal, ruling, now=now)
                writes += done
                if outcome.record is not None:
                    made[key] = outcome.record
            outcomes.append(outcome)
        audit = self._audit(
            principal,
            "batch",
            subject=None,
            details={
                "op": "create",
                "records": [o.record.id for o in outcomes if o.record is not None],
                "proposals": [o.proposal.id for o in outcomes],
                "decisions": _counts(o.decision.value for o in outcomes),
                "rules": _counts(o.proposal.rule or "" for o in outcomes),
            },
        )
        self._write([ChangeSet(audit=audit, writes=(PutBatch.of(writes),))])
        return outcomes

    def _stored_duplicates(
        self, changes: Sequence[CreateChange], hashes: Sequence[str], principal: Principal
    ) -> dict[tuple[str, str], Record]:
        """For each (scope, content hash) of the batch, the stored record ``submit`` would
        call its duplicate, if any: one query per scope."""
        wanted: dict[str, set[str]] = {}
        for change, content_hash in zip(changes, hashes, strict=True):
            wanted.setdefault(change.content.scope, set()).add(content_hash)
        found: dict[tuple[str, str], Record] = {}
        for scope, scope_hashes in wanted.items():
            for record in self.store.find_by_hashes(scope, sorted(scope_hashes)):
                key = (scope, record.content.content_hash())
                if key not in found and _duplicates(record, None, principal):
                    found[key] = record
        return found

    def _decision_key(self, proposal: Proposal, principal: Principal) -> Hashable:
        """What the ruling on a new record depends on: its policy facts, as far as the
        policy's rules tell them apart (``Policy.facts_key``), and the principal."""
        return (
            principal.id,
            principal.kind,
            self.policy.facts_key(self._facts(proposal, principal)),
        )

    # ---- a whole graph: vertices and the edges between them, one transaction -----------

    def submit_graph(
        self,
        creates: Sequence[Content],
        updates: Sequence[tuple[str, Content]],
        edges: Sequence[GraphLink],
        principal: Principal,
        *,
        reason: str,
        unlinks: Sequence[str] = (),
    ) -> list[ProposalOutcome]:
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
        outcomes: list[ProposalOutcome] = []

        def approve(proposal: Proposal, target: Record | None, plan: _Plan | None) -> None:
            verdict, rule, why = self._ruling(proposal, principal, target)
            if verdict is not Verdict.APPROVE:
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
            change = _create(self._stamp(CreateChange(content=content), principal))
            access.require_scope(principal, change.content.scope)
            self.policy.check_kind(change.content.kind)
            proposal = self._proposal(change, principal, scope=change.content.scope, now=now)
            approve(proposal, None, None)
            assert outcomes[-1].record is not None
            made.append(outcomes[-1].record)
        for record_id, content in updates:
            target = self._record(record_id)
            access.require_scope(principal, target.scope)
            patch = ContentPatch(**{
                name: getattr(content, name)
                for name in ("title", "body", "tags", "metadata", "acl", "valid_from", "valid_to")
            })  # fmt: skip
            update = self._stamp(UpdateChange(record_id=record_id, patch=patch), principal)
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
            unlink = self._stamp(UnlinkChange(edge_id=edge_id), principal)
            proposal = self._proposal(unlink, principal, scope=stored.scope, now=now)
            removed = links.removed_edge(stored, actor=principal.id, now=now)
            approve(
                proposal, None,
                _Plan(writes=[PutEdge(removed)], expects=[], subject=removed.id, edge=removed),
            )  # fmt: skip
        for link in edges:
            src, dst = end_record(link.src), end_record(link.dst)
            draft = link.draft.model_copy(
                update={"src": src.id, "dst": dst.id, "origin": _ORIGIN_OF[principal.kind]}
            )
            links.check_ends(self.policy, draft, src, dst)
            proposal = self._proposal(LinkChange(edge=draft), principal, scope=src.scope, now=now)
            edge = links.linked_edge(
                draft, src, actor=principal.id, proposal_id=proposal.id, now=now
            )
            approve(
                proposal, None,
                _Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge),
            )  # fmt: skip
        if changesets:
            with collector_paused():
                self._write(changesets)
        return outcomes

    # ---- public verbs ----------------------------------------------------------------

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
        reason = _checked_reason(reason)
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
        duplicate = self._duplicate_of(proposal, principal)
        if duplicate is not None:
            self._reject_duplicate(proposal, principal, duplicate)
        decision, rule, why = self._ruling(proposal, principal, target)
        if decision is Verdict.APPROVE:
            return self._accept(proposal, principal, rule=rule, reason=why, auto=True, stored=False)
        if decision is Verdict.REJECT:
            return self._reject(proposal, principal, rule=rule, reason=why or "", stored=False)
        return self._queue(proposal, principal, rule=rule, reason=why)

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
            base_baseline_id=(
                self.store.published_baseline_id(scope)
                if isinstance(change, PublishChange)
                else None
            ),
            principal_id=principal.id,
            principal_roles=principal.roles,
            status=ProposalStatus.PENDING,
            created_at=now,
            reason=reason,
        )

    def _ruling(
        self, proposal: Proposal, principal: Principal, target: Record | None
    ) -> tuple[Verdict, str, str | None]:
        """What the gate decides on a checked proposal that duplicates nothing: the
        decision, the rule that made it and the reason it gives."""
        if principal.kind is PrincipalKind.SYSTEM:
            # Trigger: drift, retention and other system housekeeping. Why: these moves are
            # fixed by the lifecycle and must not wait on a policy a user may have edited.
            return Verdict.APPROVE, "system", proposal.reason
        decision, rule, why = evaluate(self.policy, self._facts(proposal, principal))
        if decision is Verdict.APPROVE:
            forced = self._needs_review(proposal, principal, target)
            if forced is not None:
                return Verdict.QUEUE, *forced
            return decision, rule, why or proposal.reason
        if decision is Verdict.REJECT:
            return decision, rule, why or "refused by policy"
        return decision, rule, why

    def decide(
        self, proposal_id: str, *, approve: bool, principal: Principal, reason: str | None = None
    ) -> ProposalOutcome:
        """A curator approves or rejects a queued proposal."""
        access.require_curator(principal, "approve or reject proposals")
        reason = _checked_reason(reason)
        proposal = self._pending(proposal_id, principal)
        if not approve:
            if not reason or not reason.strip():
                raise InvalidInput("a rejection needs a reason", field="reason")
            return self._reject(proposal, principal, rule="curator", reason=reason, stored=True)
        self._check_approvable(proposal, principal)
        return self._accept(
            proposal, principal, rule="curator", reason=reason, auto=False, stored=True
        )

    def approve_many(
        self, proposal_ids: Sequence[str], *, principal: Principal, reason: str
    ) -> list[ProposalOutcome]:
        """A curator approves many queued proposals with one reason. Each is checked as
        ``decide`` checks one and audited as ``decide`` audits one, and every approval
        commits in one transaction: one that cannot be approved refuses them all."""
        access.require_curator(principal, "approve or reject proposals")
        checked = _checked_reason(reason)
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
        for proposal in proposals:
            if proposal.record_id is not None:
                if proposal.record_id in targets:
                    raise Conflict(
                        f"two of these proposals change {proposal.record_id}: approve them "
                        "one at a time",
                        field="proposal_ids",
                    )
                targets.add(proposal.record_id)
            if isinstance(proposal.change, CreateChange):
                key = (proposal.scope, proposal.change.content.content_hash())
                if key in contents:
                    raise Conflict(
                        f"proposal {proposal.id} has the same content as another of these",
                        field="proposal_ids",
                    )
                contents.add(key)
            self._check_approvable(proposal, principal)
        now = self.clock()
        outcomes: list[ProposalOutcome] = []
        changesets: list[ChangeSet] = []
        for proposal in proposals:
            outcome, changeset = self._acceptance(
                proposal, principal, rule="curator", reason=checked, auto=False, stored=True,
                now=now, bulk=True,
            )  # fmt: skip
            outcomes.append(outcome)
            changesets.append(changeset)
        self._write(changesets)
        return outcomes

    def _check_approvable(self, proposal: Proposal, principal: Principal) -> None:
        """Raise unless a curator may approve the pending ``proposal`` as it stands."""
        if self.is_stale(proposal):
            raise StaleProposal(
                f"proposal {proposal.id} is stale: the version it was based on is no longer "
                f"current; run 'cairn rebase {proposal.id}' and review the new proposal",
                proposal_id=proposal.id,
            )
        self._validate(proposal, principal)
        duplicate = self._duplicate_of(proposal, principal)
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
                "base_baseline_id": (
                    self.store.published_baseline_id(old.scope)
                    if isinstance(old.change, PublishChange)
                    else None
                ),
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
        self._write(
            [
                ChangeSet(
                    audit=audit,
                    writes=(
                        PutProposal(retired),
                        PutProposal(new),
                        PutEdge(self._bookkeeping("REBASED_TO", old.id, new.id, new, now)),
                    ),
                    expects=(ExpectProposal(old.id, ProposalStatus.PENDING),),
                )
            ]
        )
        return ProposalOutcome(proposal=new, decision=Verdict.QUEUE)

    def is_stale(self, proposal: Proposal) -> bool:
        if isinstance(proposal.change, PublishChange):
            return self.store.published_baseline_id(proposal.scope) != proposal.base_baseline_id
        if proposal.record_id is None:
            return False
        return self._current_version_id(proposal) != proposal.base_version_id

    # ---- checks ----------------------------------------------------------------------

    def _stamp(self, change: Change, principal: Principal) -> Change:
        """Origin and provenance are facts about who wrote, not claims: the origin is the
        principal's kind, ``provenance.source_kind`` is the kernel's to set (ingest), and
        agents cannot vouch for a memory beyond "supported"."""
        origin = _ORIGIN_OF[principal.kind]

        def confidence(value: Confidence) -> Confidence:
            if principal.kind is PrincipalKind.AGENT and value is Confidence.VERIFIED:
                return Confidence.SUPPORTED
            return value

        def fix(content: Content) -> Content:
            provenance = content.provenance
            updates: dict[str, object] = {}
            if content.origin is not origin:
                updates["origin"] = origin
            if confidence(content.confidence) is not content.confidence:
                updates["confidence"] = confidence(content.confidence)
            if provenance.source_kind is not None:
                updates["provenance"] = provenance.model_copy(update={"source_kind": None})
            # Copies cost; a batch stamps thousands of contents that need nothing changed.
            return content.model_copy(update=updates) if updates else content

        if isinstance(change, CreateChange):
            content = fix(change.content)
            if content is change.content:
                return change
            return change.model_copy(update={"content": content})
        if isinstance(change, LinkChange):
            return change.model_copy(
                update={"edge": change.edge.model_copy(update={"origin": origin})}
            )
        if isinstance(change, SupersedeChange) and change.content is not None:
            return change.model_copy(update={"content": fix(change.content)})
        if isinstance(change, UpdateChange):
            patch = change.patch
            updates: dict[str, object] = {"origin": origin}
            if patch.confidence is not None:
                updates["confidence"] = confidence(patch.confidence)
            if patch.provenance is not None:
                updates["provenance"] = patch.provenance.model_copy(update={"source_kind": None})
            return change.model_copy(update={"patch": patch.model_copy(update=updates)})
        return change

    def _needs_review(
        self, proposal: Proposal, principal: Principal, target: Record | None
    ) -> tuple[str, str] | None:
        """Changes a policy may never approve by itself for a non-curator: an edit that
        changes who may read a record, and any edit of a record someone else wrote or a
        human wrote or verified. Returns the rule and reason that queue it, or None."""
        if access.is_curator(principal):
            return None
        change = proposal.change
        if isinstance(change, LinkChange):
            if change.edge.acl is not None:
                source = self._record(change.edge.src)
                if change.edge.acl != links.default_acl(source):
                    return (
                        "acl-change-needs-review",
                        "choosing who may read an edge needs a curator",
                    )
            return None
        if isinstance(change, UnlinkChange):
            edge = self.store.get_edge(change.edge_id)
            if edge is not None and edge.created_by != principal.id:
                return "others-edges-need-review", "the edge was made by someone else"
            return None
        if target is None:
            return None
        change = proposal.change
        if isinstance(change, UpdateChange):
            acl = change.patch.acl
            if acl is not None and acl != target.content.acl:
                return "acl-change-needs-review", "changing who may read a record needs a curator"
        elif not isinstance(change, SupersedeChange):
            return None
        if target.created_by != principal.id:
            return "others-records-need-review", "the record was written by someone else"
        if (
            target.content.origin is Origin.HUMAN
            or target.content.confidence is Confidence.VERIFIED
        ):
            return "human-records-need-review", "a human wrote or verified this record"
        return None

    def _visible(self, record_id: str, principal: Principal) -> Record:
        record = self.store.get_record(record_id) if is_id(record_id) else None
        if record is None or not access.can_read(principal, record.scope, record.content.acl):
            raise NotFound(f"no record {record_id}", field="record_id")
        return record

    def _target(self, change: Change, principal: Principal) -> Record | None:
        """The record a change is pinned to (its version goes stale when that moves on).
        An edge pins no record: a link stays valid while its ends get new versions."""
        if isinstance(change, CreateChange | PublishChange | LinkChange | UnlinkChange):
            return None
        return self._visible(change.record_id, principal)

    def _scope_of(self, change: Change, target: Record | None, principal: Principal) -> str:
        if isinstance(change, CreateChange):
            return change.content.scope
        if isinstance(change, PublishChange):
            return change.scope
        if isinstance(change, LinkChange):
            # the edge lives in its source's scope; an unreadable source is "not found"
            return links.check_link(self.store, self.policy, change.edge, principal)[0].scope
        if isinstance(change, UnlinkChange):
            return links.visible_edge(self.store, change.edge_id, principal).scope
        assert target is not None
        return target.scope

    def _validate(self, proposal: Proposal, principal: Principal) -> None:
        change = proposal.change
        if isinstance(change, CreateChange):
            self.policy.check_kind(change.content.kind)
        elif isinstance(change, UpdateChange):
            if change.patch.is_empty():
                raise InvalidInput("an update must change at least one field", field="patch")
            record = self._record(change.record_id)
            new = change.patch.apply(record.content)
            if new.model_copy(update={"origin": record.content.origin}) == record.content:
                raise InvalidInput("the update changes nothing", field="patch")
            if record.status in (Status.ARCHIVED, Status.REJECTED):
                raise InvalidInput(f"{record.status.value} records cannot be updated")
        elif isinstance(change, SupersedeChange):
            self._check_supersede(change, principal)
        elif isinstance(change, TransitionChange):
            record = self._record(change.record_id)
            lifecycle.check_transition(record.status, change.to, principal)
        elif isinstance(change, LinkChange):
            links.check_link(self.store, self.policy, change.edge, principal)
        elif isinstance(change, UnlinkChange):
            edge = links.visible_edge(self.store, change.edge_id, principal)
            links.removed_edge(edge, actor=principal.id, now=self.clock())
        else:
            self._check_publish(change, principal)

    def _check_supersede(self, change: SupersedeChange, principal: Principal) -> None:
        old = self._record(change.record_id)
        if old.superseded_by:
            successor = self.store.get_record(old.superseded_by)
            # Name the successor only to a principal who may read it.
            named = (
                f" by {successor.id}"
                if successor is not None
                and access.can_read(principal, successor.scope, successor.content.acl)
                else ""
            )
            raise Conflict(
                f"{old.id} is already superseded{named}; supersede its successor instead",
                field="record_id",
            )
        if change.content is not None:
            self.policy.check_kind(change.content.kind)
            if change.content.scope != old.scope:
                raise InvalidInput("a replacement must live in the same scope", field="scope")
            return
        assert change.by is not None
        if change.by == old.id:
            raise SupersessionCycle("a record cannot supersede itself", field="by")
        replacement = self._visible(change.by, principal)
        seen = {old.id}
        cursor: Record | None = replacement
        while cursor is not None:
            if cursor.id in seen:
                raise SupersessionCycle(
                    f"superseding {old.id} by {replacement.id} would make a cycle", field="by"
                )
            seen.add(cursor.id)
            cursor = self.store.get_record(cursor.superseded_by) if cursor.superseded_by else None

    def _check_publish(self, change: PublishChange, principal: Principal) -> None:
        access.require_curator(principal, "publish")
        for record_id, version_id in change.pins.items():
            record = self._visible(record_id, principal)
            if record.scope != change.scope:
                raise InvalidInput(f"{record_id} is not in scope {change.scope}", field="pins")
            if version_id is not None:
                version = self.store.get_version(version_id)
                if version is None or version.record_id != record_id:
                    raise NotFound(f"no version {version_id} of {record_id}", field="pins")
            elif record.status is not Status.ACTIVE:
                raise InvalidInput(
                    f"{record_id} is {record.status.value}; only active records are published",
                    field="pins",
                )

    def _duplicate_of(self, proposal: Proposal, principal: Principal) -> Record | None:
        """An existing record with the same content in the scope, among those ``principal``
        may read: a record it may not read is never named, so the check is no oracle."""
        change = proposal.change
        if isinstance(change, CreateChange):
            content: Content | None = change.content
        elif isinstance(change, SupersedeChange):
            content = change.content
        elif isinstance(change, UpdateChange):
            content = change.patch.apply(self._record(change.record_id).content)
        else:
            content = None
        if content is None:
            return None
        for record in self.store.find_by_hashes(content.scope, [content.content_hash()]):
            if _duplicates(record, proposal.record_id, principal):
                return record
        return None

    def _facts(self, proposal: Proposal, principal: Principal) -> ProposalFacts:
        change = proposal.change
        kind: str | None = None
        origin: Origin | None = None
        metadata: dict[str, object] = {}
        draft = False
        if isinstance(change, CreateChange):
            kind, origin = change.content.kind, change.content.origin
            metadata, draft = change.content.metadata, change.draft
        elif isinstance(change, SupersedeChange) and change.content is not None:
            kind, origin, metadata = (
                change.content.kind,
                change.content.origin,
                change.content.metadata,
            )
        elif proposal.record_id is not None:
            record = self._record(proposal.record_id)
            kind, origin, metadata = record.kind, record.content.origin, record.content.metadata
            if isinstance(change, UpdateChange) and change.patch.metadata is not None:
                metadata = change.patch.metadata
        relation: str | None = None
        if isinstance(change, LinkChange):
            relation, metadata = change.edge.type, change.edge.metadata
        elif isinstance(change, UnlinkChange):
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

    # ---- outcomes: what each decision writes, then audited and committed one by one ----

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
        rejected = _closed(
            proposal, ProposalStatus.REJECTED, principal, rule=rule, reason=feedback, now=now
        )
        return ProposalOutcome(proposal=rejected, decision=Verdict.REJECT, feedback=feedback)

    def _accepted(
        self, proposal: Proposal, principal: Principal, *, rule: str, reason: str | None,
        now: datetime, plan: _Plan | None = None,
    ) -> tuple[ProposalOutcome, _Plan]:  # fmt: skip
        """The accepted proposal's outcome, and its plan with every write it makes (the
        proposal's own row and its ACCEPTED_AS edge included). ``plan`` is given when the
        change names records the same transaction makes (a graph's edges)."""
        plan = plan if plan is not None else self._plan(proposal, now)
        accepted = _closed(
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
        self._write([ChangeSet(audit=audit, writes=(PutProposal(outcome.proposal),))])
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
        feedback = _duplicate_feedback(existing)
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
        writes = (PutProposal(outcome.proposal),)
        self._write([ChangeSet(audit=audit, writes=writes, expects=expects)])
        return outcome

    def _accept(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        rule: str,
        reason: str | None,
        auto: bool,
        stored: bool,
    ) -> ProposalOutcome:
        outcome, changeset = self._acceptance(
            proposal, principal, rule=rule, reason=reason, auto=auto, stored=stored,
            now=self.clock(),
        )  # fmt: skip
        self._write([changeset])
        return outcome

    def _acceptance(
        self,
        proposal: Proposal,
        principal: Principal,
        *,
        rule: str,
        reason: str | None,
        auto: bool,
        stored: bool,
        now: datetime,
        bulk: bool = False,
        plan: _Plan | None = None,
    ) -> tuple[ProposalOutcome, ChangeSet]:
        """The accepted proposal's outcome and the change set (writes and audit) that
        commits it; nothing is written here."""
        outcome, plan = self._accepted(
            proposal, principal, rule=rule, reason=reason, now=now, plan=plan
        )
        expects = list(plan.expects)
        if stored:
            expects.append(ExpectProposal(proposal.id, ProposalStatus.PENDING))
        details: dict[str, object] = {
            "op": proposal.change.op,
            "auto": auto,
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

    # ---- planning: what an accepted change writes -------------------------------------

    def _pinned(self, proposal: Proposal) -> Record:
        """The proposal's target, provided its head is still the version the proposal
        pinned. Writes then expect exactly that version, so a concurrent commit between this
        read and our transaction makes the commit fail instead of overwriting newer truth."""
        assert proposal.record_id is not None
        record = self._record(proposal.record_id)
        if proposal.base_version_id and record.current_version_id != proposal.base_version_id:
            # The proposal may not be stored (an automatic decision): name only the record.
            raise StaleProposal(
                f"{record.id} moved on to v{record.current_version} meanwhile; "
                "read it again and propose the change on the new version",
                record_id=record.id,
            )
        return record

    def _plan(self, proposal: Proposal, now: datetime) -> _Plan:
        change = proposal.change
        actor = proposal.principal_id
        if isinstance(change, CreateChange):
            status = Status.DRAFT if change.draft else Status.ACTIVE
            plan = self._plan_create(change.content, status, actor, proposal.id, now)
            for path in change.paths:
                plan.writes.append(
                    PutPathLink(
                        PathLink(
                            record_id=plan.record.id if plan.record else "",
                            path=path,
                            content_hash=self.path_hasher(path),
                        )
                    )
                )
            return plan
        if isinstance(change, UpdateChange):
            record = self._pinned(proposal)
            return self._plan_new_version(
                record, change.patch.apply(record.content), actor, proposal.id, now
            )
        if isinstance(change, SupersedeChange):
            return self._plan_supersede(change, proposal, actor, now)
        if isinstance(change, LinkChange):
            source = self._record(change.edge.src)
            edge = links.linked_edge(
                change.edge,
                source,
                actor=actor,
                proposal_id=proposal.id,
                now=now,
            )
            return _Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge)
        if isinstance(change, UnlinkChange):
            stored = self.store.get_edge(change.edge_id)
            if stored is None:
                raise NotFound(f"no edge {change.edge_id}", field="edge_id")
            edge = links.removed_edge(stored, actor=actor, now=now)
            return _Plan(writes=[PutEdge(edge)], expects=[], subject=edge.id, edge=edge)
        if isinstance(change, TransitionChange):
            record = self._pinned(proposal)
            moved = record.model_copy(
                update={"status": change.to, "updated_at": now, "status_changed_at": now}
            )
            return _Plan(
                writes=[PutRecord(moved)],
                expects=[ExpectRecord(record.id, record.current_version_id, record.status)],
                record=moved,
                from_status=record.status,
                to_status=change.to,
            )
        return self._plan_publish(change, proposal, now)

    def _plan_create(
        self, content: Content, status: Status, actor: str, proposal_id: str, now: datetime
    ) -> _Plan:
        record_id = new_id("rec")
        version = Version(
            id=new_id("ver"),
            record_id=record_id,
            number=1,
            content=content,
            content_hash=content.content_hash(),
            created_at=now,
            created_by=actor,
            proposal_id=proposal_id,
        )
        record = Record(
            id=record_id,
            kind=content.kind,
            scope=content.scope,
            status=status,
            current_version_id=version.id,
            current_version=1,
            created_at=now,
            updated_at=now,
            status_changed_at=now,
            created_by=actor,
            content=content,
        )
        return _Plan(
            writes=[PutRecord(record), PutVersion(version, self.chunker(content))],
            expects=[ExpectRecord(record_id, None)],
            record=record,
            version=version,
            to_status=status,
        )

    def _plan_new_version(
        self, record: Record, content: Content, actor: str, proposal_id: str, now: datetime
    ) -> _Plan:
        if content.kind != record.kind or content.scope != record.scope:
            raise InvalidInput("an update cannot change a record's kind or scope")
        version = Version(
            id=new_id("ver"),
            record_id=record.id,
            number=record.current_version + 1,
            content=content,
            content_hash=content.content_hash(),
            created_at=now,
            created_by=actor,
            proposal_id=proposal_id,
        )
        updated = record.model_copy(
            update={
                "current_version_id": version.id,
                "current_version": version.number,
                "updated_at": now,
                "content": content,
            }
        )
        return _Plan(
            writes=[PutRecord(updated), PutVersion(version, self.chunker(content))],
            expects=[ExpectRecord(record.id, record.current_version_id)],
            record=updated,
            version=version,
        )

    def _plan_supersede(
        self, change: SupersedeChange, proposal: Proposal, actor: str, now: datetime
    ) -> _Plan:
        proposal_id = proposal.id
        old = self._pinned(proposal)
        if change.content is not None:
            plan = self._plan_create(change.content, Status.ACTIVE, actor, proposal_id, now)
            assert plan.record is not None
            new_id_ = plan.record.id
        else:
            assert change.by is not None
            replacement = self._record(change.by)
            plan = _Plan(
                writes=[],
                expects=[ExpectRecord(replacement.id, replacement.current_version_id)],
                record=replacement,
            )
            new_id_ = replacement.id
        retired = old.model_copy(update={"superseded_by": new_id_, "updated_at": now})
        assert plan.record is not None
        supersedes = links.system_edge(
            "SUPERSEDES",
            new_id_,
            old.id,
            scope=old.scope,
            acl=plan.record.content.acl,
            now=now,
            proposal_id=proposal_id,
        )
        plan.writes += [PutRecord(retired), PutEdge(supersedes)]
        plan.expects.append(ExpectRecord(old.id, old.current_version_id))
        return plan

    def _plan_publish(self, change: PublishChange, proposal: Proposal, now: datetime) -> _Plan:
        pins: dict[str, str] = {}
        previous_id = self.store.published_baseline_id(change.scope)
        if previous_id and not change.replace:
            previous = self.store.get_baseline(previous_id)
            pins.update(previous.pins if previous else {})
        for record_id, version_id in change.pins.items():
            pins[record_id] = version_id or self._record(record_id).current_version_id
        baseline = Baseline(
            id=new_id("bsl"),
            scope=change.scope,
            name=change.name,
            pins=pins,
            created_at=now,
            created_by=proposal.principal_id,
            proposal_id=proposal.id,
        )
        return _Plan(
            writes=[PutBaseline(baseline), SetPublished(change.scope, baseline.id)],
            expects=[ExpectPublished(change.scope, previous_id)],
            subject=baseline.id,
        )

    # ---- events ----------------------------------------------------------------------

    def append_events(self, drafts: Sequence[EventDraft], principal: Principal) -> AppendReport:
        """Append a batch of events in one transaction with one audit entry. Each event is
        stamped here (who appended it, when, and the policy's ACL). An event is identified
        by its scope and id: one already stored there with the same content is reported as
        a duplicate, with other content the whole batch is refused; the same id in another
        scope is another event."""
        rules = self.policy.events
        if not 1 <= len(drafts) <= MAX_EVENT_BATCH:
            raise InvalidInput(f"send 1 to {MAX_EVENT_BATCH} events at a time", field="events")
        sent, stored = self._vet_events(drafts, principal)
        now = self.clock()
        fresh: list[Event] = []
        for key, draft in sent.items():
            if key in stored:
                continue
            fresh.append(
                Event(
                    **draft.model_dump(), acl=rules.acl, appended_at=now, appended_by=principal.id
                )
            )
        report = AppendReport(
            stored=tuple(e.event_id for e in fresh),
            duplicates=tuple(key[1] for key in sent if key in stored),
        )
        if not fresh:
            return report
        audit = self._audit(
            principal,
            "append",
            subject=None,
            details={
                "op": "append",
                "events": len(fresh),
                "first": fresh[0].event_id,
                "last": fresh[-1].event_id,
                "scopes": sorted({e.scope for e in fresh})[:MAX_LIST_ITEMS],
            },
        )
        self._write([ChangeSet(audit=audit, writes=(PutEvents(tuple(fresh)),))])
        return report

    def check_events(self, drafts: Sequence[EventDraft], principal: Principal) -> None:
        """Everything ``append_events`` checks, for any number of events, storing nothing:
        a file appended in batches is checked whole first, so that a bad line stores no
        batch."""
        self._vet_events(drafts, principal)

    def _vet_events(
        self, drafts: Sequence[EventDraft], principal: Principal
    ) -> tuple[dict[tuple[str, str], EventDraft], set[tuple[str, str]]]:
        """The events by (scope, id), refusing an appender without an append role, a scope
        it may not write, and an id sent twice to a scope or stored there before with other
        content; and which of them are stored already, as sent. Only the caller's own
        scopes are looked at: an id taken in a scope it may not write is no concern of its."""
        rules = self.policy.events
        if not set(principal.roles) & set(rules.append_roles):
            raise PermissionDenied(
                f"{principal.id} may not append events (roles allowed: "
                f"{', '.join(rules.append_roles)})"
            )
        sent: dict[tuple[str, str], EventDraft] = {}
        for draft in drafts:
            access.require_scope(principal, draft.scope)
            key = (draft.scope, draft.event_id)
            earlier = sent.get(key)
            if earlier is not None and earlier.digest() != draft.digest():
                raise Conflict(
                    f"event {draft.event_id} is in the batch twice with different content",
                    field="event_id",
                )
            sent[key] = draft
        by_scope: dict[str, list[str]] = {}
        for scope, event_id in sent:
            by_scope.setdefault(scope, []).append(event_id)
        interned = {name: scope_id for scope_id, name in self.store.scopes().items()}
        stored: set[tuple[str, str]] = set()
        for scope, ids in by_scope.items():
            if scope not in interned:
                continue  # nothing was ever stored in it
            for start in range(0, len(ids), MAX_EVENT_BATCH):
                part = ids[start : start + MAX_EVENT_BATCH]
                for event_id, known in self.store.get_events(interned[scope], part).items():
                    if known.digest() != sent[(scope, event_id)].digest():
                        raise Conflict(
                            f"event {event_id} was appended before with other content; events "
                            "are never rewritten: send a correction as a new event",
                            field="event_id",
                        )
                    stored.add((scope, event_id))
        return sent, stored

    def write_timeline(self, writes: Sequence[PutTocNode], principal: Principal) -> None:
        """Store new versions of timeline nodes in one transaction with one audit entry.
        Nodes are derived from events by the kernel's rollup, never sent by a caller: only
        the system principal writes them."""
        if principal.kind is not PrincipalKind.SYSTEM:
            raise PermissionDenied("timeline nodes are built by cairn's rollup only")
        if not writes:
            return
        levels: dict[str, int] = {}
        for write in writes:
            levels[write.node.level.value] = levels.get(write.node.level.value, 0) + 1
        audit = self._audit(
            principal,
            "rollup",
            subject=None,
            details={"op": "rollup", "nodes": len(writes), "levels": levels},
        )
        self._write([ChangeSet(audit=audit, writes=tuple(writes))])

    # ---- helpers ---------------------------------------------------------------------

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

    def _current_version_id(self, proposal: Proposal) -> str | None:
        if proposal.record_id is None:
            return None
        record = self.store.get_record(proposal.record_id)
        return record.current_version_id if record else None

    def _pending(self, proposal_id: str, principal: Principal) -> Proposal:
        proposal = self.store.get_proposal(proposal_id) if is_id(proposal_id) else None
        if proposal is None or not access.can_see_proposal(principal, proposal):
            raise NotFound(f"no proposal {proposal_id}", field="proposal_id")
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
        proposal = Proposal(
            id=new_id("prp"),
            change=TransitionChange(record_id=record.id, to=to),
            scope=record.scope,
            record_id=record.id,
            base_version_id=record.current_version_id,
            principal_id=principal.id,
            principal_roles=principal.roles,
            status=ProposalStatus.ACCEPTED,
            created_at=now,
            reason=reason,
            rule="drift",
            decided_by=principal.id,
            decided_at=now,
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
        self._write(
            [
                ChangeSet(
                    audit=audit,
                    writes=tuple(writes),
                    expects=(ExpectRecord(record.id, record.current_version_id, record.status),),
                )
            ]
        )
        return ProposalOutcome(proposal=proposal, decision=Verdict.APPROVE, record=moved)
