"""``cairn migrate`` / ``cairn export`` / ``cairn import`` through the CLI (typer CliRunner)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cairn.doors import cli_store
from cairn.doors.cli_store import register
from cairn.errors import StoreError
from cairn.model import Principal
from cairn.store.migrations import SQLITE_MIGRATIONS
from cairn.store.pg_migrations import latest_version
from cairn.store.postgres import PostgresStore
from cairn.store.sqlite import SqliteStore
from cairn.workspace import Workspace
from tests.pg import PgCluster, as_uri
from tests.store.test_transfer import _populate

runner = CliRunner()


def _app() -> typer.Typer:
    """The commands on an app of their own, with the main app's global ``--store``."""
    app = typer.Typer()

    @app.callback()
    def _main(ctx: typer.Context, store: Path | None = None, as_json: bool = False) -> None:
        ctx.obj = {"store": store, "json": as_json}

    register(app)
    return app


APP = _app()


def _ok(*args: str, env: dict[str, str] | None = None) -> str:
    result = runner.invoke(APP, list(args), env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


@pytest.fixture
def source(tmp_path: Path, curator: Principal, agent: Principal) -> Path:
    """A cairn folder (made by ``cairn init``) holding a history that touches every table."""
    folder = tmp_path / "source" / ".cairn"
    Workspace(folder).init()
    store = SqliteStore(folder / "cairn.db")
    _populate(store, tmp_path, curator, agent)
    store.close()
    return folder


def test_export_then_import_into_sqlite_and_postgres_gives_identical_exports(
    source: Path, tmp_path: Path, pg_cluster: PgCluster
) -> None:
    dump = tmp_path / "dump.jsonl"
    summary = json.loads(_ok("export", str(dump), "--store", str(source), "--json"))
    assert summary["counts"]["record"] == 3 and summary["file"] == str(dump)
    original = dump.read_text(encoding="utf-8")
    assert _ok("export", "--store", str(source)) == original  # stdout: the export itself

    fresh = tmp_path / "fresh" / ".cairn"
    Workspace(fresh).init()
    out = _ok("import", str(dump), "--store", str(fresh))
    assert out.startswith("imported 3 record")
    assert _ok("export", "--store", str(fresh)) == original

    url = as_uri(pg_cluster.new_database())
    try:
        loaded = json.loads(_ok("import", str(dump), "--db", url, "--json"))
        assert loaded["counts"] == summary["counts"]
        assert _ok("export", env={"CAIRN_DB": url}) == original  # --db from the environment
        with PostgresStore(url) as pg:  # and the copy is searchable at once
            assert pg.chunk_count() > 0
    finally:
        pg_cluster.drop_database(url)


def test_global_store_option_and_stdin(source: Path, tmp_path: Path) -> None:
    original = _ok("--store", str(source), "export")
    fresh = tmp_path / "fresh" / ".cairn"
    Workspace(fresh).init()
    result = runner.invoke(APP, ["--store", str(fresh), "import", "-"], input=original)
    assert result.exit_code == 0, result.stderr
    assert _ok("--store", str(fresh), "export") == original


def test_migrate_reports_versions(source: Path, pg_cluster: PgCluster) -> None:
    sqlite = json.loads(_ok("migrate", "--store", str(source), "--json"))
    latest = len(SQLITE_MIGRATIONS)
    assert (sqlite["backend"], sqlite["before"], sqlite["after"]) == ("sqlite", latest, latest)
    assert sqlite["applied"] == 0

    url = as_uri(pg_cluster.new_database(migrated=False))
    try:
        first = json.loads(_ok("migrate", "--db", url, "--json"))
        assert (first["backend"], first["before"], first["after"]) == (
            "postgres", 0, latest_version()
        )  # fmt: skip
        assert first["applied"] == latest_version() >= 2
        assert _ok("migrate", "--db", url) == f"schema already at version {latest_version()}\n"
    finally:
        pg_cluster.drop_database(url)


def test_errors_print_code_and_exit_with_its_status(source: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    _ok("export", str(dump), "--store", str(source))

    cases = [
        (["import", str(dump), "--store", str(source)], 5, "error (conflict): "),  # not empty
        (["import", str(tmp_path / "missing.jsonl"), "--store", str(source)], 2, "cannot read"),
        (["export", "--store", str(tmp_path / "nowhere")], 3, "error (not_found) [store]: "),
        (["migrate", "--store", str(tmp_path / "nowhere")], 3, "run 'cairn init'"),
        (["export", "--db", "mysql://x"], 2, "error (invalid_input) [db]: unknown --db"),
    ]
    for args, code, message in cases:
        result = runner.invoke(APP, args)
        assert result.exit_code == code, (args, result.stderr)
        assert message in result.stderr, result.stderr

    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(dump.read_text().splitlines(keepends=True)[:-1]))
    fresh = tmp_path / "fresh" / ".cairn"
    Workspace(fresh).init()
    result = runner.invoke(APP, ["import", str(cut), "--store", str(fresh)])
    assert result.exit_code == 2 and "cut short" in result.stderr
    store = SqliteStore(fresh / "cairn.db")
    assert store.count_audit() == 0 and store.counts()["records"] == 0
    store.close()


@pytest.mark.parametrize(
    "db",
    [
        "postgresql://u:hunter2@127.0.0.1:1/x",
        "postgresql://u:hunter2@[::1/x",  # an address the driver cannot read, and quotes
        "postgresql://u@127.0.0.1:1/x?password=hunter2",
        "host=db user=u password=hunter2 dbname=x",
    ],
)
@pytest.mark.parametrize("command", ["export", "migrate"])
def test_a_password_never_reaches_the_output(tmp_path: Path, db: str, command: str) -> None:
    result = runner.invoke(APP, [command, "--db", db])
    assert result.exit_code in (StoreError.exit_code, 2), (result.stderr, result.exception)
    # one line saying what is wrong, not a traceback
    assert "error (" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "hunter2" not in result.stdout + result.stderr


def test_a_failed_export_leaves_no_file(source: Path, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "dump.jsonl"
    result = runner.invoke(APP, ["export", str(target), "--store", str(source)])
    assert result.exit_code == 2 and "cannot write" in result.stderr
    assert not target.parent.exists()


def test_an_export_is_private_and_replaces_only_a_regular_file_outside_the_store(
    source: Path, tmp_path: Path
) -> None:
    """An export holds the whole store: it is written 0600, and never through a link, over a
    pipe or a device, or over the store's own files."""
    made = tmp_path / "dump.jsonl"
    _ok("export", str(made), "--store", str(source))
    assert made.stat().st_mode & 0o777 == 0o600
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for target, said in [
        (link, "not a regular file"),
        (pipe, "not a regular file"),
        (source / "cairn.db", "inside the store folder"),
        (source / "elsewhere.jsonl", "inside the store folder"),
    ]:
        result = runner.invoke(APP, ["export", str(target), "--store", str(source)])
        assert result.exit_code == 2 and said in result.stderr, (target, result.stderr)
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert stat.S_ISFIFO(pipe.lstat().st_mode) and link.is_symlink()
    reopened = SqliteStore(source / "cairn.db")  # the store is as it was
    assert reopened.counts()["records"] > 0
    reopened.close()


def test_a_file_without_line_ends_is_refused_without_being_read_whole(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file without a line end is refused at the longest line the import reads, naming
    it, and nothing is stored; /dev/zero, whose first "line" would never end, is not a
    regular file and is refused before a byte is read."""
    result = runner.invoke(APP, ["import", "/dev/zero", "--store", str(source)])
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert "not a regular file" in result.stderr
    monkeypatch.setattr(cli_store, "MAX_LINE_CHARS", 1_000)
    endless = tmp_path / "one-line.jsonl"
    endless.write_text("x" * 5_000, encoding="utf-8")
    result = runner.invoke(APP, ["import", str(endless), "--store", str(source)])
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert "line 1 is over 1,000 characters" in result.stderr
