"""``cairn daemon …`` and ``cairn hook`` for the typer app.

``cairn hook`` itself is dispatched before typer loads (see ``cairn._main``); the command
here serves ``cairn --store DIR hook …``, where global options come first, with the same
code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from cairn.capture import daemon
from cairn.doors._cli_common import (
    DEFAULT_STORE,
    UNAVAILABLE,
    JsonOpt,
    StoreOpt,
    db_url,
    fail_with,
    options,
    store_path,
    want_json,
)
from cairn.errors import NotFound

__all__ = ["register"]

daemon_app = typer.Typer(
    help="Run the server in the background for a store (the coding-agent hooks talk to it).",
    no_args_is_help=True,
)


def _store(store: Path | None) -> Path:
    folder = store_path(store)
    if not (folder / "principals.yaml").is_file():
        raise NotFound(f"no cairn store in {folder}: run 'cairn init'", field="store")
    return folder


def _unavailable(exc: daemon.DaemonError) -> NoReturn:
    # the daemon is a server the command could not reach (or start): the same exit code as
    # an unreachable database
    fail_with("daemon", str(exc), exit_code=UNAVAILABLE)


def _show(state: daemon.DaemonStatus, as_json: bool) -> None:
    if want_json(as_json):
        typer.echo(json.dumps(state.as_dict()))
        return
    if state.running:
        typer.echo(f"running (pid {state.pid}) on {state.socket}\nlog: {state.log}")
    else:
        typer.echo(f"not running\nlog: {state.log}")
    if state.spool_waiting:
        typer.echo("events are waiting in the spool: they are sent when the daemon starts")


@daemon_app.command("start")
def daemon_start(
    store: StoreOpt = None,
    port: Annotated[
        int | None,
        typer.Option(help="also serve HTTP, MCP and A2A on this TCP port (off by default)"),
    ] = None,
    embedder: Annotated[str | None, typer.Option(help="minilm (default) or static")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Start the daemon unless it runs; return once it answers its health check."""
    folder = _store(store)
    try:
        with _database_for_child(db_url()):
            state = daemon.start(folder, port=port, embedder=embedder)
    except daemon.DaemonError as exc:
        _unavailable(exc)
    _show(state, as_json)


@contextmanager
def _database_for_child(db: str | None) -> Iterator[None]:
    """The daemon is a `cairn serve` child, which takes the database from CAIRN_DB: set it
    while the child starts, so a --db given here reaches it."""
    before = os.environ.get("CAIRN_DB")
    if db:
        os.environ["CAIRN_DB"] = db
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CAIRN_DB", None)
        else:
            os.environ["CAIRN_DB"] = before


@daemon_app.command("stop")
def daemon_stop(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the daemon cleanly: requests in flight finish, the store is closed."""
    folder = _store(store)
    before = daemon.status(folder)
    try:
        state = daemon.stop(folder)
    except daemon.DaemonError as exc:
        _unavailable(exc)
    if not want_json(as_json) and before.running:
        typer.echo(f"stopped (pid {before.pid})")
    _show(state, as_json)


@daemon_app.command("status")
def daemon_status(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """Whether the daemon runs (it answers on its socket), its pid and its log."""
    _show(daemon.status(_store(store)), as_json)


def hook_command(
    action: Annotated[str | None, typer.Argument(help="'replay' sends the spool now")] = None,
    agent: Annotated[str, typer.Option(help="claude (default), gemini, codex, …")] = "claude",
    store: StoreOpt = None,
) -> None:
    """Record one coding-agent hook call (JSON on stdin) on the project's timeline."""
    from cairn.capture.hook import main as hook_main

    args = [action] if action else []
    args += ["--agent", agent]
    # a store given here or before the command wins; otherwise the hook finds the store
    # from the payload's cwd (the default ./.cairn would be the hook process's folder)
    given = options().get("store")
    chosen = store or (Path(given) if given and Path(given) != Path(DEFAULT_STORE) else None)
    if chosen is not None:
        args += ["--store", str(chosen)]
    raise typer.Exit(hook_main(args))


def register(app: typer.Typer) -> None:
    app.add_typer(daemon_app, name="daemon")
    app.command("hook")(hook_command)
