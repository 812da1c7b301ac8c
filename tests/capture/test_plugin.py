"""The Claude Code plugin (plugins/claude-code): its JSON parses, it is laid out as Claude
Code loads plugins, and it names only MCP tools and CLI commands that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from cairn.capture.install import claude_hooks_block, plugin_source
from cairn.doors.cli import app
from cairn.doors.mcp_server import MCP_TOOLS

ROOT = Path(__file__).resolve().parents[2]
MARKET = ROOT / "plugins" / "claude-code"
PLUGIN = MARKET / "cairn"
TOOL_PREFIX = "mcp__plugin_cairn_cairn__"  # mcp__plugin_<plugin>_<server>__<tool>


def _json(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def _mcp_tools() -> set[str]:
    """The tools cairn's MCP server registers (tests/doors/test_mcp.py checks the server
    lists exactly these)."""
    return set(MCP_TOOLS)


def _cli_commands() -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()

    def walk(command: Any, prefix: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found.add((*prefix, name))
            walk(sub, (*prefix, name))

    walk(typer.main.get_command(app), ())
    return found


def _markdown() -> list[Path]:
    return sorted([*PLUGIN.glob("commands/*.md"), *PLUGIN.glob("skills/*/SKILL.md")])


def _frontmatter(path: Path) -> dict[str, str]:
    text = path.read_text("utf-8")
    assert text.startswith("---\n"), path
    head = text.split("---\n", 2)[1]
    fields = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def test_every_json_file_parses() -> None:
    files = sorted(p for p in MARKET.rglob("*.json"))
    assert len(files) == 4
    for path in files:
        _json(path)


def test_the_layout_is_the_one_claude_code_loads() -> None:
    manifest = _json(PLUGIN / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == "cairn"
    assert re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"])
    market = _json(MARKET / ".claude-plugin" / "marketplace.json")
    assert market["owner"]["name"]
    assert [(p["name"], p["source"]) for p in market["plugins"]] == [("cairn", "./cairn")]
    assert (PLUGIN / "skills" / "memory" / "SKILL.md").is_file()
    assert {p.stem for p in PLUGIN.glob("commands/*.md")} == {
        "memory-search",
        "memory-recent",
        "memory-context",
    }


def test_the_hooks_are_the_ones_install_writes() -> None:
    hooks = _json(PLUGIN / "hooks" / "hooks.json")
    assert hooks["hooks"] == claude_hooks_block("cairn hook --agent claude")


def test_the_mcp_server_takes_its_key_from_the_environment() -> None:
    server = _json(PLUGIN / ".mcp.json")["mcpServers"]["cairn"]
    assert (server["command"], server["args"]) == ("cairn", ["mcp"])
    assert re.fullmatch(r"\$\{CAIRN_API_KEY(:-)?\}", server["env"]["CAIRN_API_KEY"])
    text = (PLUGIN / ".mcp.json").read_text("utf-8")
    assert "cairn_sk" not in text and "key_" not in text


@pytest.mark.parametrize("path", _markdown(), ids=lambda p: p.name)
def test_frontmatter_says_what_claude_code_needs(path: Path) -> None:
    fields = _frontmatter(path)
    assert fields.get("description"), path
    if path.name == "SKILL.md":
        assert fields["name"] == path.parent.name


@pytest.mark.parametrize("path", _markdown(), ids=lambda p: p.name)
def test_only_tools_and_commands_that_exist_are_named(path: Path) -> None:
    text = path.read_text("utf-8")
    tools = set(re.findall(TOOL_PREFIX + r"(\w+)", text))
    assert tools, f"{path.name} names no cairn tool"
    assert tools <= _mcp_tools(), tools - _mcp_tools()
    commands = set(re.findall(r"cairn timeline ([a-z-]+)", text))
    known = {path[1] for path in _cli_commands() if path[0] == "timeline" and len(path) == 2}
    assert commands <= known, commands - known
    # allowed-tools may only pre-approve what the body uses
    allowed = _frontmatter(path).get("allowed-tools", "")
    assert set(re.findall(TOOL_PREFIX + r"(\w+)", allowed)) <= tools


def test_the_skill_covers_the_whole_hierarchy_and_citations() -> None:
    text = (PLUGIN / "skills" / "memory" / "SKILL.md").read_text("utf-8")
    assert (
        "year → month → week → day →\nsegment" in text
        or "year → month → week → day → segment" in text
    )
    for tool in ("timeline_search", "timeline_recent", "timeline_expand", "timeline_events"):
        assert TOOL_PREFIX + tool in text
    assert "[level node_id vVERSION]" in text
    assert "(event_id, ts)" in text


def test_install_finds_the_plugins() -> None:
    assert plugin_source() == ROOT / "plugins"
