"""cairn: governed, citeable memory for AI agents and the people who work with them.

The Python door. Everything here is also reachable by name from its own module; the names
load on first use, so ``import cairn`` stays cheap (the coding-agent hook imports this
package on every call and must not pay for the kernel)::

    from cairn import Content, Workspace

    memory = Workspace(".cairn").open_memory()
    agent = Workspace(".cairn").authenticate(key)
    outcome = memory.remember(Content(kind="fact", scope="acme/app", title="…", body="…"),
                              principal=agent)

docs/library.md describes each name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name → the module that defines it
_HOME = {
    "Memory": "cairn.memory",
    "Workspace": "cairn.workspace",
    "Settings": "cairn.config",
    "load_settings": "cairn.config",
    **dict.fromkeys(
        (
            "AppendReport",
            "AuditQuery",
            "Content",
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
    "Event",
    "EventDraft",
    "Grip",
    "InvalidInput",
    "Memory",
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
    "load_settings",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads
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
