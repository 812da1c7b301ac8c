"""Ingest files as evidence: markdown and text become ``document`` records through the gate.

Ingested records are marked ``source_kind=INGESTED_EVIDENCE`` (retrievable evidence, never
canonical truth), carry ``{source_repo, commit_sha, path}`` from git when there is one, and
are linked to their path so that ``refresh`` notices drift. Re-ingesting an unchanged file
creates nothing; a changed file becomes a new version through the gate.
"""

from __future__ import annotations

import glob as globlib
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from cairn.errors import InvalidInput
from cairn.model import CairnModel, Content, Origin, Provenance

INGESTED_EVIDENCE = "INGESTED_EVIDENCE"
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


def expand(patterns: Sequence[str], base: Path) -> list[Path]:
    """Files named by paths or globs (``**`` allowed) under ``base``, in order.

    Nothing outside ``base`` can be ingested, whatever the pattern says (absolute paths,
    ``..``, symlinks pointing out): a door must not become a way to read the machine.
    """
    root = base.resolve()
    found: list[Path] = []
    for pattern in patterns:
        full = pattern if Path(pattern).is_absolute() else str(base / pattern)
        matches = sorted(globlib.glob(full, recursive=True))
        if not matches:
            raise InvalidInput(f"nothing matches {pattern!r}", field="paths")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                found += sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES)
            elif path.is_file():
                found.append(path)
    resolved = list(dict.fromkeys(p.resolve() for p in found))
    outside = [p for p in resolved if not p.is_relative_to(root)]
    if outside:
        raise InvalidInput(
            f"{len(outside)} path(s) lie outside {root}; only files under it can be ingested",
            field="paths",
        )
    return resolved


def title_of(text: str, path: Path) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip() or path.stem
        if stripped and not stripped.startswith("---"):
            break
    return path.stem.replace("-", " ").replace("_", " ")


def document_for(path: Path, text: str, *, scope: str, git: GitInfo, kind: str) -> Content:
    relative = path.relative_to(git.root).as_posix() if path.is_relative_to(git.root) else path.name
    return Content(
        kind=kind,
        scope=scope,
        title=title_of(text, path),
        body=text,
        origin=Origin.SYSTEM,
        provenance=Provenance(
            source="ingest",
            source_kind=INGESTED_EVIDENCE,
            source_repo=git.repo,
            commit_sha=git.commit,
            path=relative,
        ),
    )


Progress = Callable[[int, int, str], None]
