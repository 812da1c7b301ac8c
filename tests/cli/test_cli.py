"""The CLI end to end: real store folder, real keys, JSON output, clear errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.errors import InvalidInput, InvalidTransition, NotFound, PermissionDenied, PolicyError

runner = CliRunner()


class Cli:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        result = runner.invoke(app, ["init", "--store", str(folder), "--json"])
        assert result.exit_code == 0, result.output
        self.keys: dict[str, str] = json.loads(result.stdout)["keys"]

    def run(self, *args: str, who: str = "curator", code: int = 0) -> Any:
        argv = [*args, "--store", str(self.folder), "--json", "--key", self.keys[who]]
        result = runner.invoke(app, argv)
        assert result.exit_code == code, (result.stdout, result.stderr)
        return json.loads(result.stdout) if code == 0 and result.stdout.strip() else result

    def db_state(self) -> Any:
        return self.run("status")["counts"]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / ".cairn")


def _remember(cli: Cli, title: str, *extra: str, who: str = "curator") -> Any:
    return cli.run("remember", "--kind", "fact", "--scope", "acme/app", "--title", title,
                   "--body", f"{title} body", *extra, who=who)  # fmt: skip


def test_init_writes_policy_principals_and_hashed_keys(cli: Cli) -> None:
    principals = (cli.folder / "principals.yaml").read_text()
    assert (cli.folder / "policy.yaml").exists()
    for key in cli.keys.values():
        assert key not in principals  # only hashes are stored
    assert (cli.folder / "principals.yaml").stat().st_mode & 0o077 == 0
    again = runner.invoke(app, ["init", "--store", str(cli.folder)])
    assert again.exit_code == InvalidInput.exit_code


def test_remember_get_history_list_round_trip(cli: Cli) -> None:
    created = _remember(cli, "Deploys happen on Tuesdays", "--tag", "ops",
                        "--metadata", '{"impact": "low", "team": {"name": "infra"}}')  # fmt: skip
    record_id = created["record"]["id"]
    cli.run("update", record_id, "--body", "Deploys happen on Wednesdays")
    got = cli.run("get", record_id, "--version", "1")
    assert got["version"]["number"] == 1
    assert got["version"]["content"]["metadata"]["team"] == {"name": "infra"}
    assert [v["number"] for v in cli.run("history", record_id)] == [1, 2]
    listed = cli.run("list", "--kind", "fact", "--metadata", '{"team": {"name": "infra"}}')
    assert [r["id"] for r in listed] == [record_id]
    assert cli.run("list", "--kind", "belief") == []


def test_review_flow_with_stale_proposal_and_rebase(cli: Cli) -> None:
    record_id = _remember(cli, "Tests run with make test")["record"]["id"]
    queued = cli.run("update", record_id, "--body", "make test -j2", who="agent")
    assert queued["decision"] == "queue"
    pending = cli.run("review", "list")
    assert [p["id"] for p in pending] == [queued["proposal"]["id"]]
    as_curator = ["--store", str(cli.folder), "--key", cli.keys["curator"]]
    assert "stale" not in runner.invoke(app, ["review", "list", *as_curator]).stdout
    cli.run("update", record_id, "--body", "make test, always")
    # people see it in the table and in review show (--json prints the proposal as the HTTP
    # API does, and approving says so with exit code 5)
    assert "(stale)" in runner.invoke(app, ["review", "list", *as_curator]).stdout
    shown = runner.invoke(app, ["review", "show", queued["proposal"]["id"], *as_curator])
    assert "STALE: rebase before accepting" in shown.stdout
    refused = cli.run("review", "approve", queued["proposal"]["id"], code=5)
    assert "rebase" in refused.stderr
    rebased = cli.run("rebase", queued["proposal"]["id"], who="agent")
    approved = cli.run("review", "approve", rebased["proposal"]["id"])
    assert approved["version"]["number"] == 3


def test_agent_key_cannot_reach_curator_actions(cli: Cli) -> None:
    record_id = _remember(cli, "Something true")["record"]["id"]
    queued = cli.run("remember", "--kind", "belief", "--scope", "acme/app", "--title", "b",
                     who="agent")  # fmt: skip
    before = cli.db_state()
    code = PermissionDenied.exit_code
    cli.run("review", "approve", queued["proposal"]["id"], who="agent", code=code)
    cli.run("review", "reject", queued["proposal"]["id"], "--reason", "x", who="agent", code=code)
    cli.run("archive", record_id, who="agent", code=code)
    cli.run("publish", "--scope", "acme/app", who="agent", code=code)
    cli.run("audit", who="agent", code=code)
    assert cli.db_state() == before


def test_missing_or_wrong_key_is_refused(cli: Cli) -> None:
    for key_args, message in (
        ([], "error (unauthenticated): no API key: pass --key or set CAIRN_API_KEY"),
        (["--key", "cairn_wrong"], "error (unauthenticated): unknown or revoked API key"),
    ):
        result = runner.invoke(app, ["list", "--store", str(cli.folder), *key_args],
                               env={"CAIRN_API_KEY": ""})  # fmt: skip
        assert result.exit_code == PermissionDenied.exit_code
        assert result.stderr.strip() == message and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["remember", "--kind", "decison", "--scope", "a/b", "--title", "t"],
         InvalidInput.exit_code, "kind"),
        (["remember", "--kind", "fact", "--scope", "a/b", "--title", "t", "--metadata", "{bad"],
         InvalidInput.exit_code, "metadata"),
        (["remember", "--kind", "fact", "--scope", "a//b", "--title", "t"],
         InvalidInput.exit_code, "scope"),
        (["get", "rec_01NOPE"], NotFound.exit_code, "rec_01NOPE"),
        (["transition", "RECORD", "--to", "stale"], PermissionDenied.exit_code, "system"),
        (["transition", "RECORD", "--to", "draft"], InvalidTransition.exit_code, "draft"),
    ],
)  # fmt: skip
def test_bad_input_gets_a_clear_error_and_changes_nothing(
    cli: Cli, args: list[str], code: int, words: str
) -> None:
    record_id = _remember(cli, "A fact")["record"]["id"]
    before = cli.db_state()
    result = cli.run(*[record_id if a == "RECORD" else a for a in args], code=code)
    assert words in result.stderr
    assert result.stdout == ""
    assert cli.db_state() == before


def test_a_policy_typo_is_refused_naming_the_field(cli: Cli) -> None:
    policy = cli.folder / "policy.yaml"
    policy.write_text(policy.read_text().replace("decision: queue", "decison: queue", 1))
    result = runner.invoke(app, ["list", "--store", str(cli.folder), "--key", cli.keys["curator"]])
    assert result.exit_code == PolicyError.exit_code
    assert "decison" in result.stderr


def test_drafts_publish_refresh_vacuum_and_audit(cli: Cli, tmp_path: Path) -> None:
    draft = _remember(cli, "A handoff note", "--draft", who="agent")
    assert draft["record"]["status"] == "draft"
    promoted = cli.run("transition", draft["record"]["id"], "--to", "active")
    assert promoted["record"]["status"] == "active"
    published = cli.run("publish", "--scope", "acme/app", "--name", "r1")
    assert published["decision"] == "approve"
    cli.run("update", draft["record"]["id"], "--body", "after the publish")  # head moves on
    got = cli.run("get", draft["record"]["id"], "--selector", "published")
    assert got["selector_used"]["kind"] == "published"
    assert (got["version"]["number"], got["version"]["content"]["body"]) == (
        1,
        "A handoff note body",
    )  # the published pin, not the head (v2)
    assert cli.run("refresh")["checked"] == 0
    assert cli.run("vacuum")["archived"] == []
    entries = cli.run("audit", "--action", "approve")
    ops = [(e["actor"], e["details"]["op"]) for e in entries]
    assert ops == [
        ("agent", "create"),
        ("curator", "transition"),
        ("curator", "publish"),
        ("curator", "update"),
    ]


def test_tour_prints_every_step() -> None:
    result = runner.invoke(app, ["tour"])
    assert result.exit_code == 0, result.output
    for step in (
        "propose",
        "review and approve",
        "read with a pinned version",
        "stale proposal blocked",
        "rebase",
        "publish",
        "audit",
        "tour complete",
    ):
        assert step in result.stdout, step  # fmt: skip


def test_a_flag_before_the_command_beats_the_environment(cli: Cli, tmp_path: Path) -> None:
    """flags > CAIRN_* > config.toml: --store and --db given before the command win over
    CAIRN_STORE and CAIRN_DB naming another (empty) place, and a command's own flag wins
    over the one before it."""
    record_id = _remember(cli, "Kept where the flags point")["record"]["id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    key = ["--key", cli.keys["curator"], "--json"]

    env = {"CAIRN_STORE": str(elsewhere)}
    got = runner.invoke(app, ["--store", str(cli.folder), "get", record_id, *key], env=env)
    assert got.exit_code == 0, got.stderr
    assert json.loads(got.stdout)["record"]["id"] == record_id

    env = {"CAIRN_DB": f"sqlite:///{elsewhere / 'cairn.db'}"}
    db = f"sqlite:///{cli.folder / 'cairn.db'}"
    out = tmp_path / "export.jsonl"
    exported = runner.invoke(app, ["--db", db, "export", str(out), "--json"], env=env)
    assert exported.exit_code == 0, exported.stderr
    assert json.loads(exported.stdout)["counts"]["record"] == 1

    moved = runner.invoke(
        app, ["--store", str(elsewhere), "get", record_id, "--store", str(cli.folder), *key]
    )
    assert moved.exit_code == 0, moved.stderr


def test_version_and_short_help_on_every_command() -> None:
    from importlib.metadata import version

    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0
    assert shown.output.strip() == f"cairn {version('cairn')}"
    for command in (
        ["-h"],
        ["list", "-h"],
        ["timeline", "search", "-h"],
        ["daemon", "start", "-h"],
    ):
        helped = runner.invoke(app, command)
        assert helped.exit_code == 0, command
        assert "Usage: cairn" in helped.output
