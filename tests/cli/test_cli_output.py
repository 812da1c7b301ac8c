"""What the listings print: whole ids in an 80-column terminal, JSON with --json, and a
progress bar on long commands only when a person is watching stderr."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cairn.doors import _render as render
from cairn.doors.cli import app
from cairn.workspace import Workspace
from tests.cli.test_cli import Cli

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_API_KEY": ""})
SCOPE = "acme/platform/payments/ledger"  # long, so a table is tempted to squeeze the ids
# Anything that starts like one of cairn's ids, whole or not: records, versions, proposals,
# audit entries, baselines, keys, timeline nodes.
ID = re.compile(r"\b(?:rec|ver|prp|aud|bsl|key|tl)_[\w.-]*[\w]")


def _events(n: int) -> str:
    lines = [
        {"event_id": f"e-{i}", "ts": f"2026-11-20T09:{i:02d}:00Z", "session_id": "s-1",
         "scope": SCOPE, "role": "user" if i % 2 else "assistant", "kind": "message",
         "text": f"The ledger export number {i} failed on the nightly settlement run"}
        for i in range(n)
    ]  # fmt: skip
    return "\n".join(json.dumps(line) for line in lines) + "\n"


@dataclass(frozen=True)
class World:
    cli: Cli
    record_id: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """A store with records, a queued update, history, a published scope and a timeline."""
    cli = Cli(tmp_path_factory.mktemp("output") / ".cairn")
    ids = []
    for n in range(3):
        made = cli.run("remember", "--kind", "decision", "--scope", SCOPE, "--title",
                       f"Settle the ledger nightly through the batch runner, variant {n}",
                       "--body", f"Ledger settlement runs nightly, variant {n}.")  # fmt: skip
        ids.append(made["record"]["id"])
    cli.run("update", ids[0], "--body", "Ledger settlement runs at 02:00.", who="agent")
    cli.run("publish", "--scope", SCOPE)
    events = cli.folder.parent / "events.jsonl"
    events.write_text(_events(6), encoding="utf-8")
    cli.run("timeline", "append", str(events))
    cli.run("timeline", "rollup")
    return World(cli, ids[0])


# Every listing, as (arguments, who runs it).
LISTINGS: list[tuple[list[str], str]] = [
    (["list"], "curator"),
    (["history", "RECORD"], "curator"),
    (["review", "list"], "curator"),
    (["audit"], "curator"),
    (["keys", "list"], "curator"),
    (["search", "ledger settlement", "--mode", "keyword"], "curator"),
    (["context", "ledger settlement", "--scope", SCOPE], "agent"),
    (["timeline", "root"], "curator"),
    (["timeline", "events"], "curator"),
    (["timeline", "search", "ledger export"], "curator"),
    (["timeline", "recent"], "curator"),
]


def _argv(world: World, args: list[str], who: str) -> list[str]:
    args = [world.record_id if a == "RECORD" else a for a in args]
    return [*args, "--store", str(world.cli.folder), "--key", world.cli.keys[who]]


def _whole(printed: str, ids: set[str]) -> list[str]:
    """The ids ``printed`` shows, each checked to be one of ``ids`` in full: an id cut
    short (``rec_01M80287A6DJ…``) or folded onto the next line would not be."""
    shown = ID.findall(printed)
    assert set(shown) <= ids, f"ids cut short: {set(shown) - ids}\n{printed}"
    return shown


@pytest.mark.parametrize(("args", "who"), LISTINGS, ids=[" ".join(a) for a, _ in LISTINGS])
def test_every_listing_prints_json_and_whole_ids_at_80_columns(
    world: World, args: list[str], who: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _argv(world, args, who)
    as_json = runner.invoke(app, [*argv, "--json"])
    assert as_json.exit_code == 0, as_json.stderr
    # it parses, and it holds every id the table could show
    ids = set(ID.findall(json.dumps(json.loads(as_json.stdout))))

    monkeypatch.setattr(render, "out", Console(width=80, highlight=False, soft_wrap=True))
    shown = runner.invoke(app, argv)
    assert shown.exit_code == 0, shown.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(shown.stdout)  # people get a table or lines, not JSON
    assert _whole(shown.stdout, ids) or not ids, shown.stdout
    for line in shown.stdout.splitlines():
        if line[:1] in "┏┃┡│└":  # a table fits; plain lines wrap in the terminal
            assert len(line) <= 80, line


def test_tables_have_whole_ids_in_a_real_80_column_run(world: World) -> None:
    """The same in a process of its own, given the width the way a terminal gives it."""
    env = {**os.environ, "COLUMNS": "80", "CAIRN_API_KEY": world.cli.keys["curator"],
           "CAIRN_STORE": str(world.cli.folder), "CAIRN_EMBEDDER": "static"}  # fmt: skip
    for args in (["list"], ["review", "list"]):
        ids = set(ID.findall(runner.invoke(app, _argv(world, [*args, "--json"], "curator")).stdout))
        done = subprocess.run([sys.executable, "-m", "cairn", *args], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert _whole(done.stdout, ids), done.stdout
        assert max(len(line) for line in done.stdout.splitlines()) <= 80, done.stdout


def test_keys_list_prints_a_table_unless_asked_for_json(world: World) -> None:
    argv = ["keys", "list", "--store", str(world.cli.folder)]
    table = runner.invoke(app, argv)  # stdout is not a terminal here: still a table
    assert table.exit_code == 0
    assert "principal" in table.stdout and "┃" in table.stdout
    rows = json.loads(runner.invoke(app, [*argv, "--json"]).stdout)
    assert {row["principal"] for row in rows} == {"curator", "agent"}
    assert all(row["id"] in table.stdout for row in rows)


def test_a_table_shows_text_as_written_not_as_markup(tmp_path: Path) -> None:
    cli = Cli(tmp_path / ".cairn")
    cli.run("remember", "--kind", "fact", "--scope", "acme/app", "--title", "[bold]x[/bold] y")
    shown = runner.invoke(app, ["list", "--store", str(cli.folder), "--key", cli.keys["agent"]])
    assert "[bold]x[/bold] y" in shown.stdout


# ---- progress -----------------------------------------------------------------------------


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], io.StringIO]:
    """Make stderr a terminal (or not) for the progress bar; returns what was drawn."""

    def make(is_terminal: bool) -> io.StringIO:
        drawn = io.StringIO()
        console = Console(file=drawn, force_terminal=is_terminal, width=80)
        monkeypatch.setattr(render, "err", console)
        return drawn

    return make


def _long_commands(tmp_path: Path) -> list[tuple[str, list[str], str]]:
    """(bar description, arguments, stdout check) for each command with a progress bar."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cli = Cli(tmp_path / ".cairn")
    store, key = ["--store", str(cli.folder)], ["--key", cli.keys["curator"]]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nSettlement runs nightly.\n", encoding="utf-8")
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps({"kind": "fact", "scope": "acme/app",
                       "title": f"Fact {i}", "body": "b"}) for i in range(3)) + "\n")  # fmt: skip
    events = tmp_path / "events.jsonl"
    events.write_text(_events(3), encoding="utf-8")
    dump = tmp_path / "dump.jsonl"
    fresh = tmp_path / "fresh" / ".cairn"
    Workspace(fresh).init()
    return [
        ("ingest", ["ingest", str(docs / "*.md"), "--scope", "acme/app", *store, *key], "created"),
        ("embedding", ["reindex", *store, *key], "embedded"),
        ("import", ["import", str(records), *store, *key], "stored 3"),
        ("append", ["timeline", "append", str(events), *store, *key], "appended 3"),
        ("rollup", ["timeline", "rollup", *store, *key], "events"),
        ("rebuild", ["timeline", "rebuild-toc", *store, *key], "events"),
        ("export", ["export", str(dump), *store], "exported"),
        ("restore", ["import", str(dump), "--store", str(fresh)], "imported"),
    ]


