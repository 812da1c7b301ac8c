"""The README's tour is run as a newcomer types it, and what it shows is what cairn prints.

``## A 5-minute tour`` is read from README.md: its ``sh`` blocks and the ``$ `` lines of its
``console`` blocks are run in order, in one bash process (so ``cd``, ``export``, ``eval``
and variables carry over), in a fresh folder, with ``cairn`` on the PATH running this
checkout. Each command's output is compared with the output the README shows under it,
after only what legitimately differs from run to run is normalised (see ``normalise``):
a README that shows output cairn no longer prints fails here, and is fixed by showing what
cairn prints now. An ``error (…)`` line the README shows must also exit with the code of
its error class, and the exit codes the prose claims are those codes.

The steps that need programs a test cannot assume, or that change the user's machine, are
not run; ``SKIPPED`` names each one with its reason.

``make run``'s own claims (the tour on a throwaway store, ``cairn init`` the first time
only, the server's address) are checked at the end; ``tests/cli/test_cli.py`` checks that
``cairn tour`` prints each of its steps.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cairn.config import Settings
from cairn.errors import error_class

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TOUR = "## A 5-minute tour"
# The width the README's tables were drawn at (a roomy terminal: no column is dropped).
COLUMNS = 120

# Steps of the tour that are not run, each with why. A step is skipped when its command
# contains the text on the left; the test fails if the README no longer has such a step.
SKIPPED = {
    "cairn hooks install": "writes the coding agent's settings (.claude/settings.json) in the "
    "user's project; tests/capture covers it on a throwaway project",
    "cairn daemon status": "reports a background daemon that only a coding agent's hooks "
    "start (after `cairn hooks install`); tests/capture covers it",
    "claude mcp add": "needs the Claude Code program and changes its configuration; the MCP "
    "server it starts is tested in tests/doors",
}


@dataclass(frozen=True)
class Step:
    line: int  # where the command starts in README.md, for the failure message
    command: str
    shown: str  # the output the README shows under it ("" for an sh block)


def tour_section(text: str) -> tuple[int, str]:
    """The tour section of the README (up to the next ``## `` heading), and its first
    line's number."""
    lines = text.split("\n")
    start = lines.index(TOUR)
    end, fenced = len(lines), False
    for n in range(start + 1, len(lines)):
        if lines[n].startswith("```"):
            fenced = not fenced
        elif lines[n].startswith("## ") and not fenced:  # not a heading inside a block
            end = n
            break
    return start + 1, "\n".join(lines[start:end])


_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
_HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")


def tour_steps(text: str) -> tuple[list[Step], list[Step]]:
    """(the steps to run, the steps skipped), in the README's order."""
    first_line, section = tour_section(text)
    run: list[Step] = []
    skipped: list[Step] = []
    for fence in _FENCE.finditer(section):
        language, body = fence.group(1), fence.group(2)
        line = first_line + section.count("\n", 0, fence.start(2))
        assert language in ("sh", "console"), (
            f"README.md:{line}: a {language or 'plain'} block in the tour: run it here or "
            "make it an sh or console block"
        )
        steps = [Step(line, body.rstrip("\n"), "")] if language == "sh" else _console(body, line)
        for step in steps:
            skip = any(marker in step.command for marker in SKIPPED)
            (skipped if skip else run).append(step)
    return run, skipped


def _console(body: str, first_line: int) -> list[Step]:
    """The ``$ `` commands of a console block, each with the lines shown under it (a
    here-document's lines belong to its command)."""
    steps: list[Step] = []
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        assert line.startswith("$ "), (
            f"README.md:{first_line + i}: output before any command in a console block"
        )
        command, start = [line[2:]], i
        i += 1
        heredoc = _HEREDOC.search(line)
        if heredoc:
            while i < len(lines) and lines[i] != heredoc.group(1):
                command.append(lines[i])
                i += 1
            command.append(lines[i])
            i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        steps.append(Step(first_line + start, "\n".join(command), "\n".join(shown)))
    return steps


# ---- normalising --------------------------------------------------------------------------

# cairn's ULID ids: proposals, records, versions, baselines, audit entries, graph traces.
_ULID_ID = re.compile(r"\b(prp|rec|ver|bsl|aud|trc)_[0-9A-HJKMNP-TV-Z]{26}\b")
# a time of day of the run (the audit's `when`), not one inside a timestamp the tour wrote
_CLOCK = re.compile(r"(?<![T\d:])\d{2}:\d{2}:\d{2}(?![\d+:.])")
# how long each stage of a read took
_TIMING = re.compile(r"\b\d+\.\d ms\b")


class Ids:
    """Names each id by its kind and the order it first appeared in (``<rec 2>``), so the
    same id stays the same name across the whole tour: the README's ``rec_…`` in a cite
    line must be the record it approved earlier, in the run as on the page."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, match: re.Match[str]) -> str:
        kind = match.group(1)
        if match.group(0) not in self.names:
            n = sum(name.startswith(f"<{kind} ") for name in self.names.values()) + 1
            self.names[match.group(0)] = f"<{kind} {n}>"
        return self.names[match.group(0)]


def normalise(text: str, ids: Ids) -> str:
    text = _ULID_ID.sub(ids, text)
    text = _CLOCK.sub("HH:MM:SS", text)
    text = _TIMING.sub("N ms", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n"))


# ---- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    output: str
    exit_code: int


def _cairn_command(folder: Path) -> Path:
    """A folder holding a ``cairn`` command that runs this checkout (what
    ``export PATH="$PWD/.venv/bin:$PATH"`` gives a newcomer)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    cairn = bin_dir / "cairn"
    cairn.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(str(ROOT / 'src'))} "
        f'exec {shlex.quote(sys.executable)} -m cairn "$@"\n',
        encoding="utf-8",
    )
    cairn.chmod(0o755)
    return bin_dir


