"""What holds on every command, whichever module adds it: the global options are taken
before or after the command name, help names values the way people read them, and each
class of error exits with its own code, documented in docs/cli.md."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from cairn import errors
from cairn.capture import daemon
from cairn.doors import server
from cairn.doors._cli_common import UNAVAILABLE
from cairn.doors.cli import app
from cairn.memory import Memory
from tests.cli.test_cli import Cli

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
GLOBAL = ("--store", "--db", "--key", "--json")
# `cairn hook` is run by coding agents on every prompt and tool call, through a fast path
# that skips the typer app (cairn._main) and knows only --agent and --store; it must never
# fail an agent, so it takes nothing it would have to refuse elsewhere.
OWN_OPTIONS_ONLY = {("hook",): {"--store"}}


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group under ``command`` (hidden ones too: they still run)."""
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield (*path, name), sub
        yield from _commands(sub, (*path, name))


def _tree() -> dict[tuple[str, ...], Any]:
    return dict(_commands(typer.main.get_command(app)))


def test_the_walk_sees_every_module_s_commands() -> None:
    paths = set(_tree())
    # one command from each module that registers some, so an empty walk cannot pass
    expected = [("list",), ("serve",), ("keys", "list"), ("export",), ("daemon", "start"),
                ("hooks", "install"), ("timeline", "search"), ("review", "approve")]  # fmt: skip
    assert set(expected) <= paths, set(expected) - paths


def test_every_command_takes_the_global_options() -> None:
    missing = []
    for path, command in _tree().items():
        taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
        wanted = OWN_OPTIONS_ONLY.get(path, set(GLOBAL))
        missing += [f"cairn {' '.join(path)} {opt}" for opt in sorted(wanted - taken)]
    assert not missing, "commands refusing a global option: " + ", ".join(missing)


def _run(argv: list[str], env: dict[str, str] | None = None, code: int = 0) -> Any:
    result = runner.invoke(app, argv, env={"CAIRN_API_KEY": "", "CAIRN_STORE": "", **(env or {})})
    assert result.exit_code == code, (argv, result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / ".cairn")
    cli.run("remember", "--kind", "fact", "--scope", "acme/app", "--title", "Kept here")
    return cli


@pytest.mark.parametrize(
    "command",
    [["list"], ["review", "list"], ["audit"], ["status"], ["timeline", "root"], ["keys", "list"]],
)
def test_store_key_and_json_work_before_or_after_the_command(cli: Cli, command: list[str]) -> None:
    options = ["--store", str(cli.folder), "--key", cli.keys["curator"], "--json"]
    before = _run([*options, *command]).stdout
    after = _run([*command, *options]).stdout
    split = _run([*options[:2], *command, *options[2:]]).stdout
    assert json.loads(before) == json.loads(after) == json.loads(split)


def test_a_value_after_the_command_wins_and_a_flag_beats_the_environment(
    cli: Cli, tmp_path: Path
) -> None:
    elsewhere = Cli(tmp_path / "elsewhere")  # an empty store, with keys of its own
    key = cli.keys["curator"]
    found = _run(["--store", str(elsewhere.folder), "list", "--store", str(cli.folder),
                  "--key", key, "--json"])  # fmt: skip
    assert [r["content"]["title"] for r in json.loads(found.stdout)] == ["Kept here"]
    # a key before the command beats CAIRN_API_KEY; one after it beats the one before it
    env = {"CAIRN_API_KEY": "cairn_wrong"}
    _run(["--key", key, "list", "--store", str(cli.folder)], env=env)
    _run(["--key", "cairn_wrong", "list", "--key", key, "--store", str(cli.folder)])
    # --db after a command that has no --db of its own: the other store's records, read with
    # this folder's keys
    db = f"sqlite:///{cli.folder / 'cairn.db'}"
    other = _run(["list", "--store", str(elsewhere.folder), "--db", db, "--json",
                  "--key", elsewhere.keys["curator"]])  # fmt: skip
    assert [r["content"]["title"] for r in json.loads(other.stdout)] == ["Kept here"]


