"""What a principal may see of the store by id: a record, a proposal. Anything it may not
see reads exactly like something that does not exist ("not found", never "forbidden"), so
no answer tells whether a hidden thing is there."""

from __future__ import annotations

from cairn.errors import NotFound
from cairn.governance import access
from cairn.limits import is_id
from cairn.model import Change, LinkChange, Principal, Proposal, Record, SupersedeChange
from cairn.store.base import Store

__all__ = ["proposal_visible", "readable_record", "visible_proposal", "visible_record"]


def readable_record(store: Store, record_id: str, principal: Principal) -> Record | None:
    """The stored record ``record_id`` if ``principal`` may read it; None when it is
    missing or hidden alike."""
    record = store.get_record(record_id) if is_id(record_id) else None
    if record is None or not access.can_read(principal, record.scope, record.content.acl):
        return None
    return record


def visible_record(
    store: Store, record_id: str, principal: Principal, field: str = "record_id"
) -> Record:
    """``readable_record``, or "not found" naming ``field``."""
    record = readable_record(store, record_id, principal)
    if record is None:
        raise NotFound(f"no record {record_id}", field=field)
    return record


def visible_proposal(store: Store, proposal_id: str, principal: Principal) -> Proposal:
    """A proposal its author or a curator of its scope asks for, or "not found"."""
    proposal = store.get_proposal(proposal_id) if is_id(proposal_id) else None
    if proposal is None or not proposal_visible(store, proposal, principal):
        raise NotFound(f"no proposal {proposal_id}", field="proposal_id")
    return proposal


def proposal_visible(store: Store, proposal: Proposal, principal: Principal) -> bool:
    """Whether ``principal`` sees ``proposal``: its author always; a curator of its scope
    when it may also read every other record the change names (a link's two ends, the
    record a supersession points to), since the proposal shows their ids and deciding it
    would name them again. A change reaching into a scope the curator does not hold is
    left to a curator who holds both."""
    if not access.can_see_proposal(principal, proposal):
        return False
    if proposal.principal_id == principal.id:
        return True
    return all(
        readable_record(store, record_id, principal) is not None
        for record_id in _records_named(proposal.change)
    )


def _records_named(change: Change) -> tuple[str, ...]:
    if isinstance(change, LinkChange):
        return (change.edge.src, change.edge.dst)
    if isinstance(change, SupersedeChange) and change.by is not None:
        return (change.by,)
    return ()
