"""Files named on the command line: read with a bound, never a FIFO, a device or a file of
the store folder; written (``export``, ``trace download``) only as a new private file.

The attacks this closes: ``--body-file /dev/zero`` and ``timeline append /dev/zero`` (or
stdin from it) read gigabytes; a FIFO with no writer hung ``--body-file``, ``timeline
append`` and ``import`` for ever; ``--body-file .cairn/config.toml`` stored the config, with
its service keys, as a record; ``trace download -o .cairn/principals.yaml`` replaced the
principals file with a zip (and wrote through links, into FIFOs, ``0644``); ``export
data.db --db sqlite:///…/data.db`` renamed the export over the database in use.
"""

from __future__ import annotations

import functools
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from typer.testing import CliRunner, Result

from cairn.doors.cli import app
from cairn.limits import MAX_REQUEST_BYTES
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.blocking import within_seconds

runner = CliRunner(env={"CAIRN_EMBEDDER": "static", "CAIRN_STORE": "", "CAIRN_API_KEY": ""})

REMEMBER = ["remember", "--kind", "fact", "--scope", "acme/app", "--title", "t"]


class Store:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.keys = Workspace(folder).init().keys

    def argv(self, *args: str, who: str = "curator") -> list[str]:
        return [*args, "--store", str(self.folder), "--key", self.keys[who]]

    def run(self, *args: str, who: str = "curator", code: int = 0, **options: Any) -> Result:
        result = runner.invoke(app, self.argv(*args, who=who), **options)
        assert result.exit_code == code, (args, result.stdout, result.stderr, result.exception)
        return result

    def records(self) -> int:
        listed = self.run("list", "--json").stdout
        return len(json.loads(listed))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / ".cairn")


def _refused(result: Result, said: str) -> None:
    """One line saying why, exit 2, no traceback."""
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert said in result.stderr and result.stderr.startswith("error ("), result.stderr


# ---- reading: regular files only, never a FIFO or a device -------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [*REMEMBER, "--body-file", "{}"],
        ["update", "rec_x", "--body-file", "{}"],
        ["timeline", "append", "{}"],
        ["import", "{}"],
    ],
    ids=["remember", "update", "timeline append", "import"],
)
def test_a_fifo_or_a_device_is_refused_at_once(
    store: Store, tmp_path: Path, command: list[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, said in [(fifo, "not a regular file"), (Path("/dev/zero"), "not a regular file"),
                       (tmp_path, "not a regular file")]:  # fmt: skip
        argv = store.argv(*(part.format(path) for part in command))
        result = within_seconds(10, fifo, functools.partial(runner.invoke, app, argv))
        _refused(result, said)
    assert store.records() == 0


class _Endless(io.RawIOBase):
    """stdin that never ends (like ``< /dev/zero``): a reader that does not stop at its
    bound fails the test, long before it fills the memory."""

    def __init__(self, byte: bytes, most: int) -> None:
        self.byte, self.most, self.given = byte, most, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.given > self.most:
            raise AssertionError(f"read {self.given:,} bytes of stdin: no bound")
        size = len(buffer)
        buffer[:size] = self.byte * size
        self.given += size
        return size


@pytest.fixture
def endless_stdin(monkeypatch: pytest.MonkeyPatch) -> list[_Endless]:
    """Every ``runner.invoke`` reads an endless stdin of NUL bytes (no line end)."""
    made: list[_Endless] = []

    def stream(input: Any, charset: str) -> io.BufferedReader:
        made.append(_Endless(b"\0", most=8 * MAX_REQUEST_BYTES + 2**20))
        return io.BufferedReader(made[-1])

    monkeypatch.setattr(typer.testing, "make_input_stream", stream)
    return made


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ([*REMEMBER, "--body-file", "-"], f"over the limit of {MAX_REQUEST_BYTES:,} bytes"),
        (["timeline", "append", "-"], f"line 1 is over {MAX_REQUEST_BYTES:,} characters"),
        (["import", "-"], "line 1 is over"),
    ],
    ids=["remember", "timeline append", "import"],
)
def test_stdin_is_read_with_a_bound(
    store: Store, endless_stdin: list[_Endless], command: list[str], said: str
) -> None:
    _refused(runner.invoke(app, store.argv(*command)), said)
    assert endless_stdin and endless_stdin[-1].given <= 8 * MAX_REQUEST_BYTES + 2**20


