"""What the CLI shows people is what records hold, never what a terminal would act on.

Records, events, reasons and key labels are written by agents and people; text such as a
Markdown heading ``# ESC]0;PWNED BEL ESC[2J`` must reach a terminal as visible escapes
(``\\x1b]0;PWNED\\a\\x1b[2J``), not retitle or clear it, and rich markup in it (``[b]x[/b]``,
``[link=…]``) is shown as written. --json stays the exact stored text."""

from __future__ import annotations

import copy
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cairn.doors import _render as render
from cairn.doors.cli import app
from tests.cli.test_cli import Cli

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_API_KEY": ""})

# What a terminal acts on: C0 but newline (no output here holds a tab), DEL, C1, bidi.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# Each string holds markup and control characters; every word stays under 20 characters so
# that a table never folds one (the markup is then found whole in the output).
SCOPE = "acme/[red]s[/]\x1b[7m"
TITLE = "[b]x[/b] ledger \x1b]0;T\x07\x1b[2J\x9b1m\u202e\u2066!"
BODY = (
    "ledger \x1b[8mhidden\x1b[0m\r\n"
    "[link=https://e.example]l[/link] \x08\x7f\x85\x1b]8;;https://e.example\x07osc8 :warning:\n"
    "\u202eend\rover"
)
TAG = "[red]t[/]\x1b[5m"
METADATA = {"k": "[red]m[/]\x1b[31m"}
REASON = "[red]r[/]\x1b]0;R\x07"
LABEL = "[red]k[/]"  # a label must be printable: markup only
EVENT = "[red]e[/] ledger \x1b]0;E\x07\x1b[2J\u202e"
# the finding: a heading that becomes the title of an ingested document
HEADING = "\x1b]0;PWNED\x07\x1b[2J ledger"


@dataclass(frozen=True)
class World:
    cli: Cli
    record_id: str
    document_id: str
    proposal_id: str
    node_id: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    tmp = tmp_path_factory.mktemp("escapes")
    cli = Cli(tmp / ".cairn")
    made = cli.run("remember", "--kind", "fact", "--scope", SCOPE, "--title", TITLE,
                   "--body", BODY, "--tag", TAG, "--metadata", json.dumps(METADATA))  # fmt: skip
    record_id = made["record"]["id"]
    doc = tmp / "doc.md"
    doc.write_text(f"# {HEADING}\n\n{BODY}\n", encoding="utf-8")
    cli.run("ingest", str(doc), "--scope", SCOPE)
    document_id = next(r["id"] for r in cli.run("list") if r["kind"] == "document")
    cli.run("publish", "--scope", SCOPE)
    rejected = cli.run("update", record_id, "--body", f"v2 {BODY}", who="agent")
    cli.run("review", "reject", rejected["proposal"]["id"], "--reason", REASON)
    pending = cli.run("update", record_id, "--body", f"v3 {BODY}", "--reason", REASON,
                      who="agent")  # fmt: skip
    assert pending["proposal"]["status"] == "pending"
    result = runner.invoke(app, ["keys", "create", "curator", "--label", LABEL,
                                 "--store", str(cli.folder)])  # fmt: skip
    assert result.exit_code == 0, result.output
    events = tmp / "events.jsonl"
    events.write_text("".join(json.dumps({
        "event_id": f"e-{i}", "ts": f"2026-11-20T09:0{i}:00Z", "session_id": "s-1",
        "scope": SCOPE, "role": "user", "kind": "message", "text": f"{EVENT} {i}"}) + "\n"
        for i in range(3)), encoding="utf-8")  # fmt: skip
    cli.run("timeline", "append", str(events))
    cli.run("timeline", "rollup")
    node_id = cli.run("timeline", "root")[0]["node_id"]
    return World(cli, record_id, document_id, pending["proposal"]["id"], node_id)


# (arguments, who runs it, exit code, what it must show as written)
COMMANDS: list[tuple[list[str], str, int, list[str]]] = [
    (["list"], "curator", 0, ["[b]x[/b]", "[red]s[/]\\x1b[7m", "\\x1b]0;PWNED\\a\\x1b[2J"]),
    (
        ["get", "RECORD"],
        "curator",
        0,
        [
            "[b]x[/b] ledger \\x1b]0;T\\a\\x1b[2J\\x9b1m\\u202e\\u2066!",
            "[red]s[/]\\x1b[7m",
            "[red]t[/]\\x1b[5m",
            '{"k": "[red]m[/]\\u001b[31m"}',
            "ledger \\x1b[8mhidden\\x1b[0m\n",
            "[link=https://e.example]l[/link] \\b\\x7f\\x85\\x1b]8;;https://e.example\\aosc8",
            ":warning:",
            "\\u202eend\\rover",
        ],
    ),
    (["get", "DOCUMENT"], "curator", 0, ["\\x1b]0;PWNED\\a\\x1b[2J ledger"]),
    (["history", "RECORD"], "curator", 0, ["[b]x[/b]"]),
    (["review", "list"], "curator", 0, ["[red]s[/]\\x1b[7m"]),
    (["review", "show", "PROPOSAL"], "curator", 0, ["in acme/[red]s[/]\\x1b[7m"]),
    (["audit"], "curator", 0, ["[red]r[/]\\x1b]0;R\\a"]),
    (["search", "ledger", "--mode", "keyword"], "curator", 0, ["[b]x[/b]", "\\x1b]0;PWNED"]),
    (["context", "ledger", "--scope", SCOPE], "agent", 0, ["context of acme/[red]s[/]\\x1b[7m"]),
    (["keys", "list"], "curator", 0, ["[red]k[/]"]),
    (["timeline", "root"], "curator", 0, []),
    (["timeline", "node", "NODE"], "curator", 0, []),
    (["timeline", "events"], "curator", 0, ["[red]e[/] ledger \\x1b]0;E\\a\\x1b[2J\\u202e"]),
    (["timeline", "search", "ledger"], "curator", 0, []),
    (["timeline", "recent"], "curator", 0, ["[red]e[/]"]),
    # an error message quoting what was asked for goes to stderr the same way
    (["get", "rec_[red]x[/]\x1b]0;X\x07"], "curator", 3, ["rec_[red]x[/]\\x1b]0;X\\x07"]),
]
IDS = [" ".join(args) for args, *_ in COMMANDS]


