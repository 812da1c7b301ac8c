"""Ingest files as evidence: markdown and text become ``document`` records through the gate.

Ingested records are marked ``source_kind=INGESTED_EVIDENCE`` (retrievable evidence, never
canonical truth), carry ``{source_repo, commit_sha, path}`` from git when there is one, and
are linked to their path so that ``refresh`` notices drift. Re-ingesting an unchanged file
creates nothing; a changed file becomes a new version through the gate.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import Field

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.limits import MAX_RECORD_BATCH, LimitExceeded, check_text
from cairn.model import CairnModel, Content, Origin, Provenance

__all__ = [
    "INGESTED_EVIDENCE",
    "MAX_HASHED_BYTES",
    "MAX_PATH_CHARS",
    "MAX_WALKED",
    "MAX_WALK_DEPTH",
    "TEXT_SUFFIXES",
    "GitInfo",
    "IngestArea",
    "IngestReport",
    "Progress",
    "confined_file",
    "document_for",
    "expand",
    "git_info",
    "hash_confined",
    "open_confined",
    "read_text",
    "shown_name",
    "title_of",
]

INGESTED_EVIDENCE = "INGESTED_EVIDENCE"
MAX_PATH_CHARS = 4096
# How deep a folder walk goes and how many entries one ingest may look at while it looks for
# files: a walk past either would cost without bound (a tree nested thousands deep, or many
# ``**`` patterns over a large tree), so the ingest is refused with what to do instead.
MAX_WALK_DEPTH = 100
MAX_WALKED = 200_000
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst"})


class IngestReport(CairnModel):
    created: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    queued: list[str] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class GitInfo:
    root: Path
    repo: str | None
    commit: str | None


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def git_info(directory: Path, fallback_root: Path) -> GitInfo:
    top = _git(["rev-parse", "--show-toplevel"], directory)
    if top is None:
        return GitInfo(root=fallback_root, repo=None, commit=None)
    root = Path(top)
    repo = _git(["config", "--get", "remote.origin.url"], root) or root.name
    return GitInfo(root=root, repo=repo, commit=_git(["rev-parse", "HEAD"], root))


@dataclass(frozen=True)
class IngestArea:
    """Where ingest may read: the project folder, the roots open to the caller (relative to
    the project, from the policy) and the store folder, which is never read."""

    project: Path
    roots: tuple[str, ...]
    store: Path | None = None


def _refuse(pattern: str, why: str) -> PermissionDenied:
    return PermissionDenied(f"cannot ingest {pattern!r}: {why}", field="paths")


def _has_dot_part(parts: Sequence[str]) -> bool:
    return any(part.startswith(".") and part != "." for part in parts)


def _root_of(relative: PurePosixPath, roots: Sequence[str]) -> PurePosixPath | None:
    """The first root that ``relative`` lies under, lexically (no file is touched)."""
    for root in roots:
        candidate = PurePosixPath(root)
        if root == "." or relative == candidate or relative.is_relative_to(candidate):
            return candidate
    return None


def _real_root(project: Path, root: str | PurePosixPath) -> Path | None:
    """Where a root is, when no symbolic link stands anywhere in its path: whoever can write
    the working tree could otherwise make a root a link to any folder the server can read,
    to a dot-folder of the project (``.git``, ``.env``) or to a folder other roles' roots
    cover. Files below a root may still be links, each judged where it leads."""
    real = (project / root).resolve()
    named = project.joinpath(*PurePosixPath(os.path.normpath(root)).parts)
    return real if real == named else None


def _inside(path: Path, root: Path, store: Path | None) -> bool:
    """Whether the file ``path`` really lies in ``root``: after following every symbolic
    link, it is under the root, not in the store folder and not a dot-file below the root."""
    real = path.resolve()
    if not real.is_relative_to(root):
        return False
    if store is not None and real.is_relative_to(store):
        return False
    return not _has_dot_part(real.relative_to(root).parts)


class _WalkBudget:
    """Counts what one ingest's walks look at, and refuses past ``MAX_WALKED`` entries."""

    def __init__(self) -> None:
        self.seen = 0

    def spend(self, entries: int, pattern: str) -> None:
        self.seen += entries
        if self.seen > MAX_WALKED:
            raise InvalidInput(
                f"finding the files of {pattern!r} looks at more than {MAX_WALKED:,} files "
                "and folders: name narrower paths",
                field="paths",
            )