def test_serve_mcp_and_keys_take_the_store_after_their_name(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[Path] = []
    monkeypatch.setattr(server, "serve", lambda workspace, **_: served.append(workspace.folder))
    _run(["serve", "--store", str(cli.folder)])  # refused before: "No such option: --store"
    _run(["--store", str(tmp_path / "nowhere"), "serve", "--store", str(cli.folder)])
    assert served == [cli.folder, cli.folder]
    created = _run(["keys", "create", "agent", "--store", str(cli.folder), "--json"])
    listed = _run(["keys", "list", "--json", "--store", str(cli.folder)])
    assert json.loads(created.stdout)["id"] in [k["id"] for k in json.loads(listed.stdout)]
    # mcp checks its key before it starts: a wrong key given after the name is refused
    refused = _run(["mcp", "--store", str(cli.folder), "--key", "cairn_wrong"], code=4)
    assert "unauthenticated" in refused.stderr


def test_limit_is_k_or_limit_and_the_old_k_still_works(cli: Cli) -> None:
    for n in range(3):
        cli.run("remember", "--kind", "fact", "--scope", "acme/app", "--title", f"Fact {n}")
    assert len(cli.run("list", "-k", "2")) == 2
    assert len(cli.run("list", "--limit", "1")) == 1
    assert len(cli.run("audit", "-k", "2")) == 2
    keyword = ["search", "fact", "--mode", "keyword", "--embedder", "static"]
    assert len(cli.run(*keyword, "-k", "2")["items"]) == 2
    assert len(cli.run(*keyword, "--limit", "3")["items"]) == 3
    old = cli.run(*keyword, "--k", "1", code=0)
    assert len(old["items"]) == 1
    help_text = _run(["search", "--help"]).stdout
    assert "--limit" in help_text and "-k" in help_text and "--k " not in help_text


# ---- help ---------------------------------------------------------------------------------

# typer's own names for values, which mean nothing to a reader
PLACEHOLDERS = re.compile(r"<bool>|<list\[|\{[A-Za-z_]+\}")


def test_no_help_shows_a_python_type_or_a_braced_placeholder() -> None:
    shown = []
    for path in [(), *_tree()]:
        result = _run([*path, "--help"], env={"COLUMNS": "200"})
        assert "Usage:" in result.stdout, path
        shown += [f"cairn {' '.join(path)}: {m}" for m in PLACEHOLDERS.findall(result.stdout)]
    assert not shown, shown
    # and the help still says what the values are, and which options are global
    remember = _run(["remember", "-h"], env={"COLUMNS": "200"}).stdout
    assert "<str>" in remember and "Global options" in remember
    assert "Usage: cairn validate [OPTIONS] RECORD_IDS..." in _run(["validate", "-h"]).stdout


# ---- exit codes ---------------------------------------------------------------------------

# The error classes and the exit code docs/cli.md promises for each.
CLASSES = {
    errors.InvalidInput: 2,
    errors.NotFound: 3,
    errors.PermissionDenied: 4,
    errors.Conflict: 5,
    errors.StoreError: 6,
}


def test_each_error_class_has_its_documented_exit_code() -> None:
    table = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = {
        code: int(exit_code)
        for exit_code, codes in re.findall(r"^\| (\d) \| ([^|]*) \|", table, flags=re.MULTILINE)
        for code in re.findall(r"`([a-z_]+)`", codes)
    }
    every = [cls for cls in vars(errors).values() if isinstance(cls, type)
             and issubclass(cls, errors.CairnError)]  # fmt: skip
    # the one code the command line says itself: the background daemon, not the kernel, failed
    cli_only = {"daemon": UNAVAILABLE}
    assert {cls.code: cls.exit_code for cls in every} | cli_only == documented
    for cls, code in CLASSES.items():
        assert cls.exit_code == code, cls


def _fails(argv: list[str], code: int, words: str, env: dict[str, str] | None = None) -> None:
    result = _run(argv, env=env, code=code)
    assert result.stdout == "", argv
    first = result.stderr.splitlines()[0]  # one line, though a database's message may go on
    assert re.match(r"error \([a-z_]+\)( \[[\w.-]+\])?: ", first), first
    assert words in result.stderr, (argv, result.stderr)


def test_every_command_module_says_an_error_and_exits_with_its_class_s_code(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ["--store", str(cli.folder)]
    curator, agent = ["--key", cli.keys["curator"]], ["--key", cli.keys["agent"]]
    nowhere = ["--store", str(tmp_path / "nowhere")]
    # 2: bad input, in the kernel's words or the command line's
    _fails(["remember", "--kind", "fact", "--scope", "a//b", "--title", "t", *store, *curator],
           2, "scope")  # fmt: skip
    _fails(["export", "--db", "mysql://x", *store], 2, "unknown --db")
    _fails(["serve", "--no-tcp", *store], 2, "--no-tcp")
    _fails(["timeline", "events", "--since", "yesterday", *store, *curator], 2, "since")
    usage = _run(["list", "--no-such-option"], code=2)
    assert "No such option" in usage.stderr
    # 3: not found
    _fails(["get", "rec_01NOPE", *store, *curator], 3, "rec_01NOPE")
    _fails(["keys", "revoke", "key_nope", *store], 3, "key_nope")
    _fails(["serve", *nowhere], 3, "cairn init")
    _fails(["daemon", "status", *nowhere], 3, "cairn init")
    _fails(["export", *nowhere], 3, "cairn init")
    # 4: forbidden (no key, a wrong key, or a role that may not)
    _fails(["list", *store], 4, "no API key")
    _fails(["mcp", *store, "--key", "cairn_wrong"], 4, "unknown or revoked")
    _fails(["audit", *store, *agent], 4, "permission_denied")
    _fails(["timeline", "rollup", *store, *agent], 4, "permission_denied")
    # 5: conflict
    dump = tmp_path / "dump.jsonl"
    _run(["export", str(dump), *store])
    _fails(["import", str(dump), *store], 5, "not empty")
    # 6: the database, or the daemon, cannot be reached
    _fails(["export", "--db", "postgresql://u:pw@127.0.0.1:1/x", *store], 6, "store_error")

    def unreachable(*_: object, **__: object) -> None:
        raise daemon.DaemonError("the daemon did not answer within 1 s")

    monkeypatch.setattr(daemon, "start", unreachable)
    _fails(["daemon", "start", *store], 6, "did not answer")


def test_an_unexpected_failure_exits_1(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Memory, "list_records", broken)
    result = runner.invoke(app, ["list", "--store", str(cli.folder), "--key", cli.keys["agent"]])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)


def test_daemon_start_hands_db_on_to_the_server_it_starts(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str | None] = []

    def start(folder: Path, **_: object) -> daemon.DaemonStatus:
        seen.append(os.environ.get("CAIRN_DB"))  # what the `cairn serve` child would inherit
        return daemon.status(folder)

    monkeypatch.setattr(daemon, "start", start)
    monkeypatch.delenv("CAIRN_DB", raising=False)
    db = f"sqlite:///{cli.folder / 'cairn.db'}"
    _run(["daemon", "start", "--store", str(cli.folder), "--db", db, "--json"])
    assert seen == [db]
    assert "CAIRN_DB" not in os.environ  # and this process's environment is as it was
