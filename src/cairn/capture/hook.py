"""``cairn hook``: one agent hook call in, timeline events out, and the agent never waits.

The process reads one payload (JSON on stdin), maps it with the agent's adapter, redacts
secrets, names each event with an id derived from the payload (a retried hook stores
nothing new), and hands the events to the project's daemon over its Unix socket. When the
daemon is down or slow, the events go to the spool instead (already redacted), and are
replayed later by the next hook call, by the daemon when it starts, or by
``cairn hook replay``. Whatever goes wrong, the hook exits 0 and writes a line to the hook
log (``$XDG_STATE_HOME/cairn/hook.log``), never the payload itself.

Standard library only: this runs on every prompt and tool call, and Python's start-up plus
imports are most of its cost (the kernel lives in the daemon).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cairn.capture.agents import AgentAdapter, Captured, adapter_for
from cairn.capture.client import DaemonClient
from cairn.capture.local import (
    CaptureSettings,
    default_scope,
    find_store,
    load_capture_settings,
    nearest_store,
    private_folder,
    sha256_hex,
    socket_path,
    spool_path,
    state_folder,
    trust_file_problem,
)
from cairn.capture.redact import Redactor, compile_user_patterns
from cairn.capture.spool import Outcome, Spool

__all__ = ["build_events", "context_text", "main"]

MAX_PAYLOAD_BYTES = 8 * 1024 * 1024
# Text is redacted up to this many characters, then cut to ``max_event_chars``: the cut is
# always far below this bound, so a secret split by the bound is never kept.
_REDACT_SPAN = 1_000_000
_MAX_SESSION = 256
_LOG_MAX_BYTES = 1024 * 1024
_REPLAY_PER_CALL = 200  # spooled events a hook call sends after its own (bounded work)
# An agent's own time stamp is taken when it falls this close to the hook's clock: a hook
# reports what happens now, and a time far off (year 9999) would sit at the head of every
# "recent" context. Outside it the hook's time stands, and the agent's is kept in metadata.
_TIME_BEHIND = timedelta(days=1)
_TIME_AHEAD = timedelta(minutes=5)
# A metadata string (a tool's error, a path) is cut to this many characters: the store
# refuses longer ones, and the event would otherwise never reach the timeline.
_MAX_METADATA_CHARS = 2_000


def log_problem(problem: str, **fields: Any) -> None:
    """One line in the hook log: what went wrong, never what the payload said."""
    try:
        folder = private_folder(state_folder())
        path = folder / "hook.log"
        if path.exists() and path.stat().st_size > _LOG_MAX_BYTES:
            path.replace(folder / "hook.log.1")
        line = json.dumps({"ts": datetime.now(UTC).isoformat(), "problem": problem, **fields})
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # nowhere to write: the agent still must not notice


def _event_id(agent: str, captured: Captured, transcript: Any) -> str:
    material = [agent, captured.session_id, captured.identity]
    if not captured.unique_identity and isinstance(transcript, str) and transcript:
        # how far the transcript had grown tells apart two equal payloads sent at
        # different moments of one session; a retry at the same moment sees the same size
        with contextlib.suppress(OSError):
            material.append(str(os.stat(transcript).st_size))
    digest = sha256_hex("\0".join(material).encode("utf-8", "surrogatepass"))
    return f"hk_{digest[:40]}"


def _storable(value: Any) -> Any:
    """``value`` as the kernel stores it, not refuses it: a NUL or a lone surrogate (a binary
    file's bytes in a tool's output, a path that is not UTF-8) would get the whole event
    refused, and a NaN or an infinity has no JSON; they become U+FFFD, and None."""
    if isinstance(value, str):
        if "\0" in value:
            value = value.replace("\0", "\ufffd")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {_storable(str(k)): _storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable(v) for v in value]
    return value


def build_events(
    adapter: AgentAdapter,
    payload: Mapping[str, Any],
    settings: CaptureSettings,
    scope: str,
    *,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The payload's events as the timeline's append takes them: redacted, cut, named."""
    stamped = now or datetime.now(UTC)
    patterns = compile_user_patterns(settings.redact)
    out: list[dict[str, Any]] = []
    for captured in adapter.to_events(payload):
        tool = captured.metadata.get("tool_name")
        if isinstance(tool, str) and tool in settings.skip_tools:
            continue
        redactor = Redactor(patterns)
        text = redactor.redact(_storable(captured.text[:_REDACT_SPAN]))
        metadata = _cut_strings(redactor.redact_json(_storable(dict(captured.metadata))))
        if len(text) > settings.max_event_chars:
            metadata["truncated_from"] = len(text)
            text = text[: settings.max_event_chars]
        if len(captured.text) > _REDACT_SPAN:
            metadata["truncated_from"] = len(captured.text)
        if redactor.counts:
            metadata["redactions"] = dict(sorted(redactor.counts.items()))
        session = redactor.redact(_storable(captured.session_id))[:_MAX_SESSION]
        session = session or "unknown-session"
        ts = stamped.astimezone(UTC)
        if captured.ts is not None:
            if stamped - _TIME_BEHIND <= captured.ts <= stamped + _TIME_AHEAD:
                ts = captured.ts.astimezone(UTC)
            else:
                metadata["agent_ts"] = captured.ts.astimezone(UTC).isoformat()
        out.append(
            {
                "event_id": _event_id(adapter.name, captured, payload.get("transcript_path")),
                "ts": ts.isoformat(),
                "session_id": session,
                "scope": scope,
                "agent": adapter.name,
                "role": captured.role,
                "kind": captured.kind,
                "text": text,
                "metadata": metadata,
            }
        )
    return out


