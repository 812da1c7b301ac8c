"""Structure-aware markdown chunking with stable chunk keys and exact spans.

A document is cut at every heading (ATX ``#``..``######`` and setext ``===`` /
``---``; never inside fenced code). Each section becomes one chunk, or several
parts when longer than ``max_chars`` (cut at blank lines, then at line ends,
then at spaces). Every chunk carries ``start``/``end`` offsets such that
``text == source[start:end]``, so a citation can point at the exact excerpt.

Chunk keys are built from the heading path only: each heading contributes its
slug, suffixed ``~2``, ``~3``... when an earlier sibling under the same parent
has the same slug; parts after the first get ``#p2``, ``#p3``... Text before
the first heading (or a document without headings) is keyed ``_root``. So
editing one section never changes another section's key.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass

__all__ = ["ROOT_KEY", "Chunk", "chunk_markdown", "front_matter_end", "slugify"]

ROOT_KEY = "_root"
"""Key of the text before the first heading; no heading slug starts with ``_``."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrieval unit; ``text == source[start:end]`` (Python string offsets)."""

    chunk_key: str
    heading_path: tuple[str, ...]
    text: str
    start: int
    end: int


_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSE = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
# List items and block quotes interrupt a paragraph, so they never end up in a
# setext heading; indented code and table rows cannot start one.
_INTERRUPTS = re.compile(r"^ {0,3}(?:[-+*][ \t]|\d{1,9}[.)][ \t]|>)")
_NOT_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}\|)")
_FRONT_MATTER_OPEN = re.compile(r"^(---|\+\+\+)[ \t]*$")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


@dataclass(frozen=True, slots=True)
class _Line:
    start: int
    end: int  # end of the line's text, before its line break
    text: str


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    title: str
    start: int  # first character of the heading (its first line)
    body: int  # first character after the heading's last line


def slugify(title: str) -> str:
    """Lower-case, accent-free, hyphen-separated form of a heading ("Café & Co" -> "cafe-co")."""
    text = _LINK.sub(r"\1", title)
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"[\W_]+", "-", text).strip("-")
    return text or "section"


def _lines(text: str, start: int) -> list[_Line]:
    lines: list[_Line] = []
    pos = start
    for raw in text[start:].splitlines(keepends=True):
        content = raw.rstrip("\r\n")
        lines.append(_Line(pos, pos + len(content), content))
        pos += len(raw)
    return lines


def front_matter_end(text: str) -> int:
    """Offset where the body starts after a ``---``/``+++`` front-matter block (0 if none)."""
    first_break = text.find("\n")
    if first_break < 0:
        return 0
    opening = _FRONT_MATTER_OPEN.match(text[:first_break].rstrip("\r").lstrip("\ufeff"))
    if opening is None:
        return 0
    fence = opening.group(1)
    closers = {fence, "..."} if fence == "---" else {fence}
    for line in _lines(text, first_break + 1):
        if line.text.rstrip() in closers:
            break_len = 2 if text.startswith("\r\n", line.end) else 1
            return min(len(text), line.end + break_len)
    return 0


def _scan(lines: list[_Line]) -> tuple[list[_Heading], list[int | None]]:
    """Find headings, and give each line inside a fenced block that block's number."""
    headings: list[_Heading] = []
    fence_of: list[int | None] = [None] * len(lines)
    fence: tuple[str, int] | None = None  # (marker character, length) of the open fence
    fences = 0
    paragraph: int | None = None  # index of the first line of the current paragraph
    for i, line in enumerate(lines):
        if fence is not None:
            fence_of[i] = fences
            stripped = line.text.strip()
            if (
                len(line.text) - len(line.text.lstrip(" ")) <= 3
                and stripped
                and set(stripped) == {fence[0]}
                and len(stripped) >= fence[1]
            ):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line.text)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fences += 1
            fence = (opening.group(1)[0], len(opening.group(1)))
            fence_of[i] = fences
            paragraph = None
            continue
        if not line.text.strip():
            paragraph = None
            continue
        atx = _ATX.match(line.text)
        if atx:
            title = _ATX_CLOSE.sub("", (atx.group(2) or "").strip()).strip()
            headings.append(_Heading(len(atx.group(1)), title, line.start, _next_start(lines, i)))
            paragraph = None
            continue
        underline = _SETEXT.match(line.text)
        if underline and paragraph is not None:
            title = " ".join(lines[j].text.strip() for j in range(paragraph, i))
            level = 1 if underline.group(1)[0] == "=" else 2
            headings.append(_Heading(level, title, lines[paragraph].start, _next_start(lines, i)))
            paragraph = None
            continue
        if _INTERRUPTS.match(line.text):
            paragraph = None
        elif paragraph is None and not _NOT_PARAGRAPH.match(line.text) and not underline:
            paragraph = i
    return headings, fence_of