def _mark(n: int, what: str) -> str:
    return f"@@cairn-tour {n} {what}@@"


def run_steps(steps: list[Step], folder: Path) -> list[Ran]:
    """Run ``steps`` in one bash process in ``folder``: each between two marker lines, the
    second with its exit status; stderr goes with stdout, in order, as on a terminal."""
    bin_dir = _cairn_command(folder)
    home = folder / "home"
    home.mkdir()
    work = folder / "clone"
    work.mkdir()
    script = ["set -o pipefail", "exec 2>&1"]
    for n, step in enumerate(steps):
        script += [f"echo '{_mark(n, 'start')}'", step.command, f'echo "{_mark(n, "exit")} $?"']
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "COLUMNS": str(COLUMNS),
        "NO_COLOR": "1",
        "TERM": "dumb",
        # the test session's own config and state folders (tests/conftest.py), never the user's
        "XDG_CONFIG_HOME": os.environ.get("XDG_CONFIG_HOME", str(home / ".config")),
        "XDG_STATE_HOME": os.environ.get("XDG_STATE_HOME", str(home / ".local/state")),
    }
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    transcript = done.stdout
    results = []
    for n in range(len(steps)):
        start = transcript.find(_mark(n, "start") + "\n")
        end = transcript.find(_mark(n, "exit") + " ", start)
        assert start != -1 and end != -1, (
            f"the tour stopped at README.md:{steps[n].line}:\n{transcript[-3000:]}"
        )
        output = transcript[start + len(_mark(n, "start")) + 1 : end]
        status = transcript[end + len(_mark(n, "exit")) + 1 :].split("\n", 1)[0]
        results.append(Ran(output, int(status)))
    return results


# ---- the tests ----------------------------------------------------------------------------


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_tour_is_read_whole() -> None:
    """A guard against a parser that silently finds little (and so checks little)."""
    run, skipped = tour_steps(_readme())
    commands = "\n".join(step.command for step in run)
    for expected in ("cairn init", "cairn review approve", "cairn rebase", "cairn ingest",
                     "cairn search", "cairn publish", "cairn timeline expand", "cairn audit",
                     "cairn graph ingest --example", "cairn why"):  # fmt: skip
        assert expected in commands, expected
    assert sum(bool(step.shown) for step in run) >= 20
    # every skip still names a step of the README, and nothing else is skipped
    for marker in SKIPPED:
        assert any(marker in step.command for step in skipped), f"no {marker!r} step to skip"
    assert len(skipped) == len(SKIPPED)


@pytest.mark.skipif(
    shutil.which("jq") is None or shutil.which("bash") is None,
    reason="the tour needs bash and jq, as the README says (apt-get install jq)",
)
def test_the_readme_tour_runs_and_prints_what_it_shows(tmp_path: Path) -> None:
    steps, _ = tour_steps(_readme())
    results = run_steps(steps, tmp_path)
    shown_ids, printed_ids = Ids(), Ids()
    problems = []
    for step, ran in zip(steps, results, strict=True):
        where = f"README.md:{step.line}: $ {step.command.splitlines()[0]}"
        shown = normalise(step.shown, shown_ids)
        printed = normalise(ran.output, printed_ids)
        if printed != shown:
            problems.append(
                f"{where}\n--- the README shows:\n{shown}\n--- cairn prints:\n{printed}"
            )
        error = re.match(r"error \((\w+)\)", shown)
        if error:
            cls = error_class(error.group(1))
            assert cls is not None, f"{where}: no error class has the code {error.group(1)}"
            wanted = cls.exit_code
        else:
            wanted = 0
        if ran.exit_code != wanted:
            problems.append(f"{where}\nexits with {ran.exit_code}, not {wanted}\n{ran.output}")
    assert not problems, "\n\n".join(problems)


