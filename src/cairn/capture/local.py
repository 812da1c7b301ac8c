"""Where capture keeps things on this machine, and its settings (standard library only).

- The **project store** for a hook payload: ``--store`` on the hook's command line, else
  ``$CAIRN_STORE``, else the nearest ``.cairn`` folder holding a store at or above the
  payload's ``cwd`` (the folder the agent works in, not the hook process's own) that this
  user owns (one planted by someone else in a folder above is passed over) and trusts: one
  made by ``cairn init`` here, or named by ``cairn hooks trust``. A ``.cairn`` that came
  with a cloned repository is the user's by ownership but was written by someone else: its
  settings could send every prompt to an embedding endpoint of their choosing, or keep them
  in the working tree for the next push.
- The **daemon's socket**: ``<store>/capture.sock`` (in the store folder, which only its
  owner may enter, so only the owner can connect), or under the state folder when that path
  is too long for a Unix socket.
- The **spool**: ``$XDG_STATE_HOME/cairn/spool/<store hash>.jsonl`` (default
  ``~/.local/state/cairn``), never ``/tmp``; the folder is ``0700`` and the file ``0600``.
- **Settings**: the ``[capture]`` table of the user's ``~/.config/cairn/config.toml``, then
  of ``<store>/config.toml`` (the project's wins).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from cairn.small_files import (
    MAX_SETTINGS_FILE_BYTES,
    open_regular_file,
    read_small_file,
    read_toml,
)

__all__ = [
    "PRINCIPALS_FILE",
    "STORE_FOLDER",
    "CaptureSettings",
    "TrustFileRefused",
    "as_found",
    "default_scope",
    "find_store",
    "is_trusted",
    "load_capture_settings",
    "nearest_store",
    "private_folder",
    "sha256_hex",
    "socket_path",
    "socket_path_problem",
    "spool_path",
    "state_folder",
    "trust_file_problem",
    "trust_store",
    "untrust_store",
]

STORE_FOLDER = ".cairn"
PRINCIPALS_FILE = "principals.yaml"  # what marks a folder as a store (cairn.memory's name)
CONFIG_FILE = "config.toml"
_SOCKET_MAX = 100  # bytes; Unix socket paths are limited to 104-108 depending on the system
_CWD_MAX = 4096  # characters: PATH_MAX on Linux, above macOS's 1024


def private_folder(path: Path) -> Path:
    """Create ``path`` owner-only, with every folder this call creates on the way (``mkdir``
    would give new parents the default mode), and make sure ``path`` is owner-only."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def state_folder() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cairn"


def _is_store(folder: Path, *, owned: bool = True) -> bool:
    """A store (``owned``: one this user owns). A ``.cairn`` someone else made (in ``/tmp``,
    a shared checkout, any folder above the payload's ``cwd``) is not found by the walk: its
    socket would hand them every prompt and tool output, and its settings would choose what
    the agent is told (git refuses such repositories for the same reason). A store named
    outright (``--store``, ``$CAIRN_STORE``) is the user's own choice, e.g. a container's
    root working on a mounted project. Unreadable or impossible paths are no store: the
    walk goes on, it never raises."""
    try:
        principals = (folder / PRINCIPALS_FILE).stat()
        owner = folder.stat().st_uid
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(principals.st_mode):
        return False
    uid = os.geteuid()
    return not owned or (principals.st_uid == uid and owner == uid)


def nearest_store(cwd: str | None) -> Path | None:
    """The nearest store this user owns at or above ``cwd`` (the process's own folder when
    ``cwd`` is not an absolute path), trusted or not; None when there is none."""
    if cwd and len(cwd) > _CWD_MAX:
        return None  # no real folder: walking its parents would take minutes and gigabytes
    base = Path(cwd) if cwd and Path(cwd).is_absolute() else Path.cwd()
    for folder in (base, *base.parents):
        candidate = folder / STORE_FOLDER
        if _is_store(candidate):
            return as_found(candidate)
    return None


def as_found(folder: Path) -> Path:
    """A store folder's absolute path: resolved, unless it is itself a link, which stays
    one (resolved, it would pass for the store it leads to, and a clone's link to the user's
    other store would be trusted; kept, it is refused as a link)."""
    return Path(os.path.abspath(folder)) if folder.is_symlink() else folder.resolve()


def find_store(cwd: str | None, override: str | None = None) -> Path | None:
    """The store a payload belongs to (see the module's rule), or None when there is none:
    the store named outright, else the nearest one, if the user trusts it."""
    if cwd and len(cwd) > _CWD_MAX:
        return None
    chosen = override or os.environ.get("CAIRN_STORE")
    if chosen:
        base = Path(cwd) if cwd and Path(cwd).is_absolute() else Path.cwd()
        path = Path(chosen).expanduser()
        path = path if path.is_absolute() else base / path
        return path.resolve() if _is_store(path, owned=False) else None
    found = nearest_store(cwd)
    return found if found is not None and is_trusted(found) else None


