"""Rendering helpers for the CLI: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from rich.console import Console, ConsoleOptions, RenderableType
from rich.control import CONTROL_ESCAPE
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TimeElapsedColumn,
)
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from cairn.model import AuditEntry, Proposal, Record, Version

__all__ = [
    "Column",
    "audit_table",
    "err",
    "keys_table",
    "literal",
    "out",
    "print_json",
    "progress",
    "proposals_table",
    "records_table",
    "shown",
    "table",
    "to_jsonable",
    "versions_table",
]

# ---- what a terminal may be sent ----------------------------------------------------------
#
# Titles, bodies, scopes, tags … are written by agents and people, and a terminal acts on some
# characters rather than showing them: ESC and C1 sequences retitle it, clear it, move the
# cursor or hide text; BEL rings; CR and BS overwrite what was shown; bidi overrides reorder a
# line so that it reads differently from what it holds. Every string the CLI prints to a
# person goes through ``shown``: such characters become visible escapes (``\x1b``, ``\u202e``,
# as Python and JSON write them) rather than U+FFFD, so a reviewer sees what the author put
# there and can find the same text with --json. Written here because rich has no such
# function: ``rich.control.strip_control_codes`` / ``escape_control_codes`` cover only BEL,
# BS, VT, FF and CR and let ESC, C1 and the bidi controls through; their escapes for those
# five (``CONTROL_ESCAPE``) are used as they are. --json output needs none of this: JSON
# escapes every control and non-ASCII character (``json.dumps``' ensure_ascii).
_UNSAFE_CODES = (
    *range(0x00, 0x20),  # C0
    0x7F,  # DEL
    *range(0x80, 0xA0),  # C1 (0x9b is CSI, as ESC [ is)
    *range(0x202A, 0x202F),  # bidi embeddings and overrides (LRE RLE PDF LRO RLO)
    *range(0x2066, 0x206A),  # bidi isolates (LRI RLI FSI PDI)
)
_ONE_LINE = {
    code: CONTROL_ESCAPE.get(code) or ascii(chr(code))[1:-1]  # '\x1b', '\t', '\u202e'
    for code in _UNSAFE_CODES
}
_LINES = {code: escaped for code, escaped in _ONE_LINE.items() if chr(code) not in "\n\t"}
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str, *, lines: bool = False) -> str:
    """``text`` as it may reach a terminal: every control character (C0, DEL, C1) and bidi
    override or isolate written as a visible escape. With ``lines``, newlines and tabs stay
    (a body keeps its layout) and CRLF line ends are read as newlines; without, they are
    escaped too (a table cell, an id, a scope is one line). Escapes hold no control
    character, so ``shown(shown(t)) == shown(t)``."""
    if _UNSAFE.search(text) is None:
        return text
    if lines:
        return text.replace("\r\n", "\n").translate(_LINES)
    return text.translate(_ONE_LINE)


def literal(text: str) -> str:
    """``text`` to put inside a markup string (``f"[bold]{literal(title)}[/]"``): shown as
    written, never read as markup (a title ``[link=…]x[/]`` stays just that), and safe for a
    terminal (``shown``)."""
    return escape(shown(text))


class _Terminal(Console):
    """A console that sends a terminal no control character of the text it prints: every
    string it is given (printed, a table cell, a title) goes through ``shown`` before it is
    read as markup and measured, and — for text that arrives as ``Text`` or in a renderable
    made elsewhere (a progress bar's description) — every segment of output once more before
    it is written. rich's own control codes (styles, cursor moves) are not in the text of a
    segment and pass as they are. Markup in a string is still read: what callers put into
    one goes through ``literal``. (An escape is a backslash and a letter, never one before
    ``[``, so escaping before markup is read changes no tag; and rich renders nested
    renderables through ``render`` again, where ``shown`` finds nothing more to do.)"""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(shown(text, lines=True), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text, style, control = segment
            safe = text if control else shown(text, lines=True)
            yield segment if safe is text else Segment(safe, style, control)


# emoji=False: ":warning:" in a title is shown as written, not as a picture
out: Console = _Terminal(highlight=False, soft_wrap=True, emoji=False)
err: Console = _Terminal(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    # print() rather than rich: machine output must be exact JSON, never wrapped or styled.
    print(json.dumps(to_jsonable(value), indent=2, sort_keys=False, default=str))


def _short(text: str, width: int = 60) -> str:
    # white space runs become one space; other controls (CR, FF, NEL …) are shown, not folded
    line = " ".join(shown(text, lines=True).split())
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass(frozen=True)
class Column:
    """A table column. An ``ident`` column holds ids: shown whole, on one line, never
    dropped. Other columns wrap; when the terminal is too narrow for every column, those
    with the highest ``drop`` go first (0: never dropped)."""

    header: str
    ident: bool = False
    drop: int = 0


# The narrowest a text column may get: its longest word (so a rule name or a scope is not
# chopped in two), but no more than this, and never narrower than its header.
_MAX_WORD = 20
# a rich box table spends 3 cells per column (its padding and left border) and 1 on the right
_PER_COLUMN = 3


def table(title: str, columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> Table:
    """A table that fits the terminal (``out``'s width) without cutting an id short:
    people copy ids from tables into the next command. The widths are worked out here
    rather than by rich, whose squeezing would cut into an id or a word."""
    body = [[shown(cell) for cell in row] for row in rows]  # shown before it is measured

    def longest(i: int) -> int:
        return max([len(columns[i].header), *(len(row[i]) for row in body)])

    def needs(i: int) -> int:
        if columns[i].ident:
            return longest(i)
        words = [len(word) for row in body for word in row[i].split()]
        return max(len(columns[i].header), min(max(words, default=0), _MAX_WORD))

    def room(kept: list[int]) -> int:
        return out.width - _PER_COLUMN * len(kept) - 1

    keep = list(range(len(columns)))
    while sum(needs(i) for i in keep) > room(keep):
        droppable = [i for i in keep if columns[i].drop]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda i: columns[i].drop))
    widths = {i: needs(i) for i in keep}
    spare = room(keep) - sum(widths.values())
    while spare > 0:
        # one more cell to the text column that is furthest from showing all it holds
        short = {i: longest(i) - widths[i] for i in keep if widths[i] < longest(i)}
        if not short:
            break
        widths[max(short, key=lambda i: short[i])] += 1
        spare -= 1
    # Text, not markup: a title such as "[draft] plan" is shown as written, and so is a
    # table's title ("history of …", "context of <scope>")
    made = Table(title=Text(shown(title), style="table.title"), title_justify="left")
    for i in keep:
        made.add_column(
            columns[i].header,
            width=widths[i],
            no_wrap=columns[i].ident,
            overflow="fold",  # a word longer than the column is folded, never cut off
        )
    for row in body:
        made.add_row(*(Text(row[i]) for i in keep))
    return made


def records_table(records: Iterable[Record], title: str = "records") -> Table:
    columns = [
        Column("id", ident=True),
        Column("kind", drop=2),
        Column("scope", drop=1),
        Column("status"),
        Column("v", drop=3),
        Column("title"),
    ]
    rows = [
        (
            r.id,
            r.kind,
            r.scope,
            r.status.value + (" (superseded)" if r.superseded_by else ""),
            str(r.current_version),
            _short(r.content.title),
        )
        for r in records
    ]
    return table(title, columns, rows)


def versions_table(versions: Sequence[Version], title: str = "history") -> Table:
    columns = [
        Column("v"),
        Column("version id", ident=True),
        Column("created", drop=2),
        Column("by", drop=1),
        Column("title"),
    ]
    rows = [
        (
            str(v.number),
            v.id,
            f"{v.created_at:%Y-%m-%d %H:%M:%S}",
            v.created_by,
            _short(v.content.title),
        )
        for v in versions
    ]
    return table(title, columns, rows)


def proposals_table(proposals: Iterable[Proposal], stale: set[str], title: str) -> Table:
    columns = [
        Column("proposal", ident=True),
        Column("op", drop=2),
        Column("scope", drop=3),
        Column("record", ident=True),
        Column("by", drop=4),
        Column("status"),
        Column("rule", drop=5),
    ]
    rows = [
        (
            p.id,
            p.change.op,
            p.scope,
            p.record_id or "-",
            p.principal_id,
            p.status.value + (" (stale)" if p.id in stale else ""),
            p.rule or "-",
        )
        for p in proposals
    ]
    return table(title, columns, rows)


def audit_table(entries: Iterable[AuditEntry]) -> Table:
    columns = [
        Column("#"),
        Column("when", drop=3),
        Column("actor", drop=2),
        Column("action"),
        Column("subject", ident=True),
        Column("rule", drop=4),
        Column("status", drop=1),
        Column("reason", drop=5),
    ]
    rows = [
        (
            str(e.seq),
            f"{e.at:%H:%M:%S}",
            e.actor,
            e.action,
            e.subject_id or "-",
            e.rule or "-",
            f"{e.from_status or '∅'}→{e.to_status}" if e.to_status else "",
            _short(e.reason or "", 40),
        )
        for e in entries
    ]
    return table("audit", columns, rows)


def keys_table(keys: Iterable[dict[str, Any]]) -> Table:
    """``cairn keys list``: one row per key, never the key itself."""
    columns = [
        Column("id", ident=True),
        Column("principal"),
        Column("state"),
        Column("created", drop=2),
        Column("label", drop=1),
    ]
    rows = [
        (
            k["id"],
            k["principal"],
            "revoked" if k["revoked"] else "active",
            str(k["created_at"])[:10],
            k["label"] or "",
        )
        for k in keys
    ]
    return table("keys", columns, rows)


class _Description(ProgressColumn):
    """A task's description, which may name a file (``ingest <name>``): as written, not as
    markup, and escaped before the bar is laid out (so a long escape is not cropped)."""

    def render(self, task: Task) -> Text:
        return Text(shown(task.description))


@contextmanager
def progress(quiet: bool, *, in_bytes: bool = False) -> Iterator[Progress]:
    """A progress bar on stderr for work that can take more than a second (counting items,
    or bytes when ``in_bytes``); silent when ``quiet`` (JSON output) or when stderr is not
    a terminal (a log file or a pipe), so scripts and CI never see it."""
    bar = Progress(
        _Description(),
        BarColumn(),
        DownloadColumn() if in_bytes else MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=True,
        # stdout is left alone: it may carry the command's data (`cairn export > file`), and
        # rich would otherwise send it through the bar's console, to stderr
        redirect_stdout=False,
    )
    with bar:
        yield bar


def counting(
    bar: Progress, description: str, total: int | None = None
) -> Callable[[int, int], None]:
    """A task on ``bar`` and the ``progress(done, total)`` callback that moves it, as the
    kernel's batch verbs (append, import, reindex) call it while they go."""
    task = bar.add_task(description, total=total)
    return lambda done, of: bar.update(task, completed=done, total=of)
