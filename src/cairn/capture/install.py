"""``cairn hooks install`` / ``uninstall``: the settings each coding agent needs to hand its
hook payloads to ``cairn hook --agent NAME``, and exactly how to take them away again.

Pure logic first: given a file's text, the text with cairn's hooks merged in
(``install_text``) or taken out (``uninstall_text``), leaving every other hook and setting
where it was. Then the plans: which files an install or uninstall changes, as
``FileChange`` values with a unified diff, so the door can show them before ``apply``
writes anything.

Uninstall gives a file back byte for byte: install keeps a record of each file it touched
(its text before, and the text it wrote) in cairn's state folder, outside the project.
When the file is still what install wrote, uninstall writes back the original bytes (or
removes the file if there was none). When someone edited it since, only cairn's entries
are taken out and the rest stays as they left it. cairn's entries are recognised by their
command, ``… hook --agent NAME`` run by a ``cairn`` executable.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.capture.local import private_folder
from cairn.errors import InvalidInput
from cairn.small_files import MAX_SETTINGS_FILE_BYTES, read_small_text

__all__ = [
    "AGENTS",
    "CLAUDE_HOOKS",
    "FileChange",
    "Plan",
    "Scope",
    "apply",
    "claude_hooks_block",
    "default_state_dir",
    "hook_command",
    "install_text",
    "is_cairn_command",
    "plan_install",
    "plan_uninstall",
    "plugin_source",
    "uninstall_text",
]

AGENTS = ("claude", "gemini", "codex", "copilot", "cursor", "opencode")

# ---- what each agent gets ---------------------------------------------------------------


@dataclass(frozen=True)
class Hook:
    """One event cairn listens to. ``wait``: the agent waits for the hook (its output is
    used, or the event ends a session and an asynchronous hook would be cut off)."""

    event: str
    matcher: str | None = None
    wait: bool = False
    timeout: int = 10  # seconds


# Claude Code. SessionStart and UserPromptSubmit take context back, so the agent waits.
# The rest run with "async": true, except Stop and SessionEnd: asynchronous hooks still
# pending when a headless session ends are cancelled, and those two come last.
CLAUDE_HOOKS = (
    Hook("SessionStart", wait=True),
    Hook("UserPromptSubmit", wait=True),
    Hook("PreToolUse", "*"),
    Hook("PostToolUse", "*"),
    Hook("PostToolUseFailure", "*"),
    Hook("Stop", wait=True),
    Hook("SubagentStart"),
    Hook("SubagentStop"),
    Hook("PreCompact"),
    Hook("PostCompact"),
    Hook("Notification"),
    Hook("SessionEnd", wait=True, timeout=5),
)

# Gemini CLI (timeouts in milliseconds there). BeforeModel/AfterModel are left out: they
# fire for every streamed chunk.
GEMINI_HOOKS = (
    Hook("SessionStart"),
    Hook("BeforeAgent"),
    Hook("AfterAgent"),
    Hook("BeforeTool", "*"),
    Hook("AfterTool", "*"),
    Hook("PreCompress"),
    Hook("Notification"),
    Hook("SessionEnd"),
)

# Codex CLI; Codex caps SessionEnd hooks at 3 seconds.
CODEX_HOOKS = (
    Hook("SessionStart"),
    Hook("UserPromptSubmit"),
    Hook("PreToolUse"),
    Hook("PostToolUse"),
    Hook("Stop"),
    Hook("SubagentStart"),
    Hook("SubagentStop"),
    Hook("PreCompact"),
    Hook("PostCompact"),
    Hook("SessionEnd", timeout=3),
)

# GitHub Copilot CLI: PascalCase names get payloads that carry their event name;
# subagentStart and notification exist in camelCase only.
COPILOT_HOOKS = (
    Hook("SessionStart"),
    Hook("UserPromptSubmit"),
    Hook("PreToolUse"),
    Hook("PostToolUse"),
    Hook("PostToolUseFailure"),
    Hook("Stop"),
    Hook("subagentStart"),
    Hook("SubagentStop"),
    Hook("PreCompact"),
    Hook("ErrorOccurred"),
    Hook("notification"),
    Hook("SessionEnd"),
)

# Cursor: only events that ask no decision of the hook (a permission hook's answer would
# be the user's to give), from the set every Cursor with hooks has.
CURSOR_HOOKS = (
    Hook("beforeSubmitPrompt"),
    Hook("afterAgentResponse"),
    Hook("afterShellExecution"),
    Hook("afterMCPExecution"),
    Hook("afterFileEdit"),
    Hook("stop"),
)

_OPENCODE_MARK = "cairn capture for OpenCode"

# ---- the command -----------------------------------------------------------------------

_CAIRN_COMMAND = re.compile(
    r"""(?:^|[\s/\\"'&])cairn(?:\.exe)?["']?\s+hook\s+--agent\s+([A-Za-z0-9_-]+)"""
)


def hook_command(executable: str, agent: str) -> str:
    """The command an agent runs: the cairn executable (quoted for the shell when it has
    to be) and ``hook --agent AGENT``."""
    if os.name == "nt":
        exe = f'"{executable}"' if " " in executable else executable
    else:
        exe = shlex.quote(executable)
    return f"{exe} hook --agent {agent}"


def is_cairn_command(command: object, agent: str | None = None) -> bool:
    """Whether a hook command is one cairn installed (for ``agent``, when given)."""
    if not isinstance(command, str):
        return False
    found = _CAIRN_COMMAND.search(command)
    return found is not None and (agent is None or found.group(1) == agent)


# ---- JSON text in and out, keeping the file's own style --------------------------------


@dataclass(frozen=True)
class _Style:
    indent: str | int = 2
    newline: str = "\n"
    final_newline: bool = True


def _style_of(text: str | None) -> _Style:
    if not text or not text.strip():
        return _Style()
    newline = "\r\n" if "\r\n" in text else "\n"
    indent: str | int = 2
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            indent = "\t" if lead.startswith("\t") else len(lead)
            break
    return _Style(indent, newline, text.endswith(("\n", "\r")))


def _dump(data: Any, style: _Style) -> str:
    text = json.dumps(data, indent=style.indent, ensure_ascii=False)
    if style.newline != "\n":
        text = text.replace("\n", style.newline)
    return text + (style.newline if style.final_newline else "")


def _load(text: str | None, path: Path) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "cairn left it as it is. Fix it, or add the hooks by hand (docs/agents.md).",
            field="file",
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} holds JSON but not an object; cairn left it as it is.")
    return data


