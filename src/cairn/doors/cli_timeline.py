"""``cairn timeline …``: append events, navigate the hierarchy, search it, and keep it built.

Every read takes ``--json`` and then prints the same objects the HTTP API returns.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, TypedDict

import typer
from pydantic import TypeAdapter, ValidationError
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from cairn.doors import _render as render
from cairn.doors._cli_common import store_path
from cairn.doors._cli_files import input_lines
from cairn.doors.cli import EmbedderOpt, TimeOpt, _errors, _reader, _run, _session, _want_json
from cairn.errors import InvalidInput
from cairn.ingest.records import append_events, read_events
from cairn.limits import MAX_REQUEST_BYTES
from cairn.model import Event, Timestamp, TocNode
from cairn.timeline.rollup import RollupProgress, RollupReport
from cairn.timeline.views import NodePage, RecentContext, ScanReport, TimelineHits

__all__ = ["timeline_app"]

timeline_app = typer.Typer(
    help="The timeline: conversation and tool events, summarised by year, month, week, day "
    "and segment, each summary tied to the exact events it came from.",
    no_args_is_help=True,
)

ScopeOpt = Annotated[str | None, typer.Option(help="A scope glob.")]
_TIME = TypeAdapter(Timestamp)


def _time(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        return _TIME.validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(f"--{what}: {exc.errors()[0]['msg']}", field=what) from None


class _Span(TypedDict):
    scope: str | None
    since: datetime | None
    until: datetime | None


def _span(scope: str | None, since: str | None, until: str | None) -> _Span:
    """Where and when a read looks, as events, search and scan all take it: a scope glob
    and the moments --since and --until name."""
    return {"scope": scope, "since": _time(since, "since"), "until": _time(until, "until")}


# ---- writing --------------------------------------------------------------------------


@timeline_app.command("append")
def append(
    file: Annotated[str, typer.Argument(help="A JSON Lines file of events, or - for stdin.")],
) -> None:
    """Append events (one JSON object per line: event_id, ts, session_id, scope, agent,
    role, kind, text, metadata). Every line is checked first; an event sent again is
    reported as a duplicate, never stored twice."""
    # read_events takes a line up to a request's size: reading stops past that
    with _errors(), input_lines(Path(file), store_path(), max_chars=MAX_REQUEST_BYTES) as lines:
        events = read_events(lines)
    with _session() as (memory, principal), render.progress(_want_json()) as bar:
        progress = render.counting(bar, "append", len(events))
        report = append_events(memory, events, principal, progress=progress)
    # once the bar is gone: the output never mixes with it
    if _want_json():
        render.print_json(report)
    else:
        render.out.print(
            f"appended {len(report.stored)} events ({len(report.duplicates)} already stored)"
        )


@timeline_app.command("rollup")
def rollup(
    piece: Annotated[int, typer.Option(min=1, max=100_000, help="Events per step.")] = 20_000,
) -> None:
    """Summarise the events appended since the last rollup (curators). A stopped run
    resumes where it left off."""
    with _session() as (memory, principal), render.progress(_want_json()) as bar:
        # How many events wait is the kernel's to tell, once it knows the caller may build.
        report = memory.rollup(principal=principal, piece=piece, on_progress=_steps(bar, "rollup"))
    _show_rollup(report)


@timeline_app.command("rebuild-toc")
def rebuild_toc() -> None:
    """Rebuild every summary from the stored events (after changing the timeline's settings
    or summarizer). Unchanged nodes stay as they are; changed ones get a new version."""
    with _session() as (memory, principal), render.progress(_want_json()) as bar:
        on_progress = _steps(bar, "rebuild")
        report = memory.rebuild_timeline(principal=principal, on_progress=on_progress)
    _show_rollup(report)


@timeline_app.command("compact")
def compact() -> None:
    """Compact the store's indexes and reclaim free space (curators)."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.compact(principal=principal),
            lambda r: render.out.print(f"compacted: {r}"),
        )


