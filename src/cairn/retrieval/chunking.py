"""Cut a version's content into retrieval chunks with stable keys.

Documents (and any long body) are chunked by markdown structure, so a citation can point at
a section; short records are one chunk. A record whose body is empty is still findable by
its title.
"""

from __future__ import annotations

from cairn.ingest.markdown import chunk_markdown
from cairn.model import Content
from cairn.store.base import ChunkDraft

__all__ = [
    "CONTEXT_PREFIX",
    "SINGLE_CHUNK_CHARS",
    "chunks_for",
    "is_context_key",
]

SINGLE_CHUNK_CHARS = 1500


CONTEXT_PREFIX = "context~"


def is_context_key(chunk_key: str) -> bool:
    return chunk_key.startswith(CONTEXT_PREFIX)


def chunks_for(content: Content) -> tuple[ChunkDraft, ...]:
    context = tuple(
        ChunkDraft(chunk_key=f"{CONTEXT_PREFIX}{n}", heading="", start=0, end=0, text=text)
        for n, text in enumerate(content.context, start=1)
        if text.strip()
    )
    return _content_chunks(content) + context


def _content_chunks(content: Content) -> tuple[ChunkDraft, ...]:
    body = content.body
    if not body.strip():
        return (ChunkDraft(chunk_key="title", heading="", start=0, end=0, text=content.title),)
    if content.kind != "document" and len(body) <= SINGLE_CHUNK_CHARS:
        return (ChunkDraft(chunk_key="body", heading="", start=0, end=len(body), text=body),)
    drafts = tuple(
        ChunkDraft(
            chunk_key=chunk.chunk_key,
            heading=" > ".join(chunk.heading_path),
            start=chunk.start,
            end=chunk.end,
            text=chunk.text,
        )
        for chunk in chunk_markdown(body, max_chars=SINGLE_CHUNK_CHARS)
    )
    return drafts or (ChunkDraft(chunk_key="body", heading="", start=0, end=len(body), text=body),)