def _walk_folders(
    base: Path, budget: _WalkBudget, pattern: str
) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` of ``base`` without dot-folders, never following a symbolic link to a
    folder, refused past ``MAX_WALK_DEPTH`` levels (Python 3.11's ``os.walk`` recurses, so
    a tree nested a thousand deep would otherwise end in ``RecursionError``) and past the
    ingest's budget of entries."""
    for top, dirs, files in os.walk(base, followlinks=False):
        here = Path(top)
        budget.spend(len(dirs) + len(files), pattern)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if dirs and len(here.relative_to(base).parts) >= MAX_WALK_DEPTH:
            raise InvalidInput(
                f"{pattern!r} holds folders nested more than {MAX_WALK_DEPTH} deep: "
                "name a path inside them",
                field="paths",
            )
        yield here, dirs, sorted(files)


def _walk(folder: Path, budget: _WalkBudget, pattern: str) -> Iterator[Path]:
    """Text files under ``folder``, skipping dot-files and dot-folders, never following a
    symbolic link to a folder."""
    for top, _dirs, files in _walk_folders(folder, budget, pattern):
        for name in files:
            if not name.startswith(".") and Path(name).suffix.lower() in TEXT_SUFFIXES:
                yield top / name


def expand(patterns: Sequence[str], area: IngestArea) -> list[Path]:
    """Files named by paths or globs (``**`` allowed), in order, confined to ``area``.

    A pattern is relative to the project and must lie under a root open to the caller; it
    may not climb out with ``..``, name the store folder, or name a dot-file or dot-folder
    below its root. Every file found must still be inside its root once symbolic links are
    followed. A pattern breaking a rule is refused before the file system is consulted, so
    refusals say nothing about files outside the roots."""
    if not area.roots:
        raise PermissionDenied(
            "no ingest root is open to your roles; a curator can add one under "
            "'ingest.roots' in the policy file",
            field="paths",
        )
    project = area.project.resolve()
    store = area.store.resolve() if area.store is not None else None
    found: list[Path] = []
    budget = _WalkBudget()
    for pattern in patterns:
        try:
            check_text(pattern, "path", MAX_PATH_CHARS)
        except LimitExceeded as exc:
            raise InvalidInput(str(exc), field="paths") from None
        relative = _relative_pattern(pattern, area.project, project)
        if relative is None:
            raise InvalidInput(
                f"{pattern!r}: ingest paths are relative to the project folder, without '..'",
                field="paths",
            )
        root = _root_of(relative, area.roots)
        if root is None:
            open_roots = ", ".join(area.roots)
            raise _refuse(pattern, f"it is not under an ingest root open to you ({open_roots})")
        below = relative.relative_to(root) if root.parts else relative
        if _has_dot_part(below.parts):
            raise _refuse(pattern, "ingest does not read dot-files or dot-folders")
        root_real = _real_root(project, root)
        if root_real is None:
            raise _refuse(
                pattern,
                "its ingest root is a symbolic link (out of the project, or to another "
                "folder of it)",
            )
        if store is not None and (project / relative).resolve().is_relative_to(store):
            raise _refuse(pattern, "ingest never reads the store folder")
        matches = _matches(project, relative, budget, pattern)
        if not matches:
            raise NotFound(f"nothing matches {pattern!r}", field="paths")
        for match in matches:
            path = Path(match)
            is_folder = path.is_dir() and not path.is_symlink()
            files = list(_walk(path, budget, pattern)) if is_folder else [path]
            for file in files:
                if not _inside(file, root_real, store) or not file.resolve().is_file():
                    raise _refuse(
                        pattern, "a file it names lies outside its root (a symbolic link?)"
                    )
                found.append(file.resolve())
                if len(found) > MAX_RECORD_BATCH:
                    # refused as soon as it is too many, before any file is read: one ingest
                    # is one batch, and a batch holds at most this many records
                    raise InvalidInput(
                        f"more than {MAX_RECORD_BATCH:,} files match: ingest them in parts",
                        field="paths",
                    )
    return list(dict.fromkeys(found))


_MAGIC = re.compile(r"[*?[]")


def _matches(
    project: Path, relative: PurePosixPath, budget: _WalkBudget, pattern: str
) -> list[str]:
    """What a pattern names, in order. Its literal first parts name a folder (the project's
    own path is never read as a pattern, whatever ``[``, ``*`` or ``?`` it holds); the rest
    is matched by one walk of that folder, within the ingest's budget, that never follows a
    symbolic link to a folder and goes no deeper than the pattern can reach. The standard
    library's glob follows such links (two links to ``.`` make ``*/*/…`` cost 2^n, two to
    ``..`` make ``**`` run for ever) and recurses once per part. A file whose own name
    looks like a pattern (``[x].md``) is found by that name when nothing else matches."""
    parts = relative.parts
    if len(parts) > MAX_WALK_DEPTH:
        raise InvalidInput(
            f"{pattern!r} has more than {MAX_WALK_DEPTH} parts: no folder is that deep",
            field="paths",
        )
    literal = project.joinpath(*parts)
    first = next((i for i, part in enumerate(parts) if _MAGIC.search(part)), None)
    if first is None:
        return [str(literal)] if os.path.lexists(literal) else []
    base = project.joinpath(*parts[:first])
    # "**/**" is "**": collapsed, so that a run of them costs the walk nothing more
    kept: list[str] = []
    for part in parts[first:]:
        if not (part == "**" and kept[-1:] == ["**"]):
            kept.append(part)
    rest = tuple(kept)
    found: list[str] = []
    if base.is_dir():
        bounded = "**" not in rest
        for here, dirs, files in _walk_folders(base, budget, pattern):
            depth = len(here.relative_to(base).parts) + 1
            for name in [*dirs, *files]:
                path = here / name
                if name.startswith(".") or (path.is_symlink() and path.is_dir()):
                    continue
                if _parts_match(path.relative_to(base).parts, rest):
                    found.append(str(path))
            if bounded and depth >= len(rest):
                dirs[:] = []  # the pattern names nothing deeper
    if not found and os.path.lexists(literal):
        found = [str(literal)]
    return sorted(found)


def _parts_match(names: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Whether path parts ``names`` match glob parts ``patterns``, ``**`` standing for any
    number of parts. Kept as the set of positions in ``names`` each prefix of ``patterns``
    can reach, pattern part by part: no recursion (a pattern of thousands of parts would
    exhaust the stack) and no retrying (several ``**`` would retry exponentially)."""
    reach = {0}
    for part in patterns:
        if part == "**":
            reach = set(range(min(reach), len(names) + 1))
        else:
            reach = {i + 1 for i in reach if i < len(names) and fnmatch.fnmatchcase(names[i], part)}
        if not reach:
            return False
    return len(names) in reach


def _relative_pattern(pattern: str, *projects: Path) -> PurePosixPath | None:
    """``pattern`` relative to the project, judged by its text alone: an absolute pattern
    must name the project folder itself (as given or resolved), and ``..`` never passes."""
    path = PurePosixPath(pattern)
    if not pattern or ".." in path.parts:
        return None
    if not path.is_absolute():
        return path
    for project in projects:
        if path.is_relative_to(project.as_posix()):
            return path.relative_to(project.as_posix())
    return None


def confined_file(area: IngestArea, relative: str) -> Path | None:
    """The file a path link names, if it may be read at all (the same rules as ingest,
    under the project as a whole); None otherwise."""
    try:
        check_text(relative, "path", MAX_PATH_CHARS)
    except LimitExceeded:
        return None
    pure = PurePosixPath(relative)
    if not relative or pure.is_absolute() or ".." in pure.parts or _has_dot_part(pure.parts):
        return None
    project = area.project.resolve()
    path = project / pure
    store = area.store.resolve() if area.store is not None else None
    if not path.is_file() or not _inside(path, project, store):
        return None
    return path.resolve()


# The most of a linked file hashed for drift: a larger one is not tracked (hashing it on
# every link or check would read without bound).
MAX_HASHED_BYTES = 8 * 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _opened_path(fd: int, path: Path) -> Path:
    """Where the open file really is: the kernel's own name for it on Linux, which no swap
    of the path after the open can change."""
    proc = Path(f"/proc/self/fd/{fd}")
    return Path(os.readlink(proc)) if proc.is_symlink() else path.resolve()


def open_confined(path: Path, area: IngestArea) -> int | None:
    """An open descriptor of the regular file ``path`` when, as opened, it still lies under
    one of ``area``'s roots, outside the store folder and its dot-files, and has no other
    name (a hard link could be a store file or anything else of the user's); None for what
    is not a regular file (a FIFO, a device: opened without blocking, never read).

    Paths are checked before this too, but a file can be swapped for a link between that
    check and the open: the open never follows a link in the last part of the path, and
    the confinement is checked again on the file the descriptor holds."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None  # gone, a link swapped in (ELOOP), not readable
    try:
        confined = _confined(fd, path, area)
    except OSError:
        confined = False
    if not confined:
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return fd


def _confined(fd: int, path: Path, area: IngestArea) -> bool:
    """Whether the open ``fd`` is a regular file with one name, inside a root of ``area``."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        return False
    real = _opened_path(fd, path)
    project = area.project.resolve()
    store = area.store.resolve() if area.store is not None else None
    roots = (_real_root(project, root) for root in area.roots)
    return any(root is not None and _inside(real, root, store) for root in roots)


def hash_confined(path: Path, area: IngestArea) -> str | None:
    """The SHA-256 of a confined file (``open_confined``), read a piece at a time; None
    when it may not be read or is over ``MAX_HASHED_BYTES``."""
    fd = open_confined(path, area)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        digest = hashlib.sha256()
        seen = 0
        while piece := handle.read(1024 * 1024):
            seen += len(piece)
            if seen > MAX_HASHED_BYTES:
                return None
            digest.update(piece)
    return digest.hexdigest()


def read_text(path: Path, limit: int, area: IngestArea) -> str | None:
    """The file's text, or None when it is not UTF-8, larger than ``limit`` characters
    could be (read no further than that: a huge file costs nothing), or not a confined
    regular file once opened (``open_confined``)."""
    fd = open_confined(path, area)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit * 4 + 1)
    if len(data) > limit * 4:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        return check_text(text, str(path.name), limit)
    except LimitExceeded:
        return None


def shown_name(name: str) -> str:
    """``name`` as text that can be stored and printed: a file name that is not UTF-8 (which
    Python holds as lone surrogates) gets its odd bytes written as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def title_of(text: str, path: Path) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip() or path.stem
        if stripped and not stripped.startswith("---"):
            break
    return path.stem.replace("-", " ").replace("_", " ")


def document_for(
    path: Path, text: str, *, scope: str, git: GitInfo, kind: str, origin: Origin
) -> Content:
    """A file as an evidence record: ``origin`` is who ingests it (an agent's ingest is
    an agent's record, never the system's), ``provenance`` where it came from."""
    relative = path.relative_to(git.root).as_posix() if path.is_relative_to(git.root) else path.name
    return Content(
        kind=kind,
        scope=scope,
        title=title_of(text, path),
        body=text,
        origin=origin,
        provenance=Provenance(
            source="ingest",
            source_kind=INGESTED_EVIDENCE,
            source_repo=git.repo,
            commit_sha=git.commit,
            path=relative,
        ),
    )


Progress = Callable[[int, int, str], None]