def test_long_commands_draw_a_progress_bar_on_a_terminal_only(
    tmp_path: Path, terminal: Callable[[bool], io.StringIO]
) -> None:
    for name, argv, said in _long_commands(tmp_path):
        drawn = terminal(True)
        done = runner.invoke(app, argv)
        assert done.exit_code == 0, (argv, done.stderr)
        assert said in done.stdout, (argv, done.stdout)
        assert name in drawn.getvalue(), (name, drawn.getvalue())
        assert "\x1b" not in done.stdout  # the bar never reaches stdout


def test_no_progress_bar_without_a_terminal_or_with_json(
    tmp_path: Path, terminal: Callable[[bool], io.StringIO]
) -> None:
    for name, argv, _ in _long_commands(tmp_path):
        drawn = terminal(False)
        assert runner.invoke(app, argv).exit_code == 0, argv
        assert drawn.getvalue() == "", name
    for name, argv, _ in _long_commands(tmp_path / "json"):
        drawn = terminal(True)
        done = runner.invoke(app, [*argv, "--json"])
        assert done.exit_code == 0, argv
        assert drawn.getvalue() == "", name
        json.loads(done.stdout)


def test_an_export_to_stdout_stays_clean_while_the_bar_draws(
    tmp_path: Path, terminal: Callable[[bool], io.StringIO]
) -> None:
    cli = Cli(tmp_path / ".cairn")
    cli.run("remember", "--kind", "fact", "--scope", "acme/app", "--title", "Kept")
    drawn = terminal(True)
    done = runner.invoke(app, ["export", "--store", str(cli.folder)])
    assert done.exit_code == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert rows[0]["format"] == "cairn-export" and rows[-1]["type"] == "end"
    assert "export" in drawn.getvalue()
