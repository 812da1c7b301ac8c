"""cairn: governed, citeable memory for AI agents and the people who work with them.

The Python door. ``cairn.open`` opens a local store and ``cairn.connect`` a server, both as
the principal of an API key and with the same methods (``cairn.MemoryClient``)::

    import cairn
    from cairn import Content

    with cairn.open(".cairn", key=key) as memory:      # or cairn.connect(url, key)
        outcome = memory.remember(Content(kind="fact", scope="acme/app", title="…"))
        hits = memory.search("…", scope="acme/app").hits

Everything here is also reachable by name from its own module; the names load on first use,
so ``import cairn`` stays cheap (the coding-agent hook imports this package on every call
and must not pay for the kernel, nor for an HTTP library).

docs/python.md is the guide; docs/library.md describes each name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name → the module that defines it
_HOME = {
    "open": "cairn.client.local",
    "connect": "cairn.client.remote",
    "MemoryClient": "cairn.client",
    "LocalMemory": "cairn.client.local",
    "RemoteMemory": "cairn.client.remote",
    "Memory": "cairn.memory",
    "Workspace": "cairn.workspace",
    "Settings": "cairn.config",
    "load_settings": "cairn.config",
    **dict.fromkeys(
        (
            "AppendReport",
            "AuditQuery",
            "Content",
            "ContentPatch",
            "Event",
            "EventDraft",
            "Grip",
            "PinKind",
            "Principal",
            "PrincipalKind",
            "Proposal",
            "ProposalOutcome",
            "Record",
            "RecordQuery",
            "RecordView",
            "Sensitivity",
            "Status",
            "TocNode",
            "Verdict",
            "Version",
            "VersionPin",
        ),
        "cairn.model",
    ),
    **dict.fromkeys(
        (
            "CairnError",
            "Conflict",
            "InvalidInput",
            "NotFound",
            "PayloadTooLarge",
            "PermissionDenied",
            "PolicyError",
            "StaleProposal",
            "StoreError",
            "Unauthenticated",
        ),
        "cairn.errors",
    ),
}

# ``_HOME`` is the one list of the public names: type checkers, which cannot read a computed
# ``__all__``, see each one re-exported by name (``X as X``) below.
__all__ = sorted(_HOME)

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads
    from cairn.client import MemoryClient as MemoryClient
    from cairn.client.local import LocalMemory as LocalMemory
    from cairn.client.local import open as open
    from cairn.client.remote import RemoteMemory as RemoteMemory
    from cairn.client.remote import connect as connect
    from cairn.config import Settings as Settings
    from cairn.config import load_settings as load_settings
    from cairn.errors import CairnError as CairnError
    from cairn.errors import Conflict as Conflict
    from cairn.errors import InvalidInput as InvalidInput
    from cairn.errors import NotFound as NotFound
    from cairn.errors import PayloadTooLarge as PayloadTooLarge
    from cairn.errors import PermissionDenied as PermissionDenied
    from cairn.errors import PolicyError as PolicyError
    from cairn.errors import StaleProposal as StaleProposal
    from cairn.errors import StoreError as StoreError
    from cairn.errors import Unauthenticated as Unauthenticated
    from cairn.memory import Memory as Memory
    from cairn.model import AppendReport as AppendReport
    from cairn.model import AuditQuery as AuditQuery
    from cairn.model import Content as Content
    from cairn.model import ContentPatch as ContentPatch
    from cairn.model import Event as Event
    from cairn.model import EventDraft as EventDraft
    from cairn.model import Grip as Grip
    from cairn.model import PinKind as PinKind
    from cairn.model import Principal as Principal
    from cairn.model import PrincipalKind as PrincipalKind
    from cairn.model import Proposal as Proposal
    from cairn.model import ProposalOutcome as ProposalOutcome
    from cairn.model import Record as Record
    from cairn.model import RecordQuery as RecordQuery
    from cairn.model import RecordView as RecordView
    from cairn.model import Sensitivity as Sensitivity
    from cairn.model import Status as Status
    from cairn.model import TocNode as TocNode
    from cairn.model import Verdict as Verdict
    from cairn.model import Version as Version
    from cairn.model import VersionPin as VersionPin
    from cairn.workspace import Workspace as Workspace


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
