"""The timeline: append, rollup and read speed at scale, and what its summaries find on LoCoMo.

    python bench/timeline.py --events 100000 --json out.json
    python bench/timeline.py --events 100000 --db postgresql://…/EMPTY_DB --json out.json
    python bench/timeline.py --locomo ../shared/data/locomo/locomo_dev.json --json out.json
    python bench/timeline.py --quick --json out.json

Scale (synthetic coding sessions: 20 to 60 events two minutes apart, several sessions a day,
~150 characters each, in one scope) on a fresh store:

1. append throughput, events/s, in batches of 1,000 and one at a time;
2. the full rollup, then the incremental rollup after one new segment arrives;
3. p50/p95 latency of every read (toc root, node, browse, events by range, expand grip,
   teleport search, recent context), with ``--embedder`` (static by default) embedding the
   index first so that search is hybrid;
4. peak RSS of the process.

Quality (``--locomo``; skipped with a message when the file is absent): each conversation's
turns are appended as events at their session's date-time (one second apart, in order) and
rolled up; then, for questions of categories 1–4, (a) teleport recall@10, the share of
questions for which a returned grip (or a returned node's grips) covers a gold evidence turn,
against cairn's flat record search over the same turns as records, in the same run; and
(b) per session, the share of its evidence turns (those any question cites) that the day
node's bullets reach through their grips.

Prints tables and writes JSON; never asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._data import SHARED_DATA, load_locomo
from bench.ingest import WORDS, WRITER

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import (
    Content,
    EventDraft,
    EventRole,
    TocLevel,
    TocNode,
)
from cairn.store.factory import open_store

# The writer and vocabulary of the write-throughput bench: one synthetic world for both.
CURATOR = WRITER

T0 = datetime(2025, 1, 6, tzinfo=UTC)
BATCH = 1000
TARGETS = {
    "append_batched_per_s": 5000.0,
    "rollup_full_1m_s": 300.0,
    "rollup_incremental_s": 1.0,
    "navigation_p95_ms": 20.0,
    "search_p95_ms": 50.0,
    "rss_mb_1m": 1536.0,
}


def _text(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(14, 28))]
    return " ".join(words).capitalize() + "."


def synthetic_batches(count: int, seed: int, size: int = BATCH) -> Iterator[list[EventDraft]]:
    """``count`` events of coding sessions (about 2,000 a day), ``size`` at a time, so that a
    million of them never sit in memory at once."""
    rng = random.Random(seed)
    batch: list[EventDraft] = []
    made = day = session = 0
    while made < count:
        hour = 8.0
        while hour < 20 and made < count:
            length = rng.randint(20, 60)
            start = T0 + timedelta(days=day, hours=hour)
            session += 1
            for i in range(min(length, count - made)):
                role = (EventRole.USER, EventRole.ASSISTANT, EventRole.TOOL)[i % 3]
                batch.append(
                    EventDraft(
                        event_id=f"ev{made:08d}",
                        ts=start + timedelta(minutes=2 * i),
                        session_id=f"s{session}",
                        scope="bench/app",
                        agent="claude-code",
                        role=role,
                        kind=f"{role.value}_message" if role is not EventRole.TOOL else "tool_call",
                        text=_text(rng),
                    )
                )
                made += 1
                if len(batch) == size:
                    yield batch
                    batch = []
            hour += length * 2 / 60 + rng.uniform(0.6, 1.5)  # a pause past the 30-minute gap
        day += 1
    if batch:
        yield batch


def _quantiles(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000,
        "n": len(ordered),
    }


def _timed(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return _quantiles(samples)


def _open(folder: Path, db: str | None, embedder: str | None) -> Memory:
    store = open_store(db, folder)
    return Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=folder, embedder=embedder)


def run_scale(args: argparse.Namespace, console: Console, folder: Path) -> dict[str, Any]:
    embedder = None if args.embedder == "none" else args.embedder
    memory = _open(folder, args.db, embedder)
    out: dict[str, Any] = {"events": args.events, "backend": "postgresql" if args.db else "sqlite"}

    moments: list[datetime] = []  # every 97th event's time, for the range reads
    first: list[EventDraft] = []
    last_ts = T0
    start = time.perf_counter()
    for batch in synthetic_batches(args.events, args.seed):
        memory.append_events(batch, principal=CURATOR)
        moments += [e.ts for e in batch[::97]]
        first = first or batch[:30]
        last_ts = batch[-1].ts
    out["append_batched_per_s"] = args.events / (time.perf_counter() - start)
    console.print(f"appended {args.events:,} events: {out['append_batched_per_s']:,.0f}/s")

    if args.db is None:
        single = min(max(200, args.events // 100), 2000)
        (folder / "single").mkdir(exist_ok=True)
        lone = _open(folder / "single", None, None)
        start = time.perf_counter()
        for batch in synthetic_batches(single, args.seed):
            for event in batch:
                lone.append_events([event], principal=CURATOR)
        out["append_single_per_s"] = single / (time.perf_counter() - start)
        lone.close()

    start = time.perf_counter()
    report = memory.rollup(principal=CURATOR)
    out["rollup_full_s"] = time.perf_counter() - start
    out["nodes"] = report.levels
    console.print(f"full rollup: {out['rollup_full_s']:.1f}s, {report.nodes_written:,} nodes")

    fresh = [
        e.model_copy(
            update={"event_id": f"late{i:04d}", "ts": last_ts + timedelta(hours=2, minutes=i)}
        )
        for i, e in enumerate(first)
    ]
    memory.append_events(fresh, principal=CURATOR)
    start = time.perf_counter()
    memory.rollup(principal=CURATOR)
    out["rollup_incremental_s"] = time.perf_counter() - start

    if memory.indexer is not None:
        start = time.perf_counter()
        memory.index_pending()
        out["embed_s"] = time.perf_counter() - start

    out["reads"] = _reads(memory, args, moments)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    memory.close()
    return out


def _reads(memory: Memory, args: argparse.Namespace, moments: list[datetime]) -> dict[str, Any]:
    rng = random.Random(args.seed + 1)
    (year,) = memory.timeline_root(principal=CURATOR)[:1]
    segments: list[TocNode] = []
    days: list[TocNode] = []
    month = memory.timeline_node(year.children[-1], principal=CURATOR)
    for week_id in month.children:
        for day_id in memory.timeline_node(week_id, principal=CURATOR).children:
            day = memory.timeline_node(day_id, principal=CURATOR)
            days.append(day)
            segments += [memory.timeline_node(s, principal=CURATOR) for s in day.children[:3]]
    grips = [g.grip_id for s in segments for g in s.grips]
    nodes = [n.node_id for n in (*days, *segments)]
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
    n = args.queries

    def range_read() -> object:
        at = rng.choice(moments)
        return memory.events(principal=CURATOR, since=at, until=at + timedelta(hours=1))

    return {
        "toc_root": _timed(lambda: memory.timeline_root(principal=CURATOR), n),
        "node": _timed(lambda: memory.timeline_node(rng.choice(nodes), principal=CURATOR), n),
        "browse": _timed(
            lambda: memory.timeline_browse(rng.choice(days).node_id, principal=CURATOR), n
        ),
        "events_by_range": _timed(range_read, n),
        "expand_grip": _timed(lambda: memory.expand_grip(rng.choice(grips), principal=CURATOR), n),
        "teleport_search": _timed(
            lambda: memory.timeline_search(queries[rng.randrange(n)], principal=CURATOR), n
        ),
        "recent_context": _timed(lambda: memory.timeline_recent(principal=CURATOR), n),
    }


# ---- quality on LoCoMo ------------------------------------------------------------------


def run_locomo(args: argparse.Namespace, console: Console, folder: Path) -> dict[str, Any] | None:
    path = Path(args.locomo) if args.locomo else SHARED_DATA / "locomo" / "locomo_dev.json"
    if not path.exists():
        console.print(f"[yellow]LoCoMo data not found at {path}: quality skipped[/]")
        return None
    conversations = load_locomo(path)
    if args.quick:
        conversations = conversations[:1]
    embedder = None if args.embedder == "none" else args.embedder
    memory = _open(folder, None, embedder)
    turn_of_record: dict[str, str] = {}
    for conv in conversations:
        scope = f"locomo/{conv.sample_id}"
        drafts: list[EventDraft] = []
        contents: list[Content] = []
        for session, turns in sorted(conv.sessions().items()):
            when = turns[0].when or (T0 + timedelta(days=session))
            for i, turn in enumerate(turns):
                text = turn.text + (f" [image: {turn.caption}]" if turn.caption else "")
                drafts.append(
                    EventDraft(
                        event_id=f"{conv.sample_id}:{turn.dia_id}",
                        ts=when + timedelta(seconds=i),
                        session_id=f"{conv.sample_id}-s{session}",
                        scope=scope,
                        agent=turn.speaker,
                        role=EventRole.USER
                        if turn.speaker == conv.speaker_a
                        else EventRole.ASSISTANT,
                        kind="user_message"
                        if turn.speaker == conv.speaker_a
                        else "assistant_message",
                        text=f"{turn.speaker}: {text}",
                    )
                )
                contents.append(
                    Content(
                        kind="episode", scope=scope, title=f"{turn.speaker} on {turn.session_date}",
                        body=text,
                    )
                )  # fmt: skip
        memory.append_events(drafts, principal=CURATOR)
        for start in range(0, len(contents), BATCH):
            outcomes = memory.store_many(contents[start : start + BATCH], principal=CURATOR)
            for offset, outcome in enumerate(outcomes):
                if outcome.record is not None:
                    turn_of_record[outcome.record.id] = drafts[start + offset].event_id
    memory.rollup(principal=CURATOR)
    if memory.indexer is not None:
        memory.index_pending()

    def covered(grip_ids: Sequence[str], cache: dict[str, set[str]]) -> set[str]:
        found: set[str] = set()
        for grip_id in grip_ids:
            if grip_id not in cache:
                expanded = memory.expand_grip(grip_id, principal=CURATOR, before=0, after=0)
                cache[grip_id] = {e.event_id for e in expanded.events}
            found |= cache[grip_id]
        return found

    cache: dict[str, set[str]] = {}
    teleport_hits = flat_hits = strict_hits = asked = 0
    by_category: dict[int, list[int]] = {}
    for conv in conversations:
        scope = f"locomo/{conv.sample_id}"
        for question in conv.questions:
            gold = {f"{conv.sample_id}:{d}" for d in question.evidence}
            hits = memory.timeline_search(
                question.question, principal=CURATOR, scope=scope, k=10
            ).hits
            reached = covered([g for h in hits for g in h.grip_ids], cache)
            # stricter: only the grips of the bullets that matched (a summary's hit brings
            # every grip of its node, which for a day is the whole session)
            strict = covered([g for h in hits if len(h.grip_ids) == 1 for g in h.grip_ids], cache)
            s_ok = bool(strict & gold)
            strict_hits += s_ok
            flat = memory.search(question.question, principal=CURATOR, scope=scope, k=10)
            flat_turns = {turn_of_record.get(i.record_id, "") for i in flat.hits}
            t_ok, f_ok = bool(reached & gold), bool(flat_turns & gold)
            teleport_hits += t_ok
            flat_hits += f_ok
            asked += 1
            by_category.setdefault(question.category, [0, 0, 0])
            by_category[question.category][0] += t_ok
            by_category[question.category][1] += f_ok
            by_category[question.category][2] += 1

    # day-node coverage: each session's evidence turns reached through its day's bullets
    reached_total = evidence_total = 0
    for conv in conversations:
        scope = f"locomo/{conv.sample_id}"
        cited = {d for q in conv.questions for d in q.evidence}
        days = _days(memory, scope)
        for _session, turns in sorted(conv.sessions().items()):
            wanted = {f"{conv.sample_id}:{t.dia_id}" for t in turns if t.dia_id in cited}
            if not wanted:
                continue
            first = f"{conv.sample_id}:{turns[0].dia_id}"
            day = next((d for d in days if _holds(memory, d, first, cache)), None)
            reach = covered([g for b in day.bullets for g in b.grip_ids], cache) if day else set()
            reached_total += len(wanted & reach)
            evidence_total += len(wanted)
    memory.close()
    return {
        "conversations": len(conversations),
        "questions": asked,
        "teleport_recall@10": 100 * teleport_hits / max(1, asked),
        "flat_recall@10": 100 * flat_hits / max(1, asked),
        "teleport_bullet_recall@10": 100 * strict_hits / max(1, asked),
        "by_category": {
            str(c): {"teleport": 100 * v[0] / v[2], "flat": 100 * v[1] / v[2], "n": v[2]}
            for c, v in sorted(by_category.items())
        },
        "day_coverage": 100 * reached_total / max(1, evidence_total),
        "evidence_turns": evidence_total,
    }


def _days(memory: Memory, scope: str) -> list[TocNode]:
    found: list[TocNode] = []
    stack = [n.node_id for n in memory.timeline_root(principal=CURATOR, scope=scope)]
    while stack:
        node = memory.timeline_node(stack.pop(), principal=CURATOR)
        if node.level is TocLevel.DAY:
            found.append(node)
        else:
            stack += node.children
    return found


def _holds(memory: Memory, day: TocNode, event_id: str, cache: dict[str, set[str]]) -> bool:
    """Whether ``event_id`` falls in one of the day's segments."""
    for segment_id in day.children:
        segment = memory.timeline_node(segment_id, principal=CURATOR)
        key = f"segment:{segment_id}"
        if key not in cache:
            events = memory.events(
                principal=CURATOR,
                scope=segment.scope,
                since=segment.starts_at,
                until=segment.ends_at + timedelta(microseconds=1),
                limit=10_000,
            )
            cache[key] = {e.event_id for e in events}
        if event_id in cache[key]:
            return True
    return False


