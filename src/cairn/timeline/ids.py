"""Names of timeline things, derived from what they are, so a rebuild names them the same.

A hierarchy (a *partition*) is one scope's events under one ACL (and, when agents keep
separate timelines, one agent's): every node and grip in it is read under that scope and
ACL, so a node never summarises an event its reader could not see.
"""

from __future__ import annotations

import hashlib
import json

from cairn.model import Acl, TocLevel

__all__ = ["grip_id", "node_id", "partition_key", "segment_slug"]


def _digest(*parts: object, size: int) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def partition_key(scope: str, acl: Acl, agent: str | None) -> str:
    return "tl_" + _digest(scope, acl.model_dump(mode="json"), agent, size=20)


def node_id(partition: str, level: TocLevel, slug: str) -> str:
    """``<partition>.<level>.<slug>``: a calendar key (``2026-11-25``) or a segment's slug."""
    return f"{partition}.{level.value}.{slug}"


def segment_slug(first_event_id: str) -> str:
    """A segment is named by the event it starts with."""
    return _digest(first_event_id, size=16)


def grip_id(scope: str, excerpt: str, event_id_start: str, event_id_end: str, event_id: str) -> str:
    """The same evidence is one grip, whichever node (or version) carries it. An event is
    identified by its scope and id, so the scope is part of what the grip points at: the
    same ids in another scope are other events, and another grip."""
    return "grp_" + _digest(scope, excerpt, event_id_start, event_id_end, event_id, size=24)
