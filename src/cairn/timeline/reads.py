"""Timeline reads: navigation, grips, teleport search, recent context and the raw scan.

Every read takes a ``Reader`` (the ACL and scope ids the principal may read, decided by the
same preselection as record reads) and trims in the store's SQL or index: a node, grip or
event of a scope the reader may not see is never loaded into a result, counted, or named.
Reads never write and never summarise.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cairn.errors import InvalidInput, NotFound
from cairn.limits import MAX_COUNTER, is_id, shown_id
from cairn.model import Event, EventCursor, Grip, TocLevel, TocNode
from cairn.retrieval.budget import estimate_item_tokens
from cairn.retrieval.recall import keyword_recall, vector_recall
from cairn.retrieval.types import vector_warnings
from cairn.search.fts import fts_tokens
from cairn.search.fusion import rrf
from cairn.store.base import (
    ChunkFilter,
    EventFilter,
    EventText,
    Store,
    TocFilter,
)
from cairn.store.filters import admitted
from cairn.timeline.calendar import LAST_MOMENT
from cairn.timeline.summarize import MAX_EXCERPT_CHARS, clip, grip_for, sentences
from cairn.timeline.views import (
    ExpandedGrip,
    NodeHeader,
    NodePage,
    RecentContext,
    RecentItem,
    ScanReport,
    TeleportHit,
    TimelineHits,
)

if TYPE_CHECKING:
    from cairn.retrieval.indexer import Indexer

__all__ = [
    "Reader",
    "browse",
    "expand_grip",
    "get_node",
    "recent_context",
    "root",
    "scan",
    "teleport",
]

MAX_PAGE = 1000
MAX_CONTEXT_EVENTS = 50
# Recent context reads nodes this many at a time, newest first.
RECENT_PAGE = 8
# A scan reads at most this many events, and this many characters of their text in all
# (the first SCAN_EVENT_CHARS of each event, cut in the database, never its metadata): the
# range is then reported as truncated. Its day buckets run this many at once.
MAX_SCAN_EVENTS = 200_000
MAX_SCAN_CHARS = 20_000_000
SCAN_EVENT_CHARS = 4_000
SCAN_PAGE = 500
SCAN_WORKERS = 4


@dataclass(frozen=True)
class Reader:
    """What a principal may read: ACL ids, and scope ids (None: every scope)."""

    acl_ids: frozenset[int]
    scope_ids: frozenset[int] | None

    def toc(self, **asked: object) -> TocFilter:
        return TocFilter(acl_ids=self.acl_ids, scope_ids=self.scope_ids, **asked)  # type: ignore[arg-type]

    def events(self, **asked: object) -> EventFilter:
        return EventFilter(acl_ids=self.acl_ids, scope_ids=self.scope_ids, **asked)  # type: ignore[arg-type]

    def sees(self, scope_id: int, acl_id: int) -> bool:
        return acl_id in self.acl_ids and (self.scope_ids is None or scope_id in self.scope_ids)


def root(store: Store, reader: Reader) -> list[TocNode]:
    """The years, oldest first."""
    return store.toc_nodes(reader.toc(levels=frozenset({TocLevel.YEAR.value})), limit=MAX_PAGE)


def get_node(store: Store, reader: Reader, node_id: str, version: int | None = None) -> TocNode:
    """One node (latest, or ``version``), if the reader may see it. A segment that later
    events merged into another has left the hierarchy, but its versions stay readable by
    number, so that a citation ``(node, version)`` still shows what was cited."""
    latest = _visible(store, reader, node_id, retired=version is not None)
    if version is None or version == latest.version:
        return latest
    found = store.toc_node(node_id, version) if 1 <= version <= MAX_COUNTER else None
    if found is None:
        raise NotFound(f"node {node_id} has no version {version}", field="version")
    return found


def _visible(store: Store, reader: Reader, node_id: str, *, retired: bool = False) -> TocNode:
    # Text that cannot be an id (a NUL, a lone surrogate, 10,000 characters) is answered
    # like any unknown id, without reaching the store.
    found = (
        store.toc_nodes(reader.toc(node_ids=frozenset({node_id}), include_retired=retired), limit=1)
        if is_id(node_id)
        else []
    )
    if not found:
        raise NotFound(f"no timeline node {node_id!r}", field="node_id")
    return found[0]


def browse(
    store: Store, reader: Reader, node_id: str, *, after: str | None = None, limit: int = 20
) -> NodePage:
    """A node's children in time order, ``limit`` at a time; ``after`` is the last child id
    of the previous page."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}", field="limit")
    parent = _visible(store, reader, node_id)
    cursor: tuple[datetime, str] | None = None
    if after is not None:
        previous = (
            store.toc_nodes(reader.toc(node_ids=frozenset({after})), limit=1)
            if is_id(after)
            else []
        )
        if not previous or previous[0].parent_id != parent.node_id:
            raise InvalidInput(f"{after!r} is not a child of {node_id}", field="after")
        cursor = (previous[0].starts_at, previous[0].node_id)
    page = store.toc_nodes(reader.toc(parent_id=parent.node_id), after=cursor, limit=limit + 1)
    more = len(page) > limit
    page = page[:limit]
    return NodePage(
        node_id=parent.node_id,
        children=tuple(NodeHeader.of(n) for n in page),
        next_after=page[-1].node_id if more else None,
    )


