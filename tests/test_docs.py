"""The docs keep up with the code: every CLI command is documented in docs/cli.md, every
setting in the architecture or operations guide, and the README opens with the two commands.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main

from cairn.config import Settings
from cairn.doors.cli import app

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _command_paths(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every visible command and sub-command, as name paths: ("review", "approve"), …"""
    # typer bundles its own click, so groups are recognised by their ``commands`` mapping.
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if sub.hidden:
            continue
        path = (*prefix, name)
        yield path
        yield from _command_paths(sub, path)


def test_the_walk_finds_the_commands() -> None:
    paths = set(_command_paths(typer.main.get_command(app)))
    # a guard against a walk that silently finds nothing (and so checks nothing)
    for expected in [("init",), ("search",), ("review", "approve"), ("keys", "revoke")]:
        assert expected in paths, f"the command walk missed {' '.join(expected)}"


def test_every_cli_command_has_a_heading_in_cli_md() -> None:
    headings = [line for line in _read(DOCS / "cli.md").splitlines() if line.startswith("### ")]
    missing = []
    for path in _command_paths(typer.main.get_command(app)):
        # `cairn review approve PROPOSAL`, or named later in a heading such as
        # ### `cairn archive RECORD`, `cairn restore RECORD`
        pattern = re.compile(r"`cairn " + re.escape(" ".join(path)) + r"[ `]")
        if not any(pattern.search(heading) for heading in headings):
            missing.append("cairn " + " ".join(path))
    assert not missing, f"docs/cli.md has no ### heading for: {', '.join(missing)}"


def test_every_setting_is_documented() -> None:
    text = _read(DOCS / "architecture.md") + _read(DOCS / "operations.md")
    missing = [
        name
        for name in Settings.model_fields
        if f"`{name}`" not in text and f"CAIRN_{name.upper()}" not in text
    ]
    assert not missing, (
        "Settings fields not mentioned (as `field` or CAIRN_FIELD) in docs/architecture.md "
        f"or docs/operations.md: {', '.join(missing)}"
    )


def test_the_global_options_and_variables_are_in_cli_md() -> None:
    text = _read(DOCS / "cli.md")
    wanted = ["--store", "--db", "--json", "CAIRN_STORE", "CAIRN_DB", "CAIRN_API_KEY"]
    wanted.append("CAIRN_EMBEDDER")
    missing = [name for name in wanted if f"`{name}" not in text]
    assert not missing, f"docs/cli.md does not mention: {', '.join(missing)}"


def _first_section(markdown: str) -> tuple[str, str]:
    """The first ``## `` section after the title: (heading, body)."""
    sections = re.split(r"^## ", markdown, flags=re.MULTILINE)
    assert len(sections) > 1, "README.md has no ## section"
    heading, _, body = sections[1].partition("\n")
    return heading, body


def test_readme_opens_with_the_two_commands() -> None:
    heading, body = _first_section(_read(ROOT / "README.md"))
    missing = [command for command in ("make run", "make test") if command not in body]
    assert not missing, (
        f"README.md's first section ({heading!r}) does not mention: {', '.join(missing)}"
    )


def test_readme_links_every_docs_page() -> None:
    readme = _read(ROOT / "README.md")
    missing = [
        page.name
        for page in sorted(DOCS.glob("*.md"))
        if f"(docs/{page.name})" not in readme and f"(docs/{page.name}#" not in readme
    ]
    assert not missing, f"README.md does not link: {', '.join(missing)}"


def test_policy_md_shows_the_default_policy_verbatim() -> None:
    from cairn.governance.policy import DEFAULT_POLICY_YAML

    assert DEFAULT_POLICY_YAML in _read(DOCS / "policy.md")