def _argv(world: World, args: list[str], who: str) -> list[str]:
    named = {"RECORD": world.record_id, "DOCUMENT": world.document_id,
             "PROPOSAL": world.proposal_id, "NODE": world.node_id}  # fmt: skip
    return [*(named.get(a, a) for a in args), "--store", str(world.cli.folder),
            "--key", world.cli.keys[who]]  # fmt: skip


def _printed(world: World, args: list[str], who: str, code: int) -> str:
    done = runner.invoke(app, _argv(world, args, who))
    assert done.exit_code == code, (done.stdout, done.stderr)
    return done.stdout + done.stderr


@pytest.mark.parametrize(("args", "who", "code", "needles"), COMMANDS, ids=IDS)
def test_no_command_sends_a_terminal_control_character(
    world: World, args: list[str], who: str, code: int, needles: list[str]
) -> None:
    printed = _printed(world, args, who, code)
    assert not UNSAFE.findall(printed), printed


@pytest.mark.parametrize(("args", "who", "code", "needles"), COMMANDS, ids=IDS)
def test_stored_text_is_shown_as_written_with_visible_escapes(
    world: World,
    args: list[str],
    who: str,
    code: int,
    needles: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI's own consoles, wide enough that no table drops or folds a column."""
    for name in ("out", "err"):
        wide = copy.copy(getattr(render, name))
        wide.size = (1000, 25)
        monkeypatch.setattr(render, name, wide)
    printed = _printed(world, args, who, code)
    assert not UNSAFE.findall(printed), printed
    for needle in needles:
        assert needle in printed, (needle, printed)


def test_json_output_is_the_exact_stored_text(world: World) -> None:
    """--json is not escaped for a terminal: JSON's own escapes keep it exact and plain ASCII
    (no raw control character, no bidi override)."""
    printed = _printed(world, ["get", "RECORD", "--json"], "curator", 0)
    assert printed.isascii()
    content = json.loads(printed)["record"]["content"]
    assert (content["title"], content["scope"]) == (TITLE, SCOPE)
    assert content["body"] == BODY  # CR, BS, DEL, C1 and all
    assert (content["tags"], content["metadata"]) == ([TAG], METADATA)
    listed = _printed(world, ["list", "--json"], "curator", 0)
    assert listed.isascii()
    assert {r["content"]["title"] for r in json.loads(listed)} == {TITLE, HEADING}


def test_a_terminal_gets_styles_but_never_a_sequence_from_the_text(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a colour terminal rich writes its own escape codes; none comes from a record, and
    its markup is not read (no hyperlink, no bold red from a title)."""
    drawn = io.StringIO()
    terminal = type(render.out)(file=drawn, force_terminal=True, color_system="truecolor",
                                width=1000, highlight=False, soft_wrap=True)  # fmt: skip
    monkeypatch.setattr(render, "out", terminal)
    for args in (["list"], ["get", "RECORD"], ["get", "DOCUMENT"], ["audit"]):
        _printed(world, args, "curator", 0)
    shown = drawn.getvalue()
    assert "\x1b[1m" in shown  # `get` prints the title in bold: styles do get through
    for sequence in ("\x1b]", "\x07", "\x1b[2J", "\x1b[7m", "\x1b[8m", "\x9b", "\u202e"):
        assert sequence not in shown, (sequence, shown)
    assert "[b]x[/b]" in shown and "[link=https://e.example]l[/link]" in shown


def test_a_progress_bar_shows_a_file_name_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's name is part of the bar's description while `cairn ingest` reads it."""
    cli = Cli(tmp_path / ".cairn")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "[red]a\x1b]0;F\x07.md").write_text("# A\n\nSettles nightly.\n", encoding="utf-8")
    drawn = io.StringIO()
    monkeypatch.setattr(render, "err", type(render.err)(file=drawn, force_terminal=True, width=200))
    argv = ["ingest", str(docs), "--scope", "acme/app", "--store", str(cli.folder)]
    done = runner.invoke(app, [*argv, "--key", cli.keys["curator"]])
    assert done.exit_code == 0, done.stderr
    shown = drawn.getvalue()
    assert "[red]a\\x1b]0;F\\a.md" in shown, shown
    assert "\x1b]0;" not in shown and "\x07" not in shown


def test_the_clis_consoles_are_the_safe_ones() -> None:
    """Everything above goes through render.out / render.err: they must stay the consoles
    that escape (a plain rich Console would pass ESC through)."""
    for console in (render.out, render.err):
        assert type(console) is not Console
        drawn = io.StringIO()
        safe = copy.copy(console)
        safe.file = drawn
        safe.print("\x1b]0;T\x07[b]x[/b]", markup=False)
        assert drawn.getvalue() == "\\x1b]0;T\\a[b]x[/b]\n"