def _cut_strings(value: Any) -> Any:
    """``value`` with every string in it cut to ``_MAX_METADATA_CHARS``."""
    if isinstance(value, str):
        return value[:_MAX_METADATA_CHARS]
    if isinstance(value, Mapping):
        return {key: _cut_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item) for item in value]
    return value


def context_text(recent: Mapping[str, Any]) -> str | None:
    """Recent context as lines an agent reads, each citing the timeline node (and its
    version) it summarises and the grips that lead to the exact events."""
    items = recent.get("items")
    if not isinstance(items, list) or not items:
        return None
    lines = [
        "Earlier work in this project, from cairn's timeline (newest first). Each line cites "
        "node@version and its grips; `cairn timeline expand <grip>` shows the exact events.",
    ]
    seen: set[str] = set()
    for item in items:
        # a week repeats the bullets of the days shown above it: say each thing once
        if not isinstance(item, dict) or str(item.get("text", "")) in seen:
            continue
        seen.add(str(item.get("text", "")))
        when = str(item.get("starts_at", ""))[:16].replace("T", " ")
        grips = ", ".join(str(g) for g in item.get("grip_ids") or [])
        cite = f"{item.get('node_id')}@{item.get('version')}" + (
            f"; grips {grips}" if grips else ""
        )
        lines.append(f"- [{when}] {item.get('text', '')} ({cite})")
    return "\n".join(lines)


