"""Zero bypass: every committed change is audited, and only the store layer writes memory."""

from __future__ import annotations

import ast
import hashlib
import random
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cairn.errors import CairnError
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import (
    Content,
    ContentPatch,
    EventDraft,
    EventRole,
    Principal,
    PrincipalKind,
    ProposalStatus,
    RecordQuery,
    Sensitivity,
    Status,
)
from cairn.store.migrations import MEMORY_TABLES
from cairn.store.sqlite import SqliteStore

SRC = Path(__file__).resolve().parents[2] / "src" / "cairn"


def _digest(db: Path) -> str:
    """A fingerprint of every memory table except the audit log, read over its own
    connection: it changes exactly when a change was committed."""
    conn = sqlite3.connect(db)
    try:
        digest = hashlib.sha256()
        for table in MEMORY_TABLES:
            if table == "audit":
                continue
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2"):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        conn.close()


def _audit_count(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])
    finally:
        conn.close()


PRINCIPALS = [
    Principal(
        id="cur",
        kind=PrincipalKind.HUMAN,
        roles=("curator",),
        scopes=("*",),
        labels=("*",),
        sensitivity=Sensitivity.HIGH,
    ),
    Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",)),
    Principal(id="bot2", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/app",)),
    Principal(id="outsider", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("globex/*",)),
]
CURATOR_OF_ALL = PRINCIPALS[0]
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
KINDS = ["decision", "belief", "episode", "skill", "fact", "document", "bogus"]
SCOPES = ["acme/app", "acme/web", "globex/app"]


def _random_op(memory: Memory, store: SqliteStore, rng: random.Random, n: int) -> None:
    who = rng.choice(PRINCIPALS)
    records = [r.id for r in store.query_records(RecordQuery(limit=10_000), scope_globs=())]
    pending = [p.id for p in store.list_proposals(status=ProposalStatus.PENDING)]
    record = rng.choice(records) if records else "rec_missing"
    proposal = rng.choice(pending) if pending else "prp_missing"
    title = f"memory {rng.randrange(60)}"  # small pool: duplicates happen
    op = rng.randrange(15)
    if op <= 2:
        memory.remember(
            Content(
                kind=rng.choice(KINDS),
                scope=rng.choice(SCOPES),
                title=title,
                body=f"body of {title}",
                metadata={"impact": rng.choice(["low", "high"])},
            ),
            principal=who,
            draft=rng.random() < 0.2,
        )
    elif op == 3:
        memory.update(record, ContentPatch(body=f"edit {n}"), principal=who)
    elif op == 4:
        memory.update(
            record,
            ContentPatch(body=f"edit {n}"),
            principal=who,
            base_version_id=f"ver_{rng.randrange(3)}",
        )
    elif op == 5:
        memory.supersede(record, by=rng.choice(records or ["rec_missing"]), principal=who)
    elif op == 6:
        memory.transition(record, rng.choice(list(Status)), principal=who)
    elif op == 7:
        memory.decide(
            proposal,
            approve=rng.random() < 0.7,
            principal=who,
            reason=rng.choice([None, "checked"]),
        )
    elif op == 8:
        memory.rebase(proposal, principal=who)
    elif op == 9:
        memory.publish(rng.choice(SCOPES), principal=who)
    elif op == 10:
        memory.get(record, principal=who)
    elif op == 11:
        memory.archive(record, principal=who)
    elif op == 12:
        # events from a small pool of ids: some sent again, some again with other content
        memory.append_events(
            [
                EventDraft(
                    event_id=f"ev{rng.randrange(40)}",
                    ts=T0 + timedelta(minutes=rng.randrange(3000)),
                    session_id=f"s{rng.randrange(3)}",
                    scope=rng.choice(SCOPES),
                    role=EventRole.USER,
                    kind="user_message",
                    text=f"turn {rng.randrange(2)}",
                )
                for _ in range(rng.randrange(1, 4))
            ],
            principal=who,
        )
    elif op == 13:
        memory.rollup(principal=who)
    else:
        _timeline_read(memory, rng, who)


def _timeline_read(memory: Memory, rng: random.Random, who: Principal) -> None:
    """A timeline read: it must commit nothing."""
    nodes = memory.timeline_root(principal=CURATOR_OF_ALL)
    node = rng.choice(nodes).node_id if nodes else "tl_missing.year.2026"
    grips = [g.grip_id for n in nodes for g in n.grips] or ["grp_missing"]
    read = rng.randrange(7)
    if read == 0:
        memory.timeline_node(node, principal=who)
    elif read == 1:
        memory.timeline_browse(node, principal=who)
    elif read == 2:
        memory.expand_grip(rng.choice(grips), principal=who)
    elif read == 3:
        memory.timeline_search("turn", principal=who)
    elif read == 4:
        memory.timeline_recent(principal=who)
    elif read == 5:
        memory.timeline_scan("turn", node_id=node, principal=who)
    else:
        memory.events(principal=who)


def test_audit_entries_equal_committed_changes_over_1000_random_operations(tmp_path: Path) -> None:
    db = tmp_path / "cairn.db"
    store = SqliteStore(db)
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
    rng = random.Random(20261121)
    committed = refused = 0
    state = _digest(db)
    for n in range(1000):
        audits_before = _audit_count(db)
        try:
            _random_op(memory, store, rng, n)
        except CairnError:
            refused += 1
        after = _digest(db)
        audit_delta = _audit_count(db) - audits_before
        if after != state:
            committed += 1
            assert audit_delta == 1, f"operation {n} committed without exactly one audit entry"
        else:
            assert audit_delta == 0, f"operation {n} audited a change it did not make"
        state = after
    memory.close()
    assert _audit_count(db) == committed
    # the sequence must exercise both outcomes to mean anything, timeline builds included
    assert committed > 200 and refused > 200
    conn = sqlite3.connect(db)
    try:
        built = conn.execute("SELECT count(*) FROM toc_nodes").fetchone()[0]
        appended = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        conn.close()
    assert built > 20 and appended > 10, (built, appended)


WRITE_SQL = re.compile(
    r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+(\w+)", re.IGNORECASE
)


def _python_files_outside_store() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if "store" not in p.relative_to(SRC).parts]