@pytest.mark.parametrize("command", [["timeline", "append", "-"], ["import", "-"]])
def test_endless_blank_lines_on_stdin_are_refused(
    store: Store, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """``yes '' | cairn import -``: blank lines are passed over, up to a bound."""
    import cairn.doors._cli_files as cli_files

    monkeypatch.setattr(cli_files, "MAX_BLANK_LINES", 1_000)
    made: list[_Endless] = []

    def stream(input: Any, charset: str) -> io.BufferedReader:
        made.append(_Endless(b"\n", most=100_000))
        return io.BufferedReader(made[-1])

    monkeypatch.setattr(typer.testing, "make_input_stream", stream)
    _refused(runner.invoke(app, store.argv(*command)), "over 1,000 blank lines")


def test_a_body_file_over_the_request_limit_is_refused_naming_the_option(
    store: Store, tmp_path: Path
) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as out:
        out.truncate(MAX_REQUEST_BYTES + 1)
    result = runner.invoke(app, store.argv(*REMEMBER, "--body-file", str(big)))
    _refused(result, f"--body-file: {big} is over the limit of {MAX_REQUEST_BYTES:,} bytes")
    latin = tmp_path / "latin-1.txt"
    latin.write_bytes(b"caf\xe9")
    _refused(runner.invoke(app, store.argv(*REMEMBER, "--body-file", str(latin))), "not UTF-8")
    fine = tmp_path / "fine.txt"
    fine.write_text("A body from a file.\n", encoding="utf-8")
    made = json.loads(store.run(*REMEMBER, "--body-file", str(fine), "--json").stdout)
    shown = store.run("get", made["record"]["id"], "--json").stdout
    assert json.loads(shown)["version"]["content"]["body"] == "A body from a file.\n"


# ---- reading: never the store folder ------------------------------------------------------


def test_no_file_of_the_store_folder_is_read_as_input(store: Store, tmp_path: Path) -> None:
    folder = store.folder
    (folder / "config.toml").write_text('[retrieval]\nreranker_key = "sk-SECRET"\n')
    record = json.loads(store.run(*REMEMBER, "--body", "b", "--json").stdout)["record"]["id"]
    link = tmp_path / "innocent.txt"
    link.symlink_to(folder / "config.toml")
    hard = tmp_path / "copy.yaml"
    os.link(folder / "principals.yaml", hard)  # another name for the same file
    for path in [folder / "config.toml", folder / "principals.yaml", link, hard]:
        for command in ([*REMEMBER, "--body-file", str(path)],
                        ["update", record, "--body-file", str(path)],
                        ["timeline", "append", str(path)],
                        ["import", str(path)]):  # fmt: skip
            result = runner.invoke(app, store.argv(*command))
            _refused(result, "store folder")
    assert store.records() == 1
    everything = runner.invoke(app, ["export", "--store", str(folder)]).stdout
    assert "sk-SECRET" not in everything and "sha256" not in everything


def test_a_store_file_that_is_a_link_out_of_the_folder_is_refused_by_either_name(
    store: Store, tmp_path: Path
) -> None:
    """``config.toml`` kept as a link to a secret mount (``secrets/cairn.toml``): read as
    ``.cairn/config.toml`` or as the file it leads to, it is still the store's config."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "cairn.toml").write_text('[retrieval]\nreranker_key = "sk-live-123"\n')
    (store.folder / "config.toml").unlink(missing_ok=True)
    (store.folder / "config.toml").symlink_to(secrets / "cairn.toml")
    for path, said in [
        (store.folder / "config.toml", "is inside the store folder"),  # the name it has there
        (secrets / "cairn.toml", "is a file of the store folder"),  # the file it names
    ]:
        result = runner.invoke(app, store.argv(*REMEMBER, "--body-file", str(path)))
        _refused(result, said)
    assert store.records() == 0


def test_a_path_swapped_into_the_store_folder_after_its_check_is_still_refused(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder on the path swapped for a link to the store folder between the check of the
    path and its opening opens a file of the store: where the opened file really is, is
    asked of its descriptor. (A file below the top of the store folder, with one link, is
    what only that finds.)"""
    import cairn.doors._cli_files as cli_files

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("the kernel says where a descriptor was opened only through /proc")
    harmless = tmp_path / "notes.txt"
    harmless.write_text("harmless\n")
    kept = store.folder / "traces" / "kept.json"
    kept.parent.mkdir(exist_ok=True)
    kept.write_text('{"kept": "inside the store"}\n')
    checked = cli_files._refuse_store_folder

    def swapped_after_the_check(file: Path, *args: Any) -> Path:
        checked(file, *args)  # the path passes when it is checked ...
        return kept  # ... and is a file of the store when opened

    monkeypatch.setattr(cli_files, "_refuse_store_folder", swapped_after_the_check)
    for command in ([*REMEMBER, "--body-file", str(harmless)], ["import", str(harmless)]):
        _refused(runner.invoke(app, store.argv(*command)), "store folder")
    assert store.records() == 0


# ---- writing: trace download and export ---------------------------------------------------


def test_a_trace_download_is_written_like_an_export(store: Store, tmp_path: Path) -> None:
    store.run("graph", "ingest", "--example")
    answer = store.run("why", "acme-emea-end-onprem-connector-support-2025", "--json").stdout
    trace = json.loads(answer)["trace_id"]
    principals = (store.folder / "principals.yaml").read_bytes()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.zip"
    link.symlink_to(victim)
    fifo = tmp_path / "pipe.zip"
    os.mkfifo(fifo)
    for target, said in [
        (store.folder / "principals.yaml", "inside the store folder"),
        (store.folder / "bundle.zip", "inside the store folder"),
        (link, "not a regular file"),
        (fifo, "not a regular file"),
    ]:
        argv = store.argv("trace", "download", trace, "-o", str(target))
        _refused(within_seconds(10, fifo, functools.partial(runner.invoke, app, argv)), said)
    assert (store.folder / "principals.yaml").read_bytes() == principals
    assert victim.read_text() == "keep me" and stat.S_ISFIFO(fifo.lstat().st_mode)
    made = tmp_path / "bundle.zip"
    store.run("trace", "download", trace, "-o", str(made))
    assert made.read_bytes()[:2] == b"PK" and stat.S_IMODE(made.stat().st_mode) == 0o600
    store.run("status")  # the store still opens


def test_an_export_never_replaces_the_database_in_use(store: Store, tmp_path: Path) -> None:
    """A SQLite database outside the store folder (--db) and the files SQLite keeps next to
    it are refused as export targets, by their path or as the same file."""
    store.run(*REMEMBER, "--body", "b")
    data = tmp_path / "data.db"
    data.write_bytes((store.folder / "cairn.db").read_bytes())
    db = f"sqlite:///{data}"
    hard = tmp_path / "other-name.db"
    os.link(data, hard)
    for target in [data, tmp_path / "data.db-wal", tmp_path / "data.db-journal", hard]:
        result = runner.invoke(app, ["export", str(target), "--store", str(store.folder),
                                     "--db", db])  # fmt: skip
        _refused(result, "the database in use")
    reopened = SqliteStore(data)
    assert reopened.counts()["records"] == 1
    reopened.close()
    elsewhere = tmp_path / "dump.jsonl"
    runner.invoke(app, ["export", str(elsewhere), "--store", str(store.folder), "--db", db])
    assert elsewhere.read_text().startswith('{"format":"cairn-export"')