# ---- output -----------------------------------------------------------------------------


def print_tables(console: Console, result: dict[str, Any]) -> None:
    scale = result.get("scale")
    if scale:
        table = Table(title=f"timeline at {scale['events']:,} events ({scale['backend']})")
        table.add_column("measure")
        table.add_column("value", justify="right")
        table.add_column("target", justify="right")
        table.add_row(
            "append, batched (events/s)", f"{scale['append_batched_per_s']:,.0f}", "≥ 5,000"
        )
        if "append_single_per_s" in scale:
            table.add_row(
                "append, one at a time (events/s)", f"{scale['append_single_per_s']:,.0f}", ""
            )
        table.add_row("full rollup (s)", f"{scale['rollup_full_s']:.1f}", "≤ 300 at 1M")
        table.add_row("incremental rollup (s)", f"{scale['rollup_incremental_s']:.2f}", "≤ 1")
        for name, q in scale["reads"].items():
            target = "≤ 50" if name == "teleport_search" else "≤ 20"
            table.add_row(
                f"{name} p50 / p95 (ms)", f"{q['p50_ms']:.2f} / {q['p95_ms']:.2f}", target
            )
        table.add_row("peak RSS (MB)", f"{scale['rss_mb']:,.0f}", "≤ 1,536 at 1M")
        console.print(table)
    quality = result.get("locomo")
    if quality:
        table = Table(title=f"LoCoMo ({quality['questions']} questions, categories 1–4)")
        table.add_column("measure")
        table.add_column("teleport", justify="right")
        table.add_column("flat search", justify="right")
        table.add_row(
            "recall@10 (%)",
            f"{quality['teleport_recall@10']:.1f}",
            f"{quality['flat_recall@10']:.1f}",
        )
        table.add_row(
            "recall@10, matched bullets' grips only (%)",
            f"{quality['teleport_bullet_recall@10']:.1f}",
            "",
        )
        for category, values in quality["by_category"].items():
            table.add_row(
                f"  category {category} (n={values['n']})",
                f"{values['teleport']:.1f}",
                f"{values['flat']:.1f}",
            )
        table.add_row("day-node evidence coverage (%)", f"{quality['day_coverage']:.1f}", "")
        console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", default="static", help="static, minilm, openai:URL or none")
    parser.add_argument("--db", default=None, help="postgresql://… (default: embedded SQLite)")
    parser.add_argument("--locomo", default=None, help="locomo_dev.json (default: ../shared)")
    parser.add_argument("--no-scale", action="store_true", help="only the LoCoMo quality run")
    parser.add_argument("--no-quality", action="store_true", help="only the scale run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a few seconds: smoke test")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.queries = min(args.events, 3000), min(args.queries, 20)
    console = Console()
    result: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="cairn-timeline-") as tmp:
        if not args.no_scale:
            scale_dir = Path(tmp) / "scale"
            scale_dir.mkdir()
            result["scale"] = run_scale(args, console, scale_dir)
        if not args.no_quality:
            quality_dir = Path(tmp) / "locomo"
            quality_dir.mkdir()
            result["locomo"] = run_locomo(args, console, quality_dir)
    result["targets"] = TARGETS
    print_tables(console, result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
