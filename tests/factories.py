"""Small builders and principals shared by tests."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cairn.model import Principal, PrincipalKind, Sensitivity
from cairn.search.embedder import Vectors
from cairn.store.base import ChunkMeta

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# A human curator who may see and decide everything: the ``curator`` fixture, and the
# writer of module-scoped stores (which cannot use a function-scoped fixture).
CURATOR = Principal(
    id="carol",
    kind=PrincipalKind.HUMAN,
    roles=("curator",),
    scopes=("*",),
    labels=("*",),
    sensitivity=Sensitivity.HIGH,
)


def chunk_meta(i: int, **changes: Any) -> ChunkMeta:
    """The filter columns of chunk number ``i``: an active head fact in scope 1 / ACL 1,
    created ``i`` days after ``T0``; ``changes`` override any field."""
    meta = ChunkMeta(
        id=1000 + i,
        record_id=f"rec-{i}",
        version_id=f"ver-{i}",
        text_hash=f"hash-{i}",
        kind="fact",
        scope_id=1,
        acl_id=1,
        status="active",
        is_head=True,
        superseded=False,
        valid_from=None,
        valid_to=None,
        created_at=T0 + timedelta(days=i),
        seq=i + 1,
    )
    return dataclasses.replace(meta, **changes)


class CountingEmbedder:
    """A fake inner embedder that records every text it is asked to embed."""

    name = "counting"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        rows = np.array([[len(t), t.count("a"), 1.0, 0.5] for t in texts], dtype=np.float32)
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    def embed_query(self, text: str) -> Vectors:
        return self.embed([text])[0]


def tampered_copy(source: Path, copy: Path) -> Path:
    """``copy`` of ``source`` with one byte flipped (4 KiB in): a model file whose pinned
    hash no longer matches."""
    shutil.copyfile(source, copy)
    with copy.open("r+b") as fh:
        fh.seek(4096)
        byte = fh.read(1)
        fh.seek(4096)
        fh.write(bytes([byte[0] ^ 0xFF]))
    return copy
