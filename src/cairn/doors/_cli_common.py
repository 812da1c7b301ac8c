"""What every ``cairn`` command shares: the global options, the one error → exit code
mapping, and help that names values the way people read them.

``CairnGroup`` is the root command's class. When typer has built the command tree it walks
every command and sub-command, including those other modules register, so a new command
cannot forget any of this:

- it accepts ``--store``, ``--db``, ``--key`` and ``--json`` after its name as well as
  before it (a command that declares one with the shared types below keeps its own
  parameter; the others get it added). Given after the name, a value wins over one given
  before it, which wins over the environment;
- every error a command lets out is printed as one line and exits with its class's code;
- help never shows ``<bool>``, ``<list[str]>`` or ``{query}``.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import typer.main
from pydantic import ValidationError
from rich.markup import escape
from typer._click.globals import get_current_context  # click's, inside typer's own copy
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from cairn.doors import _render as render
from cairn.errors import CairnError, InvalidInput, StoreError

__all__ = [
    "DEFAULT_STORE",
    "OWN_OPTIONS_ONLY",
    "UNAVAILABLE",
    "CairnGroup",
    "DbOpt",
    "GlobalDbOpt",
    "GlobalKeyOpt",
    "GlobalStoreOpt",
    "JsonOpt",
    "KeyOpt",
    "StoreOpt",
    "api_key",
    "db_url",
    "errors",
    "fail",
    "fail_with",
    "options",
    "store_path",
    "want_json",
]

DEFAULT_STORE = Path(".cairn")
# "server unreachable": the database, or the background daemon, cannot be reached.
UNAVAILABLE = StoreError.exit_code
GLOBAL_PANEL = "Global options (before or after the command name)"


# Commands that take only the options they declare. `cairn hook` is run by coding agents on
# every prompt and tool call, by a fast path that skips typer (cairn._main) and knows only
# --agent and --store.
OWN_OPTIONS_ONLY = frozenset({"hook"})


def options() -> dict[str, Any]:
    """The global options of the command being run: the root callback's ``ctx.obj`` (what
    was given before the command name, or in the environment), updated by what was given
    after it. A command's context shares its parent's ``obj``; empty outside a command."""
    ctx = get_current_context(silent=True)
    obj = ctx.obj if ctx is not None else None
    return obj if isinstance(obj, dict) else {}


def _keep(name: str) -> Callable[[typer.Context, Any], Any]:
    """A typer option callback that records a value given after the command name."""

    def keep(ctx: typer.Context, value: Any) -> Any:
        if value is not None and value is not False:
            ctx.ensure_object(dict)[name] = value
        return value

    return keep


# Before the command name (the root callback): these read the environment.
GlobalStoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        envvar="CAIRN_STORE",
        help="The cairn folder (default ./.cairn).",
        show_default=False,
    ),
]
GlobalDbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="CAIRN_DB",
        help="postgresql://… or sqlite:///path (default: config.toml, else the folder's cairn.db).",
        show_default=False,
    ),
]
GlobalKeyOpt = Annotated[
    str | None,
    typer.Option("--key", envvar="CAIRN_API_KEY", help="Your API key.", show_default=False),
]

# After the command name: no environment variable here, so that a flag given before the
# command still beats the environment (flags > CAIRN_* > config.toml > defaults).


def _after_command(flag: str, help: str, *, show_default: bool = False) -> Any:
    """A global option as a command takes it after its name: listed in the global panel,
    and kept for the resolvers below (``_keep``) under the flag's name."""
    return typer.Option(
        flag,
        help=help,
        callback=_keep(flag.removeprefix("--")),
        rich_help_panel=GLOBAL_PANEL,
        show_default=show_default,
    )


StoreOpt = Annotated[
    Path | None,
    _after_command("--store", "The cairn folder (default: CAIRN_STORE, else ./.cairn)."),
]
DbOpt = Annotated[
    str | None,
    _after_command(
        "--db",
        "postgresql://… or sqlite:///path (default: CAIRN_DB, config.toml, else the "
        "folder's cairn.db).",
    ),
]
KeyOpt = Annotated[str | None, _after_command("--key", "Your API key (default: CAIRN_API_KEY).")]
JsonOpt = Annotated[
    bool, _after_command("--json", "Print machine-readable JSON.", show_default=True)
]


# Each resolver falls back on the environment itself, for the commands registered on an app
# whose root does not read it (a test's, or an embedding program's).


def store_path(store: Path | None = None) -> Path:
    """--store after the command, else before it, else CAIRN_STORE, else ./.cairn."""
    given = store or options().get("store") or os.environ.get("CAIRN_STORE")
    return Path(given) if given else DEFAULT_STORE