# ---- which stores the user trusts ------------------------------------------------------
# One JSON list in the state folder: each store's resolved path, the device and inode of
# its folder, and the SHA-256 of its config.toml. The inode makes a clone untrusted where a
# trusted store once was (deleting a project and cloning another in its place makes a new
# folder, though a freed inode can come back); the hash makes a config.toml changed since
# (a pull, another branch, a clone's own) untrusted.

_TRUST_FILE = "trusted-stores.json"
_TRUST_LOCK = "trusted-stores.lock"
_TRUST_MAX_BYTES = 1024 * 1024


class TrustFileRefused(ValueError):
    """The trust file, or its folder, could be written by someone else: nothing in it is
    believed, and cairn does not write over it."""


def _identity(store: Path) -> dict[str, Any]:
    """The folder (its device and inode) and the settings it holds: a ``config.toml``
    changed since (a ``git pull`` of someone else's) is no longer trusted. Every ``.cairn``
    a walk finds may be a clone's: a ``config.toml`` that would hang the hook (a FIFO, a
    link to its own stdout) or fill its memory (a link to ``/dev/zero``) is a
    ``ValueError``, never trusted."""
    folder = _folder_identity(store)
    try:
        settings = sha256_hex(read_small_file(store / CONFIG_FILE, MAX_SETTINGS_FILE_BYTES))
    except FileNotFoundError:
        settings = ""
    return {**folder, "config_sha256": settings}


def _folder_identity(store: Path) -> dict[str, Any]:
    info = store.stat()
    return {"path": str(store.resolve()), "dev": info.st_dev, "ino": info.st_ino}


def _writable_by_others(info: os.stat_result) -> str | None:
    """Why a file or folder that decides trust cannot be believed, or None."""
    if info.st_uid != os.geteuid():
        return f"owned by user {info.st_uid}, not by you"
    if info.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _folder_refused(folder: Path, problem: str) -> TrustFileRefused:
    return TrustFileRefused(
        f"the folder {folder}, which holds the list of trusted stores, is {problem}: fix "
        "it, then trust again"
    )


def _trusted() -> list[dict[str, Any]]:
    """The trust entries, or ``TrustFileRefused`` when the file or its folder could have been
    written by someone else (a trust file anyone may write trusts whatever they like)."""
    import json  # only when a store was found: most folders have none

    folder = state_folder()
    path = folder / _TRUST_FILE
    try:
        fd = open_regular_file(path, follow_links=False)
    except FileNotFoundError:
        return []
    except OSError as exc:
        # (a link is refused by O_NOFOLLOW with an error that does not say so)
        why = "a symbolic link" if path.is_symlink() else f"unreadable ({exc.strerror})"
        raise TrustFileRefused(f"{path} is {why}: fix or remove it, then trust again") from None
    except ValueError:
        raise TrustFileRefused(
            f"{path} is not a regular file: remove it, then trust again"
        ) from None
    with os.fdopen(fd, "rb") as handle:
        if (problem := _writable_by_others(os.fstat(fd))) is not None:
            raise TrustFileRefused(f"{path} is {problem}: fix or remove it, then trust again")
        try:
            problem = _writable_by_others(folder.stat())
        except OSError as exc:
            problem = f"unreadable ({exc.strerror})"
        if problem is not None:
            raise _folder_refused(folder, problem)
        data = handle.read(_TRUST_MAX_BYTES + 1)
    try:
        entries = json.loads(data) if len(data) <= _TRUST_MAX_BYTES else []
    except ValueError:
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def is_trusted(store: Path) -> bool:
    """Whether the user trusts the store folder ``store`` (as it is now: the same folder,
    not a link to it), by a trust file only the user could have written."""
    if store.is_symlink():
        return False
    try:
        folder = _folder_identity(store)
        entries = [e for e in _trusted() if folder.items() <= e.items()]
        # Only a folder trusted before has its settings read: a clone's are never opened.
        return bool(entries) and _identity(store) in entries
    except (OSError, ValueError):  # TrustFileRefused is a ValueError
        return False


