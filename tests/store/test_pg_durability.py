"""PostgreSQL durability: an immediate shutdown (no checkpoint, as in a crash) while a writer
is committing loses no acknowledged write, and the writer carries on after the restart.

Uses a private embedded server (even with CAIRN_TEST_PG), since the test must stop it.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from cairn.errors import CairnError, DuplicateContent
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import AuditQuery, Content, Principal
from cairn.store.postgres import PostgresStore
from tests.pg import embedded_server

BEFORE_CRASH = 30
AFTER_RESTART = 20


def test_immediate_shutdown_keeps_every_acknowledged_write(agent: Principal) -> None:
    root = Path(tempfile.mkdtemp(prefix="cairn-pgd-"))
    with embedded_server(root) as server:
        url = server.url()
        memory = Memory(PostgresStore(url), parse_policy(DEFAULT_POLICY_YAML))
        acknowledged: list[tuple[str, str]] = []
        failures: list[CairnError] = []
        progress = threading.Condition()
        stop = threading.Event()

        def writer() -> None:
            n = 0
            while not stop.is_set():
                title = f"episode-{n}"
                try:
                    outcome = memory.remember(
                        Content(kind="episode", scope="acme/app", title=title, body=title),
                        principal=agent,
                    )
                except DuplicateContent:
                    n += 1  # an earlier attempt did land; it was never acknowledged
                    continue
                except CairnError as exc:  # the server is down: try the same write again
                    failures.append(exc)
                    continue
                assert outcome.record is not None
                with progress:
                    acknowledged.append((outcome.record.id, title))
                    progress.notify_all()
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with progress:
                assert progress.wait_for(lambda: len(acknowledged) >= BEFORE_CRASH, timeout=120)
            server.stop("immediate")  # mid-stream: the writer is busy committing
            crashed_at = len(acknowledged)
            server.start()  # crash recovery replays the WAL
            assert "automatic recovery in progress" in server.log.read_text()
            with progress:
                assert progress.wait_for(
                    lambda: len(acknowledged) >= crashed_at + AFTER_RESTART, timeout=120
                ), failures
        finally:
            stop.set()
            thread.join(timeout=120)
        memory.close()

        with PostgresStore(url) as check:
            found = check.get_records([record_id for record_id, _ in acknowledged])
            for record_id, title in acknowledged:
                assert record_id in found, f"acknowledged {record_id} was lost"
                assert found[record_id].content.title == title
            counts = check.counts()
            # every stored record has its version and exactly one audit entry: nothing was
            # half-applied by the crash, and no retried commit was applied twice
            assert counts["records"] == counts["versions"] == counts["audit"]
            assert counts["records"] in (len(acknowledged), len(acknowledged) + 1)
            seqs = [e.seq for e in check.list_audit(AuditQuery(limit=100_000))]
            assert seqs == list(range(1, len(seqs) + 1))  # gapless, in commit order