def test_the_exit_codes_the_tour_states_are_those_of_its_errors() -> None:
    """The prose says "(exit code 5)" before a stale proposal is refused, and so on: each
    stated code is the exit code of the error the step shows, which the run above checks
    the command exits with. (`cairn validate`'s "exit code 1 if one is not" is checked in
    tests/cli/test_cli_retrieval.py.)"""
    _, section = tour_section(_readme())
    flat = " ".join(section.split())
    claims = [
        ("refuses to accept it as it is (exit code 5)", "stale_proposal", 5),
        ("An agent cannot decide proposals (exit code 4)", "permission_denied", 4),
        ("is a duplicate (exit code 5)", "duplicate_content", 5),
    ]
    for claim, code, stated in claims:
        assert claim in flat, f"the tour no longer says {claim!r}"
        assert f"\nerror ({code})" in section, f"the tour shows no {code} error"
        cls = error_class(code)
        assert cls is not None and cls.exit_code == stated, (claim, code)


# ---- make run -----------------------------------------------------------------------------


def _make_run_recipe() -> list[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert recipe, "the Makefile has no run target"
    return [line.strip() for line in recipe.group(1).splitlines()]


def test_make_run_tours_then_inits_once_then_serves(tmp_path: Path) -> None:
    """What the README says `make run` does: `cairn tour` on a store in a temporary folder
    it deletes; `cairn init` for ./.cairn the first time only, its two keys printed only
    then; `cairn serve` on 127.0.0.1:8765 (not run here: it blocks). The recipe's lines are
    run as make runs them, with this checkout's `cairn` for `.venv/bin/cairn`."""
    readme = " ".join(_readme().split())
    for claim in (
        "`make run` first runs `cairn tour`: it creates a store in a temporary folder, runs "
        "the whole propose → review → publish → audit loop, and deletes the folder.",
        "Then, the first time only, it runs `cairn init` to create `./.cairn` (the two keys "
        "it prints are shown only then).",
        "Finally it runs `cairn serve`: the HTTP API, MCP and the A2A agent on "
        "`http://127.0.0.1:8765`.",
        "`.venv/bin/cairn keys create agent` makes another one",
        "`demo/` is ignored by git",
    ):
        assert claim in readme, f"the README no longer says: {claim}"
    assert _make_run_recipe() == [
        "$(BIN)/cairn tour",
        "test -f .cairn/principals.yaml || $(BIN)/cairn init",
        "$(BIN)/cairn serve",
    ]
    tour, init, _serve = _make_run_recipe()
    assert (Settings().host, Settings().port) == ("127.0.0.1", 8765)
    assert "demo/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()

    bin_dir = _cairn_command(tmp_path)
    clone = tmp_path / "clone"
    clone.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env |= {"COLUMNS": str(COLUMNS), "NO_COLOR": "1"}

    def sh(line: str, **extra: str) -> str:
        done = subprocess.run(["sh", "-c", line.replace("$(BIN)", str(bin_dir))], cwd=clone,
                              env=env | extra, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        return done.stdout

    toured = sh(tour)
    for step in ("step 1: init", "propose", "review and approve", "publish", "audit"):
        assert step in toured, step
    assert "tour complete" in toured
    made_in = re.search(r"a fresh store in (\S+)", toured)
    assert made_in, toured
    assert not Path(made_in.group(1)).parent.exists(), "the tour left its folder behind"
    assert list(clone.iterdir()) == [], "the tour wrote into the project folder"

    first = sh(init)
    assert "key for curator: cairn_" in first and "key for agent: cairn_" in first, first
    assert sh(init) == "", "a second make run runs cairn init again"
    # the second terminal: another agent key, which works
    key = sh("$(BIN)/cairn keys create agent").strip().splitlines()[-1]
    assert key.startswith("cairn_")
    assert "records" in sh("$(BIN)/cairn status", CAIRN_API_KEY=key)