def db_url(db: str | None = None) -> str | None:
    """--db after the command, else before it, else CAIRN_DB; None: config.toml or the
    folder's SQLite file decide."""
    given = db or options().get("db") or os.environ.get("CAIRN_DB")
    return str(given) if given else None


def api_key(key: str | None = None) -> str | None:
    """--key after the command, else before it, else CAIRN_API_KEY."""
    given = key or options().get("key") or os.environ.get("CAIRN_API_KEY")
    return str(given) if given else None


def want_json(flag: bool = False) -> bool:
    return flag or bool(options().get("json"))


# ---- errors -------------------------------------------------------------------------------


def fail_with(code: str, message: str, *, exit_code: int, field: str | None = None) -> NoReturn:
    """Say an error as every command does (one line on stderr) and exit with its code."""
    where = escape(f" [{field}]") if field else ""
    render.err.print(f"[bold red]error[/] ({code}){where}: {escape(message)}")
    raise typer.Exit(exit_code)


def fail(exc: CairnError) -> NoReturn:
    fail_with(exc.code, exc.message, exit_code=exc.exit_code, field=exc.field)


@contextmanager
def errors() -> Iterator[None]:
    """Kernel errors (and pydantic's refusals, as invalid input) → message and exit code."""
    try:
        yield
    except CairnError as exc:
        fail(exc)
    except ValidationError as exc:
        fail(InvalidInput.from_validation(exc))


# ---- help ---------------------------------------------------------------------------------

_LIST_TYPE = re.compile(r"^<list\[(.*)\]>$")
_BRACED = re.compile(r"^\{(.+)\}((?:\.\.\.)?)$")


def _one_value(shown: str | None) -> str | None:
    return _LIST_TYPE.sub(r"<\1>", shown) if shown else shown


class _Option(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        # a flag takes no value, so it shows no type (typer says <bool>); a repeatable option
        # shows the type of one value (typer says <list[str]>)
        return None if self.is_flag else _one_value(super().display_type_rich(ctx))


class _Argument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return _one_value(super().display_type_rich(ctx))


def _tidied(params: list[Any]) -> list[Any]:
    """Name values as a reader expects (see ``_Option``), and arguments in capitals."""
    for param in params:
        # re-classed in place, like the commands (see _adopt): the subclasses add no state
        if type(param) is TyperOption:
            param.__class__ = _Option
        elif type(param) is TyperArgument:
            param.__class__ = _Argument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
    return params


def _unbraced(pieces: list[str]) -> list[str]:
    """``QUERY`` rather than typer's ``{QUERY}`` for a required argument in the usage line,
    as in most command lines (optional ones keep their ``[brackets]``)."""
    return [_BRACED.sub(r"\1\2", piece) for piece in pieces]


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        # here rather than once at build time: click makes the help option on first use
        return _tidied(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _unbraced(super().collect_usage_pieces(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _tidied(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _unbraced(super().collect_usage_pieces(ctx))


@functools.cache
def _shared_options() -> tuple[TyperOption, ...]:
    """The global options as typer builds them from the shared annotations above."""
    probe = typer.Typer(add_completion=False)

    @probe.command()
    def shared(
        store: StoreOpt = None, db: DbOpt = None, key: KeyOpt = None, as_json: JsonOpt = False
    ) -> None:
        """Never run: typer turns these parameters into the options every command takes."""

    built = typer.main.get_command(probe)
    return tuple(p for p in built.params if isinstance(p, TyperOption))


def _adopt(command: Any, *, own_options_only: bool) -> None:
    # typer builds each command before the group sees it and has no app-wide command class:
    # re-class the stock ones in place (the subclasses only change how help is shown).
    if type(command) is TyperCommand:
        command.__class__ = _Command
    elif type(command) is TyperGroup:
        command.__class__ = _Group
    if own_options_only:
        return
    declared = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for shared in _shared_options():
        if not declared.intersection(shared.opts):
            option = copy.copy(shared)
            option.expose_value = False  # its callback records it; the function never sees it
            command.params.append(option)


def _walk(group: TyperGroup, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and sub-command below ``group``, with its names: ("review", "list")."""
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, TyperGroup):
            yield from _walk(command, (*path, name))


class CairnGroup(_Group):
    """The root ``cairn`` command (see the module docstring)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for path, command in _walk(self):
            _adopt(command, own_options_only=" ".join(path) in OWN_OPTIONS_ONLY)

    def invoke(self, ctx: Any) -> Any:
        # The one place errors become exit codes: every command, whichever module added it.
        with errors():
            return super().invoke(ctx)
