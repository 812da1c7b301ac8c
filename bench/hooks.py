"""Coding-agent hooks: how long the ``cairn hook`` process takes, and how fast a spool replays.

    python bench/hooks.py --calls 300 --json out.json

On a fresh project store, with the installed ``cairn`` command (the agent runs exactly that):

1. ``python -c pass`` in the same interpreter: the floor any Python hook pays (the peer the
   hook's figures are compared with, in the same run);
2. ``cairn hook`` with the daemon up, one realistic Claude Code payload per call (prompts,
   tool calls with a few KB of output, answers), wall time of the whole process;
3. the same with the daemon down (every call goes to the spool);
4. ``cairn hook`` at a session's start with context on (two round trips: context, then the
   event) once the timeline has been rolled up;
5. replay throughput: the daemon started on a spool of ``--spool`` events, which it replays
   before it answers (events/s, from the start command to the spool being empty).

Targets: p95 ≤ 100 ms with the daemon up, ≤ 60 ms into the spool. Prints a table and writes
JSON; never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cairn.capture import daemon
from cairn.capture.local import spool_path
from cairn.capture.spool import Spool
from cairn.workspace import Workspace

CAIRN = str(Path(sys.executable).with_name("cairn"))


def _payloads(root: Path, n: int) -> list[bytes]:
    """A session's worth of Claude Code payloads, cycling prompt → tool call → result → answer."""
    out: list[bytes] = []
    for i in range(n):
        base = {
            "session_id": f"bench-{i // 40}",
            "transcript_path": str(root / "transcript.jsonl"),
            "cwd": str(root),
            "permission_mode": "default",
        }
        step = i % 4
        if step == 0:
            body = {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"Fix flaky test {i}"}
        elif step == 1:
            body = {
                **base,
                "hook_event_name": "PreToolUse",
                "tool_name": "Bash",
                "tool_use_id": f"toolu_{i}",
                "tool_input": {"command": f"pytest tests/test_{i}.py -x"},
            }
        elif step == 2:
            body = {
                **base,
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_use_id": f"toolu_{i - 1}",
                "tool_input": {"command": f"pytest tests/test_{i}.py -x"},
                "tool_response": {"stdout": ("collected 12 items ... passed\n" * 80), "stderr": ""},
            }
        else:
            body = {
                **base,
                "hook_event_name": "Stop",
                "last_assistant_message": f"Test {i} waited on a timer; it now uses a fake clock.",
            }
        out.append(json.dumps(body).encode())
    return out


def _time_process(command: list[str], stdin: bytes, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, input=stdin, env=env, capture_output=True, check=True)
    return (time.perf_counter() - started) * 1000


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    return {
        "n": len(samples),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(pct(95), 1),
        "p99_ms": round(pct(99), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="hook processes per case")
    parser.add_argument("--spool", type=int, default=20_000, help="events in the replay case")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="cairn-bench-hooks-"))
    env = dict(os.environ, XDG_STATE_HOME=str(work / "state"), XDG_CONFIG_HOME=str(work / "cfg"))
    # As on a user's machine: Python keeps compiled bytecode (an installed package has it
    # from the install; an editable one writes it on first use). Some shells here set
    # PYTHONDONTWRITEBYTECODE, which would make every hook compile cairn's modules anew.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    import compileall

    compileall.compile_dir(
        Path(__file__).resolve().parents[1] / "src" / "cairn" / "capture", quiet=1
    )
    os.environ.update(XDG_STATE_HOME=env["XDG_STATE_HOME"], XDG_CONFIG_HOME=env["XDG_CONFIG_HOME"])
    root = work / "proj"
    Workspace(root / ".cairn").init()
    store = root / ".cairn"
    results: dict[str, Any] = {"calls": args.calls}
    try:
        floor = [_time_process([sys.executable, "-c", "pass"], b"", env) for _ in range(args.calls)]
        results["python_floor"] = _stats(floor)

        daemon.start(store, embedder="static")
        payloads = _payloads(root, args.calls)
        up = [_time_process([CAIRN, "hook"], p, env) for p in payloads]
        results["daemon_up"] = _stats(up)

        daemon.stop(store)
        down = [_time_process([CAIRN, "hook"], p, env) for p in _payloads(root / "x", args.calls)]
        results["spool"] = _stats(down)
        spool = Spool(spool_path(store))
        spool.path.unlink(missing_ok=True)  # these were for timing only

        (store / "config.toml").write_text("[capture]\ncontext = true\n")
        daemon.start(store, embedder="static")
        start_payload = json.dumps(
            {
                "session_id": "next",
                "cwd": str(root),
                "hook_event_name": "SessionStart",
                "source": "startup",
            }
        ).encode()
        _time_process([CAIRN, "hook"], start_payload, env)  # the first rollup of what came before
        with_context = [
            _time_process([CAIRN, "hook"], start_payload, env) for _ in range(args.calls // 3)
        ]
        results["session_start_with_context"] = _stats(with_context)
        daemon.stop(store)

        # replay: a spool of --spool events, replayed by the daemon as it starts
        events = [json.loads(p) for p in _payloads(root, 8)]
        from cairn.capture.agents import adapter_for
        from cairn.capture.hook import build_events
        from cairn.capture.local import load_capture_settings

        settings = load_capture_settings(store)
        adapter = adapter_for("claude")
        for i in range(args.spool):
            body = dict(events[i % len(events)], tool_use_id=f"replay_{i}", prompt=f"prompt {i}")
            spool.append(build_events(adapter, body, settings, "code/proj"))
        started = time.perf_counter()
        daemon.start(store, embedder="static")
        replay_s = time.perf_counter() - started
        assert not spool.pending(), "the daemon did not replay the spool"
        results["replay"] = {
            "events": args.spool,
            "seconds": round(replay_s, 2),
            "events_per_s": round(args.spool / replay_s),
        }
        daemon.stop(store)
    finally:
        if daemon.status(store).running:
            daemon.stop(store)
        shutil.rmtree(work, ignore_errors=True)

    table = Table(title=f"cairn hook: wall time of the whole process ({args.calls} calls per case)")
    for column in ("case", "p50 ms", "p95 ms", "p99 ms", "target p95"):
        table.add_column(column, justify="left" if column == "case" else "right")
    targets = {"daemon_up": "≤ 100", "spool": "≤ 60"}
    for case in ("python_floor", "daemon_up", "spool", "session_start_with_context"):
        row = results[case]
        table.add_row(
            case, str(row["p50_ms"]), str(row["p95_ms"]), str(row["p99_ms"]), targets.get(case, "")
        )
    console.print(table)
    replay = results["replay"]
    console.print(
        f"replay: {replay['events']:,} spooled events in {replay['seconds']} s "
        f"({replay['events_per_s']:,} events/s, daemon start included)"
    )
    floor_p50 = results["python_floor"]["p50_ms"]
    up_ratio = results["daemon_up"]["p50_ms"] / floor_p50
    spool_ratio = results["spool"]["p50_ms"] / floor_p50
    console.print(f"hook p50 / bare Python p50: up {up_ratio:.1f}x, spool {spool_ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