def expand_grip(
    store: Store, reader: Reader, grip_id: str, *, before: int = 3, after: int = 3
) -> ExpandedGrip:
    """The events a grip covers, with ``before`` and ``after`` more on either side (from
    the same scope, under the same ACL)."""
    for value, what in ((before, "before"), (after, "after")):
        if not 0 <= value <= MAX_CONTEXT_EVENTS:
            raise InvalidInput(f"{what} must be between 0 and {MAX_CONTEXT_EVENTS}", field=what)
    found = store.grips([grip_id]).get(grip_id) if is_id(grip_id) else None
    if found is None or not reader.sees(found[1], found[2]):
        raise NotFound(f"no grip {shown_id(grip_id)}", field="grip_id")
    grip, scope_id, acl_id = found
    ends = store.get_events(scope_id, [grip.event_id_start, grip.event_id_end])
    start, end = ends[grip.event_id_start], ends[grip.event_id_end]
    where = EventFilter(acl_ids=frozenset({acl_id}), scope_ids=frozenset({scope_id}))
    covered: list[Event] = []
    cursor = (start.ts, start.event_id)
    covered.append(start)
    page_size = 8  # a grip usually covers a few events: read small pages, then larger
    while covered[-1].event_id != end.event_id and len(covered) < 10_000:
        page = store.list_events(where, after=cursor, limit=page_size)
        page_size = min(page_size * 4, 2000)
        if not page:
            break
        for event in page:
            if (event.ts, event.event_id) > (end.ts, end.event_id):
                break
            covered.append(event)
        else:
            cursor = (page[-1].ts, page[-1].event_id)
            continue
        break
    earlier = (
        store.list_events(where, before=(start.ts, start.event_id), limit=before) if before else []
    )
    later = store.list_events(where, after=(end.ts, end.event_id), limit=after) if after else []
    return ExpandedGrip(
        grip=grip, before=tuple(reversed(earlier)), events=tuple(covered), after=tuple(later)
    )