def _save_trusted(entries: list[dict[str, Any]]) -> None:
    import json
    import tempfile

    folder = private_folder(state_folder())
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".trusted-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(entries, handle, indent=1)
        os.replace(temporary, folder / _TRUST_FILE)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _trust_changing() -> Iterator[None]:
    """Held while the trust file is read, changed and written: two ``cairn hooks trust`` at
    once would otherwise each write what it read, and the first one's entry would be lost.
    (The hook only reads, and a reader always sees a whole file: it is replaced, not
    rewritten.)"""
    import fcntl

    folder = state_folder()
    with contextlib.suppress(FileNotFoundError):  # (then private_folder makes it, the user's)
        if (owner := folder.stat().st_uid) != os.geteuid():
            # Refused before private_folder would tighten it: another user's folder is
            # theirs to fix, not root's to take over unasked, and its list is not believed.
            raise _folder_refused(folder, f"owned by user {owner}, not by you")
    folder = private_folder(folder)
    fd = os.open(folder / _TRUST_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # which lets the lock go


def trust_store(store: Path) -> None:
    """Trust the store folder ``store`` for capture (it must be a store this user owns, and
    not a link to one)."""
    if store.is_symlink():
        raise ValueError(
            f"{store} is a symbolic link: the hooks never record through one (name the "
            "store it leads to with --store or CAIRN_STORE in the hook's command)"
        )
    if not _is_store(store):
        raise ValueError(f"{store} is not a cairn store folder of yours")
    with _trust_changing():
        identity = _identity(store)
        kept = [e for e in _trusted() if e.get("path") != identity["path"]]
        _save_trusted([*kept, identity])


def trust_file_problem() -> str | None:
    """Why the trust file is not believed (``TrustFileRefused``), or None: what the hook
    log says when a store is passed over for it."""
    try:
        _trusted()
    except TrustFileRefused as exc:
        return str(exc)
    return None


def untrust_store(store: Path) -> bool:
    """Stop trusting ``store``; whether it was trusted. A link is refused as ``trust_store``
    refuses it: resolved, it would take trust from the store it leads to."""
    if store.is_symlink():
        raise ValueError(f"{store} is a symbolic link: it was never trusted")
    if not (state_folder() / _TRUST_FILE).exists():
        return False  # no list yet: nothing to take back, and nothing to make for it
    path = str(store.resolve())
    with _trust_changing():
        entries = _trusted()
        kept = [e for e in entries if e.get("path") != path]
        if len(kept) != len(entries):
            _save_trusted(kept)
    return len(kept) != len(entries)


def sha256_hex(data: bytes) -> str:
    """SHA-256 from CPython's built-in module when there is one: ``hashlib`` loads OpenSSL
    first, a few milliseconds of every hook call."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from hashlib import sha256
    return str(sha256(data).hexdigest())


def _store_hash(store: Path) -> str:
    return sha256_hex(str(store.resolve()).encode())[:16]


def spool_path(store: Path) -> Path:
    return state_folder() / "spool" / f"{_store_hash(store)}.jsonl"


def socket_path(store: Path) -> Path:
    inside = store.resolve() / "capture.sock"
    if socket_path_problem(inside) is None:
        return inside
    return state_folder() / "run" / f"{_store_hash(store)}.sock"


def socket_path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be the daemon's socket (too long for a Unix socket address on
    every system cairn runs on), or None. ``socket_path`` moves a store's socket to the state
    folder for this reason; when that path fails too, the setting to change is named."""
    size = len(os.fsencode(path))
    if size <= _SOCKET_MAX:
        return None
    return (
        f"the capture socket path {path} is {size} bytes, more than the {_SOCKET_MAX} cairn "
        "allows for a Unix socket (systems allow 103 to 107): set XDG_STATE_HOME to a "
        "shorter folder"
    )


def default_scope(store: Path) -> str:
    """``code/<project folder name>``: the folder holding the store names the project."""
    name = store.resolve().parent.name.strip().replace("/", "-") or "project"
    return f"code/{name[:200]}"


class CaptureSettings(NamedTuple):
    """The ``[capture]`` table. Unknown keys are an error (a typo would otherwise silently
    turn a privacy setting off)."""

    enabled: bool = True
    # the scope events are stored in; default ``code/<project folder name>``
    scope: str | None = None
    # the principal the daemon's socket acts as (an agent, never a curator or admin)
    principal: str = "agent"
    # hand recent context back to the agent at session start (and on each prompt)
    context: bool = False
    context_on_prompt: bool = False
    context_tokens: int = 1000
    # extra regular expressions whose matches are never stored
    redact: tuple[str, ...] = ()
    # tools whose calls and results are not recorded (e.g. "Read" to skip file dumps)
    skip_tools: tuple[str, ...] = ()
    # longest text kept per event (characters); the rest is cut after redaction
    max_event_chars: int = 16_000
    # start the daemon from the hook when it is not running (never waits for it)
    autostart: bool = True
    # the spool's size limit; past it payloads are dropped and counted in the hook log
    spool_max_bytes: int = 256 * 1024 * 1024


def _table(path: Path) -> dict[str, Any]:
    try:
        table = read_toml(path).get("capture", {})
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    if not isinstance(table, dict):
        raise ValueError(f"{path}: [capture] must be a table")
    return table


def parse_capture(values: dict[str, Any], where: str = "[capture]") -> CaptureSettings:
    """Check a ``[capture]`` table against ``CaptureSettings`` (types and ranges)."""
    known = CaptureSettings._field_defaults
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ValueError(f"{where}: unknown setting {key!r}; known: {', '.join(known)}")
        default = known[key]
        if isinstance(default, tuple):
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{where}: {key} must be a list of strings")
            value = tuple(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{where}: {key} must be true or false")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{where}: {key} must be a positive whole number")
        elif not isinstance(value, str) or not value.strip():
            raise ValueError(f"{where}: {key} must be a non-empty string")
        out[key] = value
    settings = CaptureSettings(**out)
    if not 50 <= settings.context_tokens <= 8_000:
        raise ValueError(f"{where}: context_tokens must be between 50 and 8000")
    return settings


def load_capture_settings(store: Path | None) -> CaptureSettings:
    user = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "cairn"
    values = _table(user / CONFIG_FILE)
    if store is not None:
        values = {**values, **_table(store / CONFIG_FILE)}
    return parse_capture(values)