def _next_start(lines: list[_Line], i: int) -> int:
    return lines[i + 1].start if i + 1 < len(lines) else lines[i].end


def _blocks(lines: list[_Line], fence_of: list[int | None], lo: int, hi: int) -> list[range]:
    """Line-index ranges of the blocks in ``lines[lo:hi]``: paragraphs and whole fences."""
    blocks: list[range] = []
    first: int | None = None
    for i in range(lo, hi):
        in_fence = fence_of[i] is not None
        if first is not None and (
            fence_of[i] != fence_of[first] or not (in_fence or lines[i].text.strip())
        ):
            blocks.append(range(first, i))
            first = None
        if first is None and (in_fence or lines[i].text.strip()):
            first = i
    if first is not None:
        blocks.append(range(first, hi))
    return blocks


def _split_long(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut one oversized span at line ends, else at spaces, else anywhere."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        window = text[start : start + max_chars + 1]
        cut = window.rfind("\n")
        if cut <= 0:
            cut = max(window.rfind(" "), window.rfind("\t"))
        if cut <= 0:
            cut = max_chars
        pieces.append((start, start + cut))
        start += cut
    pieces.append((start, end))
    return pieces


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _parts(
    text: str,
    lines: list[_Line],
    starts: list[int],
    fence_of: list[int | None],
    heading: _Heading | None,
    start: int,
    end: int,
    max_chars: int,
) -> list[tuple[int, int]]:
    """Spans of one section's parts; empty list when the section has no body."""
    body_start = heading.body if heading else start
    units: list[tuple[int, int]] = []
    lo, hi = bisect_left(starts, body_start), bisect_left(starts, end)
    for block in _blocks(lines, fence_of, lo, hi):
        b_start, b_end = lines[block[0]].start, lines[block[-1]].end
        units.extend(_split_long(text, b_start, b_end, max_chars))
    units = [_trim(text, s, e) for s, e in units]
    units = [(s, e) for s, e in units if e > s]
    if not units:
        return []
    parts: list[tuple[int, int]] = []
    # The heading stays glued to its first block, even if that overshoots max_chars.
    current = (heading.start if heading else units[0][0], units[0][1])
    for unit_start, unit_end in units[1:]:
        if unit_end - current[0] <= max_chars:
            current = (current[0], unit_end)
        else:
            parts.append(current)
            current = (unit_start, unit_end)
    parts.append(current)
    return [_trim(text, s, e) for s, e in parts]


def chunk_markdown(text: str, *, max_chars: int = 1500) -> list[Chunk]:
    """Split markdown (or plain text) into chunks keyed by heading path.

    Front matter is skipped; sections without body text are skipped (their
    headings still appear in their children's ``heading_path``). ``max_chars``
    bounds each part, except that a heading is never separated from the block
    that follows it: a section's first part may exceed it by the heading's length.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    body = front_matter_end(text)
    lines = _lines(text, body)
    starts = [line.start for line in lines]
    headings, fence_of = _scan(lines)

    sections: list[tuple[_Heading | None, tuple[str, ...], str, int, int]] = []
    first_heading = headings[0].start if headings else len(text)
    sections.append((None, (), ROOT_KEY, body, first_heading))

    stack: list[tuple[int, str, str]] = []  # (level, title, key segment) of open headings
    seen: dict[tuple[str, str], int] = {}  # (parent key, slug) -> siblings so far
    for n, heading in enumerate(headings):
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        parent = "/".join(segment for _, _, segment in stack)
        slug = slugify(heading.title)
        ordinal = seen.get((parent, slug), 0) + 1
        seen[(parent, slug)] = ordinal
        stack.append((heading.level, heading.title, slug if ordinal == 1 else f"{slug}~{ordinal}"))
        end = headings[n + 1].start if n + 1 < len(headings) else len(text)
        key = "/".join(segment for _, _, segment in stack)
        path = tuple(title for _, title, _ in stack)
        sections.append((heading, path, key, heading.start, end))

    chunks: list[Chunk] = []
    for owner, path, key, start, end in sections:
        spans = _parts(text, lines, starts, fence_of, owner, start, end, max_chars)
        for number, (s, e) in enumerate(spans, start=1):
            part_key = key if number == 1 else f"{key}#p{number}"
            chunks.append(Chunk(part_key, path, text[s:e], s, e))
    return chunks