def teleport(
    store: Store,
    reader: Reader,
    query: str,
    *,
    indexer: Indexer | None,
    k: int = 10,
    since: datetime | None = None,
    until: datetime | None = None,
) -> TimelineHits:
    """Keyword and vector search over node summaries and each segment bullet's stretch of
    conversation, trimmed to what the reader may see inside the index, fused by rank; a node
    found by several of its entries counts once, at its best. While another thread builds,
    loads or saves the vector index, or holds it past the read's patience, keyword search
    answers alone and a warning says so; a warning also counts the entries the reader may
    see that wait for a vector."""
    if not 1 <= k <= 100:
        raise InvalidInput("k must be between 1 and 100", field="k")
    where = ChunkFilter(
        acl_ids=reader.acl_ids,
        statuses=frozenset({"active"}),
        scope_ids=reader.scope_ids,
        head_only=True,
        source_kinds=frozenset({"timeline"}),
        source_after=since,
        source_before=until,
    )
    depth = k * 4
    # Keyword search runs first, then the vector side brings the index up to date: an
    # entry keyword search found is then in the index, found by vector search too or
    # counted among those that wait for a vector (rolled up a moment ago, the background
    # worker embeds them; only what the reader may see is counted).
    ranked = {"keyword": [str(c) for c, _ in keyword_recall(store, query, where, depth)]}
    warnings: tuple[str, ...] = ()
    if indexer is not None:
        recalled = vector_recall(indexer, query, where, depth)
        if not recalled.busy:
            ranked["vector"] = [str(c) for c, _ in recalled.hits]
        warnings = vector_warnings(waiting=recalled.waiting, busy=recalled.busy)
    # Checked once more on the store's own rows, as a search checks what it returns.
    found = {int(key) for keys in ranked.values() for key in keys}
    kept = admitted(where, store.chunk_metas(sorted(found)), store.heads_readable)
    fused = rrf({name: [key for key in keys if int(key) in kept] for name, keys in ranked.items()})
    sources = store.timeline_chunks([int(h.key) for h in fused])
    hits: list[TeleportHit] = []
    seen: set[tuple[str, str]] = set()
    returned: set[str] = set()
    nodes: dict[tuple[str, int], TocNode | None] = {}
    for hit in fused:
        source = sources.get(int(hit.key))
        if source is None:
            continue
        node_id, version, chunk_key = source
        if (node_id, chunk_key) in seen:
            continue
        seen.add((node_id, chunk_key))
        if (node_id, version) not in nodes:
            nodes[(node_id, version)] = store.toc_node(node_id, version)
        node = nodes[(node_id, version)]
        if node is None:
            continue
        if (
            chunk_key.startswith("b")
            and chunk_key[1:].isdigit()
            and int(chunk_key[1:]) < len(node.bullets)
        ):
            bullet = node.bullets[int(chunk_key[1:])]
            text, grip_ids = bullet.text, bullet.grip_ids
        else:
            text, grip_ids = node.title, tuple(g for b in node.bullets for g in b.grip_ids)
        # A summary higher up repeats its children's bullets: a hit pointing only at
        # evidence already returned adds nothing.
        if grip_ids and set(grip_ids) <= returned:
            continue
        returned.update(grip_ids)
        hits.append(
            TeleportHit(
                **_cited(node, text, grip_ids),
                title=node.title,
                score=hit.score,
                signals=dict(hit.ranks),
            )
        )
        if len(hits) == k:
            break
    return TimelineHits(hits=tuple(hits), warnings=warnings)


def recent_context(
    store: Store,
    reader: Reader,
    *,
    max_tokens: int = 2000,
    session_id: str | None = None,
) -> RecentContext:
    """What an agent starting work should read: the latest segments' bullets (newest
    first), then the summaries of older days and weeks, clipped in that order to
    ``max_tokens``. Every item is cited to its node version and grips. Nodes are read a
    page at a time, newest first, and reading stops once the budget is spent."""
    if not 50 <= max_tokens <= 100_000:
        raise InvalidInput("max_tokens must be between 50 and 100000", field="max_tokens")
    kept: list[RecentItem] = []
    used = 0
    full = False
    covered: set[str] = set()
    for level, most in ((TocLevel.SEGMENT, 50), (TocLevel.DAY, 20), (TocLevel.WEEK, 20)):
        read = 0
        cursor: tuple[datetime, str] | None = None
        while read < most and not full:
            page = store.toc_nodes(
                reader.toc(levels=frozenset({level.value})),
                after=cursor,
                limit=RECENT_PAGE,
                newest_first=True,
            )
            if not page:
                break
            read += len(page)
            last = page[-1]
            cursor = (last.last_ts or last.starts_at, last.node_id)
            for node in page:
                if node.node_id in covered:
                    continue
                if session_id is not None and session_id not in node.sessions:
                    continue
                if node.parent_id:
                    covered.add(node.parent_id)  # a day whose segments were shown
                for item in _items(node):
                    # clipped in order, like every budget: the first line that does not fit
                    # ends the list (no later, shorter line jumps the queue)
                    if used + item.tokens > max_tokens:
                        full = True
                        break
                    kept.append(item)
                    used += item.tokens
                if full:
                    break
            if len(page) < RECENT_PAGE:
                break
    return RecentContext(items=tuple(kept), tokens=used, max_tokens=max_tokens, clipped=full)


def _items(node: TocNode) -> list[RecentItem]:
    lines = [(b.text, b.grip_ids) for b in node.bullets]
    if node.title not in {b.text for b in node.bullets}:
        lines.insert(0, (node.title, tuple(g for b in node.bullets for g in b.grip_ids)))
    return [
        RecentItem(**_cited(node, text, grips), tokens=estimate_item_tokens(text))
        for text, grips in lines
    ]


