"""``cairn hooks install`` / ``cairn hooks uninstall``: show the change to an agent's
settings as a diff, ask, then write it (the logic is ``cairn.capture.install``).
``cairn hooks trust`` / ``untrust``: which stores the hooks may record into
(``cairn.capture.local`` says why a store must be trusted).

``register(app)`` adds the ``hooks`` group to the main typer app.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from cairn.capture import install, local
from cairn.doors import _render as render
from cairn.errors import InvalidInput, NotFound

__all__ = ["register"]

hooks_app = typer.Typer(
    help="Connect a coding agent to cairn: write (or take back) the hook settings that send "
    "its sessions to the project's timeline.",
    no_args_is_help=True,
)

AgentOpt = Annotated[
    str,
    typer.Option(help="claude (default), gemini, codex, copilot, cursor or opencode."),
]
ProjectOpt = Annotated[
    Path | None,
    typer.Option(help="The project folder (default: the current one).", show_default=False),
]
UserOpt = Annotated[
    bool, typer.Option("--user", help="The user's own settings, for every project.")
]
PluginOpt = Annotated[
    bool,
    typer.Option("--plugin", help="Claude Code: the cairn plugin (hooks, MCP server, skill)."),
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Write without asking.")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show the diff; write nothing.")]


def _executable(given: str | None) -> str:
    """The cairn the hooks will run, by absolute path: it may live in a virtualenv that is
    not on the PATH the agent sees."""
    if given:
        return str(Path(given).absolute())
    running = Path(sys.argv[0])
    if running.name in {"cairn", "cairn.exe"} and running.exists():
        return str(running.absolute())
    found = shutil.which("cairn")
    if found:
        return str(Path(found).absolute())
    beside = Path(sys.executable).with_name("cairn.exe" if os.name == "nt" else "cairn")
    return str(beside)


def _scope(project: Path | None, user: bool) -> install.Scope:
    if user and project is not None:
        raise InvalidInput("give --project or --user, not both", field="project")
    home = Path.home()
    folder = None if user else (project or Path.cwd()).absolute()
    return install.Scope(project=folder, home=home, env=dict(os.environ))


def _run(plan: install.Plan, *, yes: bool, dry_run: bool) -> None:
    for note in plan.notes:
        typer.echo(note, err=True)
    if not plan.changed:
        if plan.action == "install":
            typer.echo(f"nothing to do: cairn's {plan.agent} hooks are already in place")
        else:
            typer.echo(f"nothing to do: no cairn {plan.agent} hooks found")
        return
    # the settings file may have come with a cloned repository: its text reaches the
    # terminal with no control character of its own
    typer.echo(render.shown(plan.diff(), lines=True), nl=False)
    if dry_run:
        return
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput(
                "not a terminal, so cairn cannot ask: nothing was written. "
                "Run again with --yes to write these changes.",
                field="yes",
            )
        if not typer.confirm("Write these changes?", default=False):
            # the person said no: not an error, but not a success a script should go on from
            typer.echo("nothing was written", err=True)
            raise typer.Exit(1)
    install.apply(plan, _state_dir())
    paths = ", ".join(str(c.path) for c in plan.changes if c.changed and c.merged) or ", ".join(
        str(c.path) for c in plan.changes if c.changed
    )
    done = "installed into" if plan.action == "install" else "taken out of"
    typer.echo(f"cairn's {plan.agent} {'plugin' if plan.plugin else 'hooks'} {done} {paths}")


def _state_dir() -> Path:
    return install.default_state_dir(os.environ, Path.home())


@hooks_app.command("install")
def install_command(
    agent: AgentOpt = "claude",
    project: ProjectOpt = None,
    user: UserOpt = False,
    plugin: PluginOpt = False,
    cairn: Annotated[
        str | None,
        typer.Option(
            help="The cairn executable the hooks run (default: this one).", show_default=False
        ),
    ] = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Add cairn's hooks to an agent's settings (merged in: other hooks and settings stay).
    Shows the diff and asks first."""
    scope = _scope(project, user)
    plan = install.plan_install(agent, scope, _executable(cairn), plugin=plugin)
    _run(plan, yes=yes, dry_run=dry_run)
    store = local.nearest_store(str(scope.project)) if scope.project else None
    if store is not None and not local.is_trusted(store):
        typer.echo(
            f"note: the hooks record nothing into {store} until you trust it: if you made "
            "it (or have read its config.toml), run: cairn hooks trust",
            err=True,
        )


@hooks_app.command("uninstall")
def uninstall_command(
    agent: AgentOpt = "claude",
    project: ProjectOpt = None,
    user: UserOpt = False,
    plugin: PluginOpt = False,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Take out exactly what install added: a file install created is removed, one it
    changed is given back as it was (or, if edited since, loses only cairn's entries)."""
    plan = install.plan_uninstall(agent, _scope(project, user), _state_dir(), plugin=plugin)
    _run(plan, yes=yes, dry_run=dry_run)


StoreArg = Annotated[
    Path | None,
    typer.Argument(
        help="The store folder, or the project folder holding it (default: the nearest "
        ".cairn at or above the current folder).",
        show_default=False,
    ),
]


def _store_folder(given: Path | None) -> Path:
    if given is None:
        found = local.nearest_store(None)
        if found is None:
            raise NotFound("no cairn store of yours here or above: name its folder", field="store")
        return found
    inner = given / local.STORE_FOLDER
    return local.as_found(inner if inner.is_dir() else given)


@contextlib.contextmanager
def _trust_list_errors() -> Iterator[None]:
    """What changing the trust list refuses (a link, a list others could write: its message)
    and what it cannot do (a state folder that is a file, unwritable, a lock file that is a
    link) as one-line input errors."""
    try:
        yield
    except ValueError as exc:
        raise InvalidInput(str(exc), field="store") from None
    except OSError as exc:
        where = exc.filename or local.state_folder()
        raise InvalidInput(
            f"cannot keep the list of trusted stores in {where}: {exc.strerror}", field="store"
        ) from None


@hooks_app.command("trust")
def trust_command(store: StoreArg = None) -> None:
    """Let the hooks record into a store. One made here by `cairn init` is trusted already; a
    .cairn that came with a cloned repository is not until you say so, because its settings
    choose where your prompts and tool output go."""
    folder = _store_folder(store)
    with _trust_list_errors():
        local.trust_store(folder)
    typer.echo(f"the hooks now record into {folder}")


@hooks_app.command("untrust")
def untrust_command(store: StoreArg = None) -> None:
    """Stop the hooks recording into a store (nothing already recorded is touched)."""
    folder = _store_folder(store)
    with _trust_list_errors():
        was_trusted = local.untrust_store(folder)
    if was_trusted:
        typer.echo(f"the hooks no longer record into {folder}")
    else:
        typer.echo(f"nothing to do: {folder} was not trusted")


def register(app: typer.Typer) -> None:
    app.add_typer(hooks_app, name="hooks")
