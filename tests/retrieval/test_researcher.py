"""The Researcher: planning, bounded retries, summaries with citations."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.memory import Memory
from cairn.model import Principal, utcnow
from cairn.retrieval.researcher import Retrieve, plan, research
from cairn.store.sqlite import SqliteStore
from tests.conftest import content


def _memory(tmp_path: Path) -> Memory:
    return Memory(
        SqliteStore(tmp_path / "c.db"),
        parse_policy(DEFAULT_POLICY_YAML),
        root=tmp_path,
        embedder="static",
    )


def test_plan_reads_kinds_and_time_from_the_question() -> None:
    now = utcnow()
    chosen = plan("What recent decisions were made about the database?", now=now)
    assert chosen.memory_types == ("decision",)
    assert chosen.created_after == now - timedelta(days=7)
    assert "database" in chosen.primary_query and "decisions" not in chosen.primary_query
    assert plan("how do I scaffold a service", now=now).memory_types == ("skill",)
    assert plan("tell me about the database", now=now).created_after is None


def test_answers_with_citations_and_stops_when_confident(
    tmp_path: Path, curator: Principal
) -> None:
    memory = _memory(tmp_path)
    ids = set()
    for n, title in enumerate(
        (
            "Use Alembic for database migrations",
            "Database schema versioning uses Alembic revisions",
            "Database migrations run in CI before deploys",
        )
    ):
        outcome = memory.remember(
            content(title, kind="decision", body=f"{title}. ({n})", confidence="verified"),
            principal=curator,
        )
        assert outcome.record is not None
        ids.add(outcome.record.id)
    memory.index_pending()  # reads never embed: vectors come from the indexer
    answer = memory.research(
        "What decisions have been made about database migrations?", principal=curator
    )
    assert {i.record_id for i in answer.items} == ids
    assert len(answer.attempts) == 1 and not answer.partial
    for item in answer.items:
        assert f"cite ({item.record_id}, {item.version_id})" in answer.summary
    assert answer.summary.startswith("Found 3 relevant decision records")


def test_retries_at_most_three_times_then_warns(tmp_path: Path, curator: Principal) -> None:
    memory = _memory(tmp_path)
    memory.remember(content("Kafka brokers", body="We run three Kafka brokers."), principal=curator)
    answer = memory.research(
        "what recent decisions about quantum chromodynamics?", principal=curator
    )
    assert [a.number for a in answer.attempts] == [1, 2, 3]
    assert [a.mode for a in answer.attempts] == ["hybrid", "hybrid", "keyword"]
    assert answer.attempts[1].top_k == 20 and answer.attempts[0].kinds == ("decision",)
    assert answer.partial and any("partial" in w for w in answer.warnings)


def test_expired_beliefs_are_filtered_and_contradictions_flagged(
    tmp_path: Path, curator: Principal
) -> None:
    memory = _memory(tmp_path)
    past = utcnow() - timedelta(days=3)
    expired = memory.remember(
        content(
            "The API runs on port 8000",
            kind="belief",
            valid_from=past - timedelta(days=9),
            valid_to=past,
        ),
        principal=curator,
    ).record
    a = memory.remember(
        content("The API port is 8080", kind="belief", body="The API listens on port 8080."),
        principal=curator,
    )
    b = memory.remember(
        content("The API port is 9090", kind="belief", body="The API listens on port 9090."),
        principal=curator,
    )
    answer = memory.research("which port does the API listen on?", principal=curator)
    found = {i.record_id for i in answer.items}
    assert expired is not None and expired.id not in found
    assert a.record and b.record and {a.record.id, b.record.id} <= found
    assert answer.contradictions and any("contradictions" in w for w in answer.warnings)


def test_three_confident_results_are_enough_whatever_follows_them(
    tmp_path: Path, curator: Principal
) -> None:
    memory = _memory(tmp_path)
    memory.remember(
        content("Use Alembic for migrations", kind="decision", body="Alembic it is."),
        principal=curator,
    )
    memory.index_pending()
    found = memory.retrieve("Alembic migrations", principal=curator)
    item = found.items[0]

    def answering(*confidences: float) -> Retrieve:
        items = tuple(
            item.model_copy(update={"scores": item.scores.model_copy(update={"confidence": c})})
            for c in confidences
        )
        return lambda query, **_: found.model_copy(update={"items": items})

    # three confident results, then a weak tail: the first attempt is enough
    answer = research(
        "migrations", answering(0.9, 0.85, 0.8, *[0.1] * 7), now=utcnow(), max_tokens=8000
    )
    assert len(answer.attempts) == 1 and not answer.partial
    assert answer.attempts[0].mean_confidence == pytest.approx(0.85)
    # two confident results and a weak third are not: three attempts, and a warning
    answer = research("migrations", answering(0.9, 0.9, 0.2), now=utcnow(), max_tokens=8000)
    assert len(answer.attempts) == 3 and answer.partial
    memory.close()