def _cited(node: TocNode, text: str, grip_ids: tuple[str, ...]) -> dict[str, Any]:
    """``text`` cited to the node version it came from (with the node's level and span) and
    to the grips behind it: the fields every line a timeline read returns shares."""
    return {
        "node_id": node.node_id,
        "version": node.version,
        "level": node.level,
        "text": text,
        "grip_ids": grip_ids,
        "starts_at": node.starts_at,
        "ends_at": node.ends_at,
    }


def scan(
    store: Store,
    reader: Reader,
    query: str,
    *,
    since: datetime,
    until: datetime,
    k: int = 10,
) -> ScanReport:
    """The fallback when teleport finds nothing good: read the raw events of a time range
    (a node's, typically) in day buckets on parallel workers, and quote the events that
    hold the most query terms as grips."""
    if until <= since:
        raise InvalidInput("until must be after since", field="until")
    if until - since > timedelta(days=366):
        raise InvalidInput("scan at most a year at a time", field="until")
    wanted = set(fts_tokens(query))
    if not wanted:
        raise InvalidInput("the query has no words to look for", field="query")
    buckets: list[tuple[datetime, datetime]] = []
    moment = since
    while moment < until:
        # (never past ``until``: a day after it may lie beyond the year 9999)
        end = until if until - moment <= timedelta(days=1) else moment + timedelta(days=1)
        buckets.append((moment, end))
        moment = end
    budget = max(1, MAX_SCAN_EVENTS // len(buckets))
    # The character budget is shared by the buckets: a page reserves what it may read at
    # most (its events' first SCAN_EVENT_CHARS each) and gives back what it did not use.
    chars_left = [MAX_SCAN_CHARS]
    lock = threading.Lock()

    def reserve(most: int) -> int:
        with lock:
            events = min(most, chars_left[0] // SCAN_EVENT_CHARS)
            chars_left[0] -= events * SCAN_EVENT_CHARS
            return events

    def give_back(chars: int) -> None:
        with lock:
            chars_left[0] += chars

    def run(bucket: tuple[datetime, datetime]) -> tuple[list[tuple[float, Grip]], int, bool]:
        # (the last moment a time can hold is in the range too)
        where = reader.events(
            since=bucket[0], until=None if bucket[1] == LAST_MOMENT else bucket[1]
        )
        found: list[tuple[float, Grip]] = []
        read = 0
        after: EventCursor | None = None
        while read < budget:
            want = reserve(min(SCAN_PAGE, budget - read))
            if not want:
                break
            page = store.event_texts(where, after=after, limit=want, max_chars=SCAN_EVENT_CHARS)
            give_back(want * SCAN_EVENT_CHARS - sum(len(e.text) for e in page))
            read += len(page)
            for event in page:
                scored = _scan_hit(event, wanted)
                if scored is not None:
                    found.append(scored)
            if len(page) < want:
                return found, read, False
            # (the reader's scopes: the same id may stand at the same time in two)
            after = (page[-1].ts, page[-1].event_id, page[-1].scope)
        return found, read, True

    with ThreadPoolExecutor(max_workers=SCAN_WORKERS) as pool:
        results = list(pool.map(run, buckets))
    found = [hit for hits, _, _ in results for hit in hits]
    found.sort(key=lambda h: (-h[0], h[1].ts, h[1].event_id))
    return ScanReport(
        grips=tuple(g for _, g in found[:k]),
        scores=tuple(s for s, _ in found[:k]),
        scanned=sum(n for _, n, _ in results),
        truncated=any(t for _, _, t in results),
    )


def _scan_hit(event: EventText, wanted: set[str]) -> tuple[float, Grip] | None:
    if not event.text:
        return None
    best: tuple[int, str] | None = None
    for sentence in sentences(event.text):
        matched = len(wanted & set(fts_tokens(sentence)))
        if matched and (best is None or matched > best[0]):
            best = (matched, sentence)
    if best is None:
        return None
    excerpt = clip(best[1], MAX_EXCERPT_CHARS)
    grip = grip_for(excerpt, event.event_id, event.event_id, event)
    return best[0] / len(wanted), grip