@timeline_app.command("status")
def status(embedder: EmbedderOpt = None) -> None:
    """How far the timeline lags the event log, and how many nodes it holds (curators of
    every scope)."""
    with _reader(embedder=embedder) as (memory, principal):
        _run(
            lambda: memory.timeline_status(principal=principal),
            lambda s: render.out.print(
                f"lag {s.lag} events, vector lag {s.vector_lag}; nodes "
                + ", ".join(f"{n} {level}" for level, n in sorted(s.nodes.items()))
                + (
                    "; the vector index is busy: searches answer by keyword alone"
                    if s.vector_index_busy
                    else ""
                )
            ),
        )


def _steps(bar: Progress, description: str) -> Callable[[RollupProgress], None]:
    """A task on ``bar`` moved by a rollup's progress; the total is the events that were
    waiting, as far as the run knows it (never below what it has done)."""
    task = bar.add_task(description, total=None)
    return lambda step: bar.update(
        task, completed=step.events, total=max(step.total, step.events, 1)
    )


def _show_rollup(report: RollupReport) -> None:
    if _want_json():
        render.print_json(report)
    else:
        _show_report(report)


def _show_report(report: RollupReport) -> None:
    levels = ", ".join(f"{n} {level}" for level, n in sorted(report.levels.items()))
    render.out.print(
        f"{report.events} events, {report.days} days: {report.nodes_written} nodes written"
        + (f" ({levels})" if levels else "")
    )


# ---- reading --------------------------------------------------------------------------


@timeline_app.command("root")
def root(scope: ScopeOpt = None) -> None:
    """The years you may see."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.timeline_root(principal=principal, scope=scope),
            lambda nodes: render.out.print(_nodes_table(nodes, "timeline")),
        )


@timeline_app.command("node")
def node(
    node_id: str,
    version: Annotated[int | None, typer.Option(min=1, help="A past version.")] = None,
) -> None:
    """One node: its summary (bullets with their grips), keywords and children."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.timeline_node(node_id, principal=principal, version=version),
            _show_node,
        )


@timeline_app.command("browse")
def browse(
    node_id: str,
    after: Annotated[str | None, typer.Option(help="The last child of the previous page.")] = None,
    limit: Annotated[int, typer.Option("-k", "--limit", min=1, max=1000)] = 20,
) -> None:
    """A node's children, in time order, a page at a time."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.timeline_browse(node_id, principal=principal, after=after, limit=limit),
            _show_page,
        )


@timeline_app.command("events")
def events(
    scope: ScopeOpt = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    since: TimeOpt = None,
    until: TimeOpt = None,
    limit: Annotated[int, typer.Option("-k", "--limit", min=1, max=10_000)] = 100,
) -> None:
    """Raw events you may see, in source-time order."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.events(
                principal=principal, session_id=session, limit=limit, **_span(scope, since, until)
            ),
            _show_events,
        )


@timeline_app.command("expand")
def expand(
    grip_id: str,
    before: Annotated[int, typer.Option(min=0, max=50)] = 3,
    after: Annotated[int, typer.Option(min=0, max=50)] = 3,
) -> None:
    """The events behind a grip, with some context on either side."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.expand_grip(grip_id, principal=principal, before=before, after=after),
            lambda g: _show_events([*g.before, *g.events, *g.after]),
        )


@timeline_app.command("search")
def search(
    query: str,
    k: Annotated[int, typer.Option("-k", "--limit", min=1, max=100)] = 10,
    scope: ScopeOpt = None,
    since: TimeOpt = None,
    until: TimeOpt = None,
    embedder: EmbedderOpt = None,
) -> None:
    """Teleport: the summaries and grips that best match QUERY, without walking the tree."""
    with _reader(embedder=embedder) as (memory, principal):
        _run(
            lambda: memory.timeline_search(
                query, principal=principal, k=k, **_span(scope, since, until)
            ),
            _show_hits,
        )


@timeline_app.command("scan")
def scan(
    query: str,
    node_id: Annotated[str | None, typer.Option("--node", help="Scan this node's span.")] = None,
    since: TimeOpt = None,
    until: TimeOpt = None,
    k: Annotated[int, typer.Option("-k", "--limit", min=1, max=100)] = 10,
    scope: ScopeOpt = None,
) -> None:
    """Read the raw events of a span for QUERY (when search finds nothing good)."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.timeline_scan(
                query, principal=principal, node_id=node_id, k=k, **_span(scope, since, until)
            ),
            _show_scan,
        )


