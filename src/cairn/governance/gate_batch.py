"""The gate's batch path: many new records decided one by one as ``submit`` would, and
committed in one transaction under one audit entry, doing once what is the same for many."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from cairn.errors import InvalidInput
from cairn.governance import access
from cairn.governance._gc import collector_paused
from cairn.governance.gate_checks import is_live_duplicate
from cairn.governance.gate_core import as_create, decided_again_if_copied
from cairn.governance.gate_outcomes import GateOutcomes, duplicate_feedback
from cairn.governance.gate_rulings import GateRulings
from cairn.limits import MAX_RECORD_BATCH
from cairn.model import CreateChange, Principal, ProposalOutcome, Record, Verdict
from cairn.store.base import (
    NOT_COPIES,
    ExpectNoCopies,
    Precondition,
    PutBatch,
    PutProposal,
    Write,
)

__all__ = ["BatchGate"]


def _counts(values: Iterable[str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return counted


class BatchGate(GateOutcomes, GateRulings):
    """Mixed into ``Gate``: ``submit_many``."""

    @decided_again_if_copied
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
            changes = [as_create(self._stamp(change, principal)) for change in changes]
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
        stored, holders = self._stored_duplicates(changes, hashes, principal)
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
                    feedback=duplicate_feedback(existing), now=now,
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
        # What the commit must still find: no copy, stored since the check looked, of the
        # content of a record this batch writes (a queued or rejected item writes none).
        written: dict[str, set[str]] = {}
        for outcome in outcomes:
            if outcome.record is not None:
                record = outcome.record
                written.setdefault(record.scope, set()).add(record.content.content_hash())
        no_copies: list[Precondition] = [
            ExpectNoCopies(scope, frozenset(scope_hashes), holders[scope])
            for scope, scope_hashes in sorted(written.items())
        ]
        self._commit(audit, [PutBatch.of(writes)], expects=no_copies)
        return outcomes

    def _stored_duplicates(
        self, changes: Sequence[CreateChange], hashes: Sequence[str], principal: Principal
    ) -> tuple[dict[tuple[str, str], Record], dict[str, frozenset[str]]]:
        """For each (scope, content hash) of the batch, the stored record ``submit`` would
        call its duplicate, if any: one query per scope; and per scope, the records holding
        any of the batch's content that the check saw (``NOT_COPIES`` states aside)."""
        wanted: dict[str, set[str]] = {}
        for change, content_hash in zip(changes, hashes, strict=True):
            wanted.setdefault(change.content.scope, set()).add(content_hash)
        found: dict[tuple[str, str], Record] = {}
        holders: dict[str, frozenset[str]] = {}
        for scope, scope_hashes in sorted(wanted.items()):
            stored = self.store.find_by_hashes(scope, sorted(scope_hashes))
            holders[scope] = frozenset(r.id for r in stored if r.status not in NOT_COPIES)
            for record in stored:
                key = (scope, record.content.content_hash())
                if key not in found and is_live_duplicate(record, None, principal):
                    found[key] = record
        return found, holders