def test_no_module_outside_the_store_writes_memory_tables() -> None:
    offenders: list[str] = []
    for path in _python_files_outside_store():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for match in WRITE_SQL.finditer(node.value):
                    if match.group(3).lower() in MEMORY_TABLES:
                        offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_the_scanner_would_catch_a_bypass() -> None:
    sneaky = 'conn.execute("insert into records (id) values (?)", ("x",))'
    found = [
        m.group(3)
        for node in ast.walk(ast.parse(sneaky))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for m in WRITE_SQL.finditer(node.value)
    ]
    assert found == ["records"]


def test_only_the_gate_calls_store_commit() -> None:
    callers: list[str] = []
    for path in _python_files_outside_store():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "commit"
            ):
                callers.append(str(path.relative_to(SRC)))
    assert set(callers) == {"governance/gate.py"}


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE versions SET content = '{}'",
        "DELETE FROM versions",
        "UPDATE audit SET actor = 'mallory'",
        "DELETE FROM audit",
        "UPDATE events SET text = 'rewritten'",
        "DELETE FROM events",
        "UPDATE toc_nodes SET body = '{}'",
        "DELETE FROM toc_nodes",
        "UPDATE grips SET event_id_end = event_id_start",
        "DELETE FROM grips",
    ],
)
def test_history_tables_refuse_rewrites(tmp_path: Path, statement: str) -> None:
    db = tmp_path / "cairn.db"
    store = SqliteStore(db)
    memory = Memory(store, parse_policy(DEFAULT_POLICY_YAML), root=tmp_path)
    memory.remember(Content(kind="episode", scope="acme/app", title="t"), principal=PRINCIPALS[0])
    memory.append_events(
        [
            EventDraft(
                event_id=f"e{n}", ts=T0 + timedelta(minutes=n), session_id="s",
                scope="acme/app", role=EventRole.USER, kind="note", text=f"Turn {n} said this.",
            )
            for n in range(4)
        ],
        principal=PRINCIPALS[0],
    )  # fmt: skip
    memory.rollup(principal=PRINCIPALS[0])
    memory.close()
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.IntegrityError, match=r"append-only|never changed"):
        conn.execute(statement)
    conn.close()