@timeline_app.command("recent")
def recent(
    scope: ScopeOpt = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    max_tokens: Annotated[int, typer.Option(min=50, max=100_000)] = 2000,
) -> None:
    """What an agent starting work should read: the latest segments, then older days and
    weeks, within a token budget, each line cited to its node version and grips."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.timeline_recent(
                principal=principal, scope=scope, session_id=session, max_tokens=max_tokens
            ),
            _show_recent,
        )


# ---- rendering ------------------------------------------------------------------------


def _nodes_table(nodes: list[TocNode], title: str) -> Table:
    columns = [
        render.Column("node", ident=True),
        render.Column("v", drop=2),
        render.Column("level"),
        render.Column("title"),
        render.Column("events", drop=1),
    ]
    rows = [(n.node_id, str(n.version), n.level.value, n.title, str(n.event_count)) for n in nodes]
    return render.table(title, columns, rows)


def _show_node(n: TocNode) -> None:
    render.out.print(f"[bold]{escape(n.title)}[/] ({n.level.value} {n.key}, v{n.version})")
    render.out.print(f"node {n.node_id} · {n.event_count} events · {render.literal(n.summarizer)}")
    for bullet in n.bullets:
        render.out.print(f"  • {escape(bullet.text)}  [dim]{' '.join(bullet.grip_ids)}[/]")
    if n.keywords:
        render.out.print(f"keywords: {render.literal(', '.join(n.keywords))}")
    for child in n.children:
        render.out.print(f"  └ {child}")


def _show_page(page: NodePage) -> None:
    columns = [
        render.Column("node", ident=True),
        render.Column("level"),
        render.Column("title"),
        render.Column("events", drop=1),
    ]
    rows = [(c.node_id, c.level.value, c.title, str(c.event_count)) for c in page.children]
    render.out.print(render.table(f"children of {page.node_id}", columns, rows))
    if page.next_after:
        render.out.print(f"more: --after {page.next_after}")


def _show_events(found: list[Event]) -> None:
    for e in found:
        render.out.print(
            f"{e.ts.isoformat()} [bold]{e.role.value}[/] {e.kind} ({e.event_id}): {escape(e.text)}"
        )


def _show_hits(found: TimelineHits) -> None:
    for h in found.hits:
        render.out.print(
            f"{h.score:.4f} {h.level.value} {h.node_id} v{h.version}: {escape(h.text)}"
            f"  [dim]{' '.join(h.grip_ids[:3])}[/]"
        )
    for warning in found.warnings:
        render.out.print(f"[yellow]warning[/] {escape(warning)}")


def _show_scan(report: ScanReport) -> None:
    for grip, score in zip(report.grips, report.scores, strict=True):
        render.out.print(
            f"{score:.2f} {grip.ts.isoformat()} {grip.event_id}: {escape(grip.excerpt)}"
        )
    render.out.print(
        f"scanned {report.scanned} events" + (" (truncated)" if report.truncated else "")
    )


def _show_recent(context: RecentContext) -> None:
    for item in context.items:
        cite = escape(f"[{item.level.value} {item.node_id} v{item.version}]")
        render.out.print(f"{cite} {escape(item.text)}")
    more = ", more before that" if context.clipped else ""
    render.out.print(f"{context.tokens}/{context.max_tokens} tokens{more}")
