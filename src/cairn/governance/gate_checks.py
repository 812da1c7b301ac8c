"""The gate's checks of a proposal before the policy is asked: the change stamped with its
provenance, who may make it, whether its target and scope are the principal's to touch,
its own rules (supersede, publish), and whether it duplicates a stored record."""

from __future__ import annotations

from cairn import model
from cairn.errors import Conflict, InvalidInput, NotFound, SupersessionCycle
from cairn.governance import access, lifecycle, links
from cairn.governance.gate_core import ORIGIN_OF, GateCore
from cairn.model import Content, Principal, Proposal, Record
from cairn.store.base import NOT_COPIES, ExpectNoCopies

__all__ = ["GateChecks", "is_live_duplicate"]


def is_live_duplicate(record: Record, proposal_record_id: str | None, principal: Principal) -> bool:
    """Whether stored ``record``, found by content hash, is what a proposal (of a change to
    ``proposal_record_id``, if any) duplicates: another record, still live, that
    ``principal`` may read (one it may not read is never named: the check is no oracle)."""
    return (
        record.id != proposal_record_id
        and record.status not in NOT_COPIES
        and access.can_read(principal, record.scope, record.content.acl)
    )


class GateChecks(GateCore):
    """Mixed into ``Gate``: what a proposal must pass before any rule decides it."""

    def _stamp(self, change: model.Change, principal: Principal) -> model.Change:
        """Origin and provenance are facts about who wrote, not claims: the origin is the
        principal's kind, ``provenance.source_kind`` is the kernel's to set (ingest), and
        agents cannot vouch for a memory beyond "supported"."""
        origin = ORIGIN_OF[principal.kind]

        def confidence(value: model.Confidence) -> model.Confidence:
            if principal.kind is model.PrincipalKind.AGENT and value is model.Confidence.VERIFIED:
                return model.Confidence.SUPPORTED
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

        if isinstance(change, model.CreateChange):
            content = fix(change.content)
            if content is change.content:
                return change
            return change.model_copy(update={"content": content})
        if isinstance(change, model.LinkChange):
            return change.model_copy(
                update={"edge": change.edge.model_copy(update={"origin": origin})}
            )
        if isinstance(change, model.SupersedeChange) and change.content is not None:
            return change.model_copy(update={"content": fix(change.content)})
        if isinstance(change, model.UpdateChange):
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
        if isinstance(change, model.LinkChange):
            if change.edge.acl is not None:
                source = self._record(change.edge.src)
                if change.edge.acl != links.default_acl(source):
                    return (
                        "acl-change-needs-review",
                        "choosing who may read an edge needs a curator",
                    )
            return None
        if isinstance(change, model.UnlinkChange):
            edge = self.store.get_edge(change.edge_id)
            if edge is not None and edge.created_by != principal.id:
                return "others-edges-need-review", "the edge was made by someone else"
            return None
        if target is None:
            return None
        change = proposal.change
        if isinstance(change, model.UpdateChange):
            acl = change.patch.acl
            if acl is not None and acl != target.content.acl:
                return "acl-change-needs-review", "changing who may read a record needs a curator"
        elif not isinstance(change, model.SupersedeChange):
            return None
        if target.created_by != principal.id:
            return "others-records-need-review", "the record was written by someone else"
        if (
            target.content.origin is model.Origin.HUMAN
            or target.content.confidence is model.Confidence.VERIFIED
        ):
            return "human-records-need-review", "a human wrote or verified this record"
        return None

    def _target(self, change: model.Change, principal: Principal) -> Record | None:
        """The record a change is pinned to (its version goes stale when that moves on).
        An edge pins no record: a link stays valid while its ends get new versions."""
        if isinstance(
            change, model.CreateChange | model.PublishChange | model.LinkChange | model.UnlinkChange
        ):
            return None
        return self._visible(change.record_id, principal)

    def _scope_of(self, change: model.Change, target: Record | None, principal: Principal) -> str:
        if isinstance(change, model.CreateChange):
            return change.content.scope
        if isinstance(change, model.PublishChange):
            return change.scope
        if isinstance(change, model.LinkChange):
            # the edge lives in its source's scope; an unreadable source is "not found"
            return links.check_link(self.store, self.policy, change.edge, principal)[0].scope
        if isinstance(change, model.UnlinkChange):
            return links.visible_edge(self.store, change.edge_id, principal).scope
        assert target is not None
        return target.scope

    def _validate(self, proposal: Proposal, principal: Principal) -> None:
        change = proposal.change
        if isinstance(change, model.CreateChange):
            self.policy.check_kind(change.content.kind)
        elif isinstance(change, model.UpdateChange):
            if change.patch.is_empty():
                raise InvalidInput("an update must change at least one field", field="patch")
            record = self._record(change.record_id)
            new = change.patch.apply(record.content)
            if new.model_copy(update={"origin": record.content.origin}) == record.content:
                raise InvalidInput("the update changes nothing", field="patch")
            if record.status in (model.Status.ARCHIVED, model.Status.REJECTED):
                raise InvalidInput(f"{record.status.value} records cannot be updated")
        elif isinstance(change, model.SupersedeChange):
            self._check_supersede(change, principal)
        elif isinstance(change, model.TransitionChange):
            record = self._record(change.record_id)
            lifecycle.check_transition(record.status, change.to, principal)
        elif isinstance(change, model.LinkChange):
            links.check_link(self.store, self.policy, change.edge, principal)
        elif isinstance(change, model.UnlinkChange):
            edge = links.visible_edge(self.store, change.edge_id, principal)
            links.removed_edge(edge, actor=principal.id, now=self.clock())
        else:
            self._check_publish(change, principal)

    def _check_supersede(self, change: model.SupersedeChange, principal: Principal) -> None:
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
        # A replacement must be current. That alone rules out a cycle (``old`` is current,
        # so a chain back to it would have to start at a superseded replacement), without
        # walking a successor chain whose records the caller may not read: a "would make a
        # cycle" found through them would tell it how hidden records are linked.
        if replacement.superseded_by is not None:
            raise SupersessionCycle(
                f"{replacement.id} is itself superseded: supersede by the record that replaced it",
                field="by",
            )

    def _check_publish(self, change: model.PublishChange, principal: Principal) -> None:
        access.require_curator(principal, "publish")
        for record_id, version_id in change.pins.items():
            record = self._visible(record_id, principal)
            if record.scope != change.scope:
                raise InvalidInput(f"{record_id} is not in scope {change.scope}", field="pins")
            if version_id is not None:
                version = self.store.get_version(version_id)
                if version is None or version.record_id != record_id:
                    raise NotFound(f"no version {version_id} of {record_id}", field="pins")
            elif record.status is not model.Status.ACTIVE:
                raise InvalidInput(
                    f"{record_id} is {record.status.value}; only active records are published",
                    field="pins",
                )

    def _duplicate_of(
        self, proposal: Proposal, principal: Principal
    ) -> tuple[Record | None, ExpectNoCopies | None]:
        """An existing record with the same content in the scope, among those ``principal``
        may read (a record it may not read is never named, so the check is no oracle), and
        what the commit must still find: no copy stored since this check looked."""
        change = proposal.change
        if isinstance(change, model.CreateChange):
            content: Content | None = change.content
        elif isinstance(change, model.SupersedeChange):
            content = change.content
        elif isinstance(change, model.UpdateChange):
            content = change.patch.apply(self._record(change.record_id).content)
        else:
            content = None
        if content is None:
            return None, None
        content_hash = content.content_hash()
        found = self.store.find_by_hashes(content.scope, [content_hash])
        holders = frozenset(record.id for record in found if record.status not in NOT_COPIES)
        unchanged = ExpectNoCopies(content.scope, frozenset({content_hash}), holders)
        for record in found:
            if is_live_duplicate(record, proposal.record_id, principal):
                return record, unchanged
        return None, unchanged