def _start_daemon(store: Path) -> None:
    """Start the daemon in the background and return at once (the next hook finds it)."""
    import subprocess

    subprocess.Popen(
        [sys.executable, "-m", "cairn", "daemon", "start", "--store", str(store)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def run(agent: str, store_override: str | None, raw: bytes) -> str | None:
    """Record one payload; return what to print for the agent (None: nothing)."""
    adapter = adapter_for(agent)
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        log_problem("stdin is not JSON", agent=agent, error=str(exc)[:200], bytes=len(raw))
        return adapter.reply({}, None)
    if not isinstance(payload, dict):
        log_problem("stdin is not a JSON object", agent=agent, bytes=len(raw))
        return adapter.reply({}, None)
    try:
        return _record(adapter, store_override, payload)
    except Exception as exc:
        # answered for this payload's own event: Cursor's beforeSubmitPrompt must still
        # hear {"continue": true}, or a hook that failed would hold the user's prompt back
        log_problem("hook failed", agent=agent, error=f"{type(exc).__name__}: {exc}"[:300])
        return adapter.reply(payload, None)


def _record(
    adapter: AgentAdapter, store_override: str | None, payload: dict[str, Any]
) -> str | None:
    agent = adapter.name
    event = adapter.event_name(payload)
    store = find_store(adapter.cwd(payload), store_override)
    if store is None:
        untrusted = None if store_override else nearest_store(adapter.cwd(payload))
        if untrusted is None:
            log_problem("no cairn store for this project", agent=agent, hook_event=event)
        elif untrusted.is_symlink():
            log_problem(
                f"the cairn store here, {untrusted}, is a symbolic link: nothing is recorded "
                "through one; name the store it leads to with --store",
                agent=agent,
                hook_event=event,
            )
        elif (problem := trust_file_problem()) is not None:
            log_problem(
                f"a cairn store is here but the list of trusted stores is not believed: {problem}",
                agent=agent,
                hook_event=event,
            )
        else:
            # (the path only: it is the user's own folder, and the log is the user's)
            log_problem(
                "a cairn store is here but not trusted: nothing is recorded; if you made "
                f"it, run: cairn hooks trust {untrusted}",
                agent=agent,
                hook_event=event,
            )
        return adapter.reply(payload, None)
    settings = load_capture_settings(store)
    if not settings.enabled:
        return adapter.reply(payload, None)
    scope = settings.scope or default_scope(store)
    events = build_events(adapter, payload, settings, scope)
    # within Claude Code's SessionEnd budget (about 1.5 s): a daemon slower than this is
    # treated as down and the events are spooled, not lost with a killed hook
    client = DaemonClient(socket_path(store), timeout=1.0)
    spool = Spool(spool_path(store), max_bytes=settings.spool_max_bytes)
    # context is read before this call's own events go in: what the agent is told is what
    # came before it, never its own prompt echoed back
    kinds = {e["kind"] for e in events}
    wanted = (
        settings.context
        and event in adapter.context_events
        and ("session_start" in kinds or (settings.context_on_prompt and "user_message" in kinds))
    )
    recent = client.recent(scope, settings.context_tokens, timeout=0.5) if wanted else None
    outcome, why = client.append(events) if events else (Outcome.STORED, "")
    if outcome in {Outcome.STORED, Outcome.CONFLICT}:
        # CONFLICT: the id is taken by this same hook call sent before (a retry)
        if spool.pending():
            spool.replay(client.append, max_events=_REPLAY_PER_CALL, wait=False)
    else:
        if not spool.append(events):
            log_problem("the spool is full: events dropped", hook_event=event, count=len(events))
        if outcome is not Outcome.UNAVAILABLE:
            log_problem("the daemon refused the events", hook_event=event, reason=why[:300])
        elif settings.autostart and "session_start" in kinds:
            _start_daemon(store)
    return adapter.reply(payload, context_text(recent) if recent else None)


def _replay(store_override: str | None) -> int:
    store = find_store(None, store_override)
    if store is None:
        print("error (not_found): no cairn store here or above: pass --store", file=sys.stderr)
        return 3
    settings = load_capture_settings(store)
    spool = Spool(spool_path(store), max_bytes=settings.spool_max_bytes)
    report = spool.replay(DaemonClient(socket_path(store), timeout=30.0).append)
    print(
        json.dumps(
            {"stored": report.stored, "kept": report.kept, "rejected": report.rejected},
        )
    )
    for problem in report.problems:
        print(f"kept for later: {problem}", file=sys.stderr)
    if report.kept:
        print("start the daemon (cairn daemon start), then run this again", file=sys.stderr)
        return 1
    return 0


USAGE = """usage: cairn hook [replay] [--agent NAME] [--store DIR]

Record one coding-agent hook call (JSON on stdin) on the project's timeline. Always exits 0:
a hook must never break the agent. 'cairn hook replay' sends spooled events now.

  --agent NAME  whose payload it is: claude (default), gemini, codex, copilot, cursor, opencode
  --store DIR   the store folder (default: the nearest .cairn at or above the payload's cwd)
"""


def _parse(argv: list[str]) -> tuple[str | None, str, str | None] | str:
    """(action, agent, store), or the message for a usage error. By hand: argparse costs
    the hook about 10 ms of start-up for three options."""
    action, agent, store = None, "claude", None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        name, _, inline = arg.partition("=")
        if arg == "replay" and action is None:
            action = "replay"
        elif name in {"--agent", "--store"}:
            value = inline if inline else (rest.pop(0) if rest else "")
            if not value:
                return f"{name} needs a value"
            if name == "--agent":
                agent = value
            else:
                store = value
        else:
            return f"unknown argument {arg!r}"
    return action, agent, store


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(argv):
        sys.stdout.write(USAGE)
        return 0
    parsed = _parse(argv)
    if isinstance(parsed, str):
        # a broken hook command line must not break the agent either: say it, exit 0
        sys.stderr.write(f"cairn hook: {parsed}\n{USAGE}")
        log_problem("bad hook command line", error=parsed)
        return 0
    action, agent, store = parsed
    if action == "replay":
        return _replay(store)
    started = time.monotonic()
    reply: str | None = None
    try:
        raw = sys.stdin.buffer.read(MAX_PAYLOAD_BYTES + 1)
        if len(raw) > MAX_PAYLOAD_BYTES:
            log_problem("payload over 8 MiB: not recorded", agent=agent)
        else:
            reply = run(agent, store, raw)
    except Exception as exc:
        log_problem("hook failed", agent=agent, error=f"{type(exc).__name__}: {exc}"[:300])
        try:
            reply = adapter_for(agent).reply({}, None)  # some agents want JSON always
        except Exception:
            reply = None
    if reply:
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()
    elapsed = time.monotonic() - started
    if elapsed > 1.0:
        log_problem("slow hook", agent=agent, seconds=round(elapsed, 3))
    return 0
