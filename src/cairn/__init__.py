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

__all__ = [
    "AppendReport",
    "AuditQuery",
    "CairnError",
    "Conflict",
    "Content",
    "ContentPatch",
    "Event",
    "EventDraft",
    "Grip",
    "InvalidInput",
    "LocalMemory",
    "Memory",
    "MemoryClient",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "PinKind",
    "PolicyError",
    "Principal",
    "PrincipalKind",
    "Proposal",
    "ProposalOutcome",
    "Record",
    "RecordQuery",
    "RecordView",
    "RemoteMemory",
    "Sensitivity",
    "Settings",
    "StaleProposal",
    "Status",
    "StoreError",
    "TocNode",
    "Unauthenticated",
    "Verdict",
    "Version",
    "VersionPin",
    "Workspace",
    "connect",
    "load_settings",
    "open",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads
    from cairn.client import MemoryClient
    from cairn.client.local import LocalMemory, open
    from cairn.client.remote import RemoteMemory, connect
    from cairn.config import Settings, load_settings
    from cairn.errors import (
        CairnError,
        Conflict,
        InvalidInput,
        NotFound,
        PayloadTooLarge,
        PermissionDenied,
        PolicyError,
        StaleProposal,
        StoreError,
        Unauthenticated,
    )
    from cairn.memory import Memory
    from cairn.model import (
        AppendReport,
        AuditQuery,
        Content,
        ContentPatch,
        Event,
        EventDraft,
        Grip,
        PinKind,
        Principal,
        PrincipalKind,
        Proposal,
        ProposalOutcome,
        Record,
        RecordQuery,
        RecordView,
        Sensitivity,
        Status,
        TocNode,
        Verdict,
        Version,
        VersionPin,
    )
    from cairn.workspace import Workspace


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