def _section(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InvalidInput(f'{path}: "{key}" is not an object; cairn left the file as it is.')
    return value


def _event_list(hooks: dict[str, Any], event: str, path: Path) -> list[Any]:
    value = hooks.setdefault(event, [])
    if not isinstance(value, list):
        raise InvalidInput(f'{path}: hooks "{event}" is not a list; cairn left the file as it is.')
    return value


# ---- the shapes: grouped (Claude Code, Gemini, Codex) and flat (Cursor, Copilot) --------


def _handler(agent: str, hook: Hook, command: str) -> dict[str, Any]:
    if agent == "claude":
        handler: dict[str, Any] = {"type": "command", "command": command, "timeout": hook.timeout}
        if not hook.wait:
            handler["async"] = True
        return handler
    if agent == "gemini":
        return {"name": "cairn", "type": "command", "command": command, "timeout": 10_000}
    if agent == "codex":
        return {"type": "command", "command": command, "timeout": hook.timeout}
    if agent == "copilot":
        shell = "powershell" if os.name == "nt" else "bash"
        return {"type": "command", shell: command, "timeoutSec": hook.timeout}
    return {"command": command}  # cursor: Cursor's own timeout default


_GROUPED = {"claude": CLAUDE_HOOKS, "gemini": GEMINI_HOOKS, "codex": CODEX_HOOKS}
_FLAT = {"copilot": COPILOT_HOOKS, "cursor": CURSOR_HOOKS}


def _handler_command(handler: object) -> object:
    if not isinstance(handler, Mapping):
        return None
    return handler.get("command") or handler.get("bash") or handler.get("powershell")


def _strip(agent: str, data: dict[str, Any]) -> bool:
    """Take cairn's entries for ``agent`` out of ``data`` (in place); True if any were.
    Containers left empty only by this are removed too, and nothing else is touched."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    removed = False
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        for entry in entries:
            if (
                agent in _GROUPED
                and isinstance(entry, dict)
                and isinstance(entry.get("hooks"), list)
            ):
                inner = [
                    h for h in entry["hooks"] if not is_cairn_command(_handler_command(h), agent)
                ]
                if len(inner) != len(entry["hooks"]):
                    removed = True
                    if not inner:
                        continue
                    entry = {**entry, "hooks": inner}
            elif is_cairn_command(_handler_command(entry), agent):
                removed = True
                continue
            kept.append(entry)
        if len(kept) != len(entries):
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if removed and not hooks:
        del data["hooks"]
    return removed


def _add(agent: str, data: dict[str, Any], command: str, path: Path) -> None:
    if agent in _FLAT and "version" not in data:
        data["version"] = 1
    hooks = _section(data, "hooks", path)
    for hook in _GROUPED.get(agent) or _FLAT[agent]:
        entries = _event_list(hooks, hook.event, path)
        handler = _handler(agent, hook, command)
        if agent in _GROUPED:
            group: dict[str, Any] = {"matcher": hook.matcher} if hook.matcher else {}
            group["hooks"] = [handler]
            entries.append(group)
        else:
            entries.append(handler)


def claude_hooks_block(command: str) -> dict[str, Any]:
    """The ``hooks`` object cairn adds to Claude Code settings (the plugin uses it too)."""
    data: dict[str, Any] = {}
    _add("claude", data, command, Path("settings.json"))
    block: dict[str, Any] = data["hooks"]
    return block


# ---- the plugin-settings shape (Claude Code --plugin) -------------------------------------

MARKETPLACE = "cairn-local"
PLUGIN_ID = f"cairn@{MARKETPLACE}"


def _strip_plugin(data: dict[str, Any]) -> bool:
    removed = False
    for key, name in (("extraKnownMarketplaces", MARKETPLACE), ("enabledPlugins", PLUGIN_ID)):
        section = data.get(key)
        if isinstance(section, dict) and name in section:
            del section[name]
            removed = True
            if not section:
                del data[key]
    return removed


def _add_plugin(data: dict[str, Any], marketplace: Path, path: Path) -> None:
    known = _section(data, "extraKnownMarketplaces", path)
    known[MARKETPLACE] = {"source": {"source": "directory", "path": str(marketplace)}}
    _section(data, "enabledPlugins", path)[PLUGIN_ID] = True


# ---- pure text transforms ----------------------------------------------------------------


def install_text(agent: str, before: str | None, command: str, *, path: Path) -> str:
    """``before`` (None: no file) with cairn's hooks for ``agent`` in it, any older cairn
    entries for that agent replaced. Raises InvalidInput when the file is not a JSON object
    of the agent's shape; nothing is written then."""
    data = _load(before, path)
    _strip(agent, data)
    _add(agent, data, command, path)
    return _dump(data, _style_of(before))


def uninstall_text(agent: str, current: str, *, path: Path) -> str:
    """``current`` with cairn's entries for ``agent`` taken out, the rest as it was (the
    text itself when there are none)."""
    data = _load(current, path)
    if not _strip(agent, data):
        return current
    return _dump(data, _style_of(current))


def _plugin_settings_text(before: str | None, marketplace: Path, *, path: Path) -> str:
    data = _load(before, path)
    _strip_plugin(data)
    _add_plugin(data, marketplace, path)
    return _dump(data, _style_of(before))


def _plugin_unsettings_text(current: str, *, path: Path) -> str:
    data = _load(current, path)
    if not _strip_plugin(data):
        return current
    return _dump(data, _style_of(current))


def _same_json(one: str | None, two: str | None) -> bool:
    try:
        return bool(json.loads(one or "{}") == json.loads(two or "{}"))
    except json.JSONDecodeError:
        return False


# ---- where the files are -----------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """A project folder, or the user's own settings (``project`` None) under ``home``."""

    project: Path | None
    home: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def base(self) -> Path:
        return self.project if self.project is not None else self.home


def _settings_path(agent: str, scope: Scope) -> Path:
    project, home = scope.project, scope.home
    if agent == "claude":
        return (project or home) / ".claude" / "settings.json"
    if agent == "gemini":
        return (project or home) / ".gemini" / "settings.json"
    if agent == "codex":
        if project is None and scope.env.get("CODEX_HOME"):
            return Path(scope.env["CODEX_HOME"]) / "hooks.json"
        return (project or home) / ".codex" / "hooks.json"
    if agent == "cursor":
        return (project or home) / ".cursor" / "hooks.json"
    if agent == "copilot":
        if project is None:
            raise InvalidInput(
                "Copilot CLI reads hooks from the repository (.github/hooks/*.json): "
                "install them per project, without --user."
            )
        return project / ".github" / "hooks" / "cairn.json"
    if agent == "opencode":
        if project is None:
            config = scope.env.get("XDG_CONFIG_HOME") or str(home / ".config")
            return Path(config) / "opencode" / "plugins" / "cairn.js"
        return project / ".opencode" / "plugins" / "cairn.js"
    raise InvalidInput(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}", field="agent")


def plugin_source() -> Path:
    """The folder of agent plugins shipped with cairn: inside the installed package, or
    ``plugins/`` of a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "plugins", here.parents[2] / "plugins"):
        if (candidate / "claude-code").is_dir():
            return candidate
    raise InvalidInput("cairn's plugin files are missing from this installation")


def _opencode_text(before: str | None, executable: str, path: Path) -> str:
    if before is not None and _OPENCODE_MARK not in before:
        raise InvalidInput(f"{path} exists and is not cairn's plugin; cairn left it as it is.")
    template = (plugin_source() / "opencode" / "cairn.js").read_text("utf-8")
    line = f"const CAIRN_COMMAND = {json.dumps(executable)}"
    return re.sub(r"^const CAIRN_COMMAND = .*$", lambda _: line, template, count=1, flags=re.M)


def _rendered_plugin(executable: str) -> dict[str, str]:
    """The Claude Code plugin's files (relative path → text), its commands running this
    cairn by its absolute path."""
    root = plugin_source() / "claude-code"
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path.read_text("utf-8")
    marketplace = json.loads(files[".claude-plugin/marketplace.json"])
    marketplace["name"] = MARKETPLACE
    files[".claude-plugin/marketplace.json"] = _dump(marketplace, _Style())
    hooks = json.loads(files["cairn/hooks/hooks.json"])
    hooks["hooks"] = claude_hooks_block(hook_command(executable, "claude"))
    files["cairn/hooks/hooks.json"] = _dump(hooks, _Style())
    mcp = json.loads(files["cairn/.mcp.json"])
    mcp["mcpServers"]["cairn"]["command"] = executable
    files["cairn/.mcp.json"] = _dump(mcp, _Style())
    return files


# ---- plans --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    """One file's text before and after (None: no file)."""

    path: Path
    before: str | None
    after: str | None
    # merged config files are edited in place; cairn's own files are whole
    merged: bool = True

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        old = (self.before or "").splitlines(keepends=True)
        new = (self.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            new,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


@dataclass(frozen=True)
class Plan:
    """What an install or uninstall does: the file changes, and anything to tell the user."""

    agent: str
    action: str  # install | uninstall
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()
    plugin: bool = False

    @property
    def changed(self) -> bool:
        return any(change.changed for change in self.changes)

    def diff(self) -> str:
        return "".join(change.diff() for change in self.changes if change.changed)


# The largest agent settings file read: settings are kilobytes. A link to /dev/zero or a
# pipe planted in a cloned project must not be read without end (or wait for a writer).
MAX_SETTINGS_BYTES = MAX_SETTINGS_FILE_BYTES


def _read(path: Path) -> str | None:
    try:
        return read_small_text(path, MAX_SETTINGS_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise InvalidInput(f"{exc}; cairn left it as it is.") from None


def _marketplace_dir(scope: Scope) -> Path:
    return _settings_path("claude", scope).parent / "cairn-plugin"


def plan_install(agent: str, scope: Scope, executable: str, *, plugin: bool = False) -> Plan:
    """The changes installing cairn's hooks for ``agent`` makes (nothing is written)."""
    if agent not in AGENTS:
        raise InvalidInput(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}", field="agent")
    path = _settings_path(agent, scope)
    before = _read(path)
    if plugin:
        if agent != "claude":
            raise InvalidInput("--plugin is for Claude Code (--agent claude) only")
        marketplace = _marketplace_dir(scope)
        changes = [
            FileChange(marketplace / rel, _read(marketplace / rel), text, merged=False)
            for rel, text in _rendered_plugin(executable).items()
        ]
        after = _plugin_settings_text(before, marketplace, path=path)
        changes.append(FileChange(path, before, after))
        notes: tuple[str, ...] = ()
        if before is not None and uninstall_text("claude", before, path=path) != before:
            notes = (
                f"{path} also has cairn's hooks: with the plugin every event would be recorded "
                "twice; take them out with 'cairn hooks uninstall'",
            )
        return _confine(Plan(agent, "install", tuple(changes), notes, plugin=True), scope)
    if agent == "opencode":
        text = _opencode_text(before, executable, path)
        return _confine(
            Plan(agent, "install", (FileChange(path, before, text, merged=False),)), scope
        )
    after = install_text(agent, before, hook_command(executable, agent), path=path)
    return _confine(Plan(agent, "install", (FileChange(path, before, after),)), scope)


# ---- the record of what install changed ---------------------------------------------------


def default_state_dir(env: Mapping[str, str], home: Path) -> Path:
    """Where install keeps its records: outside any project (so a project's walk up to its
    ``.cairn`` folder never meets it) and outside anything a team commits."""
    if env.get("CAIRN_STATE_DIR"):
        return Path(env["CAIRN_STATE_DIR"])
    if os.name == "nt" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "cairn" / "hooks"
    return Path(env.get("XDG_STATE_HOME") or home / ".local" / "state") / "cairn" / "hooks"


def _record_path(state_dir: Path, path: Path) -> Path:
    key = hashlib.sha256(str(path.absolute()).encode("utf-8")).hexdigest()[:32]
    return state_dir / f"{key}.json"


def _record(state_dir: Path, path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_record_path(state_dir, path).read_text("utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("path") == str(path.absolute()) else None


def plan_uninstall(agent: str, scope: Scope, state_dir: Path, *, plugin: bool = False) -> Plan:
    """The changes taking cairn's hooks for ``agent`` away makes (nothing is written)."""
    if agent not in AGENTS:
        raise InvalidInput(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}", field="agent")
    path = _settings_path(agent, scope)
    changes: list[FileChange] = []
    notes: list[str] = []
    if agent == "opencode" and not plugin:
        own = _own_file_change(path, state_dir, notes, mark=_OPENCODE_MARK)
        return _confine(Plan(agent, "uninstall", (own,) if own else (), tuple(notes)), scope)
    if plugin:
        marketplace = _marketplace_dir(scope)
        for file in sorted(marketplace.rglob("*")) if marketplace.is_dir() else []:
            if file.is_file():
                own = _own_file_change(file, state_dir, notes)
                if own is not None:
                    changes.append(own)
    current = _read(path)
    if current is not None:
        strip = _stripper(agent, path, plugin=plugin)
        changes.append(FileChange(path, current, _restored(path, current, state_dir, strip)))
    return _confine(Plan(agent, "uninstall", tuple(changes), tuple(notes), plugin=plugin), scope)


def _stripper(agent: str, path: Path, *, plugin: bool) -> Callable[[str], str]:
    """How cairn's entries come out of ``path``: the plugin's settings, or the hooks."""

    def strip(text: str) -> str:
        if plugin:
            return _plugin_unsettings_text(text, path=path)
        return uninstall_text(agent, text, path=path)

    return strip


def _restored(path: Path, current: str, state_dir: Path, strip: Callable[[str], str]) -> str | None:
    """What a merged config file goes back to: its bytes before install when nothing else
    changed; else the current text without cairn's entries."""
    record = _record(state_dir, path)
    if record is not None and current == record.get("installed"):
        original = record.get("original")
        return original if isinstance(original, str) else None
    stripped = strip(current)
    if record is not None:
        original = record.get("original")
        if isinstance(original, str) and _same_json(stripped, original):
            return original  # only the formatting differs from before: give the bytes back
        if original is None and _same_json(stripped, None):
            return None  # cairn made the file and nothing but cairn's entries is left
    return stripped


def _own_file_change(
    path: Path, state_dir: Path, notes: list[str], *, mark: str | None = None
) -> FileChange | None:
    current = _read(path)
    if current is None:
        return None
    record = _record(state_dir, path)
    if record is not None and current == record.get("installed"):
        original = record.get("original")
        return FileChange(path, current, original if isinstance(original, str) else None, False)
    if record is None and mark is not None and mark in current:
        return FileChange(path, current, None, merged=False)
    notes.append(f"left {path}: it changed since cairn wrote it")
    return None


# ---- writing ------------------------------------------------------------------------------


def _write(path: Path, text: str | None, *, private: bool = False) -> None:
    """Replace ``path`` with ``text`` at once (None: remove it). A symbolic link (settings
    kept in a dotfiles repository) is written through, not replaced by a copy; an existing
    file keeps its mode (a ``0600`` settings file holding tokens stays ``0600``)."""
    if text is None:
        path.unlink(missing_ok=True)
        return
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o600 if private else None
    # a fresh name, never followed: a link planted at a fixed temporary name (by a cloned
    # repository) would have the text written into whatever file it points at
    tmp = path.with_name(f".{path.name}.{os.getpid()}.cairn-tmp")
    tmp.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            if mode is not None:
                os.chmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _confine(plan: Plan, scope: Scope) -> Plan:
    """A project's install writes inside the project only. A cloned repository can hold
    ``.claude`` (or ``settings.json``) as a link to the user's own settings, or anywhere:
    following it would copy what is there into the project's file, or write outside."""
    if scope.project is None:
        return plan
    root = scope.project.resolve()
    for change in plan.changes:
        real = change.path.resolve()
        if not real.is_relative_to(root):
            raise InvalidInput(
                f"{change.path} leads outside the project (to {real}) through a symbolic "
                "link; cairn left it as it is."
            )
    return plan


def _missing_parents(path: Path) -> list[str]:
    made: list[str] = []
    parent = path.parent
    while not parent.exists():
        made.append(str(parent.absolute()))
        parent = parent.parent
    return made


def _changed(plan: Plan) -> Iterator[FileChange]:
    return (change for change in plan.changes if change.changed)


def _original(plan: Plan, change: FileChange) -> str | None:
    """What a file was before cairn, for a first record: its text, less any cairn entries
    an earlier install left without a record (those are not the user's)."""
    if change.before is None or not change.merged:
        # cairn's own files: install refuses to overwrite one that is not cairn's
        return None
    return _stripper(plan.agent, change.path, plugin=plan.plugin)(change.before)


def apply(plan: Plan, state_dir: Path) -> None:
    """Write a plan's changes, and keep (install) or drop (uninstall) the records that let
    uninstall give each file back as it was."""
    made_dirs: set[str] = set()
    for change in _changed(plan):
        record_path = _record_path(state_dir, change.path)
        record = _record(state_dir, change.path)
        if plan.action == "install":
            if record is None:
                # the first install's "before" is the original, whatever later installs see
                record = {
                    "path": str(change.path.absolute()),
                    "original": _original(plan, change),
                    "made_dirs": _missing_parents(change.path),
                }
            record["installed"] = change.after
            # the record holds the file's text, tokens in it included: owner-only
            private_folder(state_dir)
            _write(record_path, json.dumps(record, ensure_ascii=False), private=True)
            _write(change.path, change.after)
        else:
            _write(change.path, change.after)
            if change.after is None and record is not None:
                made_dirs.update(record.get("made_dirs") or [])
            record_path.unlink(missing_ok=True)
    # folders install made, deepest first, once every file in them is gone
    for folder in sorted(made_dirs, key=lambda f: len(Path(f).parts), reverse=True):
        try:
            Path(folder).rmdir()  # only when empty
        except OSError:
            continue
