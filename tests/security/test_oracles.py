"""Missing and hidden answer alike, and counts are per caller.

The attacks this closes: ``/health`` without a key told store-wide counts, the store's path
and the number of principals; ``/v1/status`` told any key store-wide counts; read_context
warnings, baseline refs, version numbers and rebase answered differently for a thing that
does not exist and a thing the caller may not see.
"""

from __future__ import annotations

import pytest

from cairn.errors import NotFound
from cairn.memory import Memory
from cairn.model import Acl, ContentPatch, PinKind, Principal, PrincipalKind, VersionPin
from cairn.retrieval.context import ReadContextRequest
from cairn.store.base import Store
from tests.conftest import content
from tests.security.conftest import Served

NEVER = "rec_01NEVEREXISTED00000000000"


def _agent() -> Principal:
    return Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))


def _same(hidden: Exception, missing: Exception, hidden_id: str, missing_id: str) -> None:
    assert type(hidden) is type(missing)
    assert str(hidden).replace(hidden_id, "X") == str(missing).replace(missing_id, "X")


def test_health_without_a_key_says_only_that_the_server_is_up(served: Served) -> None:
    response = served.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "ready": True}
    assert str(served.folder) not in response.text


def test_status_counts_only_what_the_caller_may_see(served: Served) -> None:
    curator = served.as_("curator")
    hidden = {"kind": "fact", "scope": "acme/status", "title": "Hidden from agents",
              "acl": {"roles": ["curator"]}}  # fmt: skip
    shown = {"kind": "fact", "scope": "acme/status", "title": "Shown to agents"}
    for body in (hidden, shown):
        assert served.client.post("/v1/records", json={"content": body}, headers=curator).is_success
    whole = served.client.get("/v1/status", headers=curator).json()
    theirs = served.client.get("/v1/status", headers=served.as_("agent")).json()
    assert whole["records"] == theirs["records"] + 1
    assert "audit" in whole and "audit" not in theirs and "vector_lag" not in theirs
    assert theirs["proposals"] == 0


def test_versions_hidden_and_missing_read_alike(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    outcome = memory.remember(
        content("Launch date", kind="fact", acl=Acl(roles=("curator",))), principal=curator
    )
    assert outcome.record is not None
    record_id = outcome.record.id
    memory.update(record_id, ContentPatch(acl=Acl()), principal=curator)  # v2 opens it up
    assert memory.get(record_id, principal=agent).version.number == 2
    with pytest.raises(NotFound) as hidden:
        memory.get(record_id, principal=agent, version=1)
    with pytest.raises(NotFound) as missing:
        memory.get(record_id, principal=agent, version=7)
    assert str(hidden.value).replace("version 1", "version N") == str(missing.value).replace(
        "version 7", "version N"
    )
    assert [v.number for v in memory.history(record_id, principal=agent)] == [2]


def test_baseline_refs_hidden_and_missing_read_alike(
    memory: Memory, curator: Principal, store: Store
) -> None:
    agent = _agent()
    memory.remember(content("Globex plan", kind="fact", scope="globex/app"), principal=curator)
    published = memory.publish("globex/app", principal=curator)
    hidden_baseline = published.proposal.change.model_dump()  # no baseline id here
    baseline_id = store.published_baseline_id("globex/app")
    assert baseline_id is not None and hidden_baseline
    mine = memory.remember(content("Acme plan", kind="fact"), principal=curator).record
    assert mine is not None
    never = "bsl_01NEVEREXISTED00000000000"

    def by_ref(baseline: str) -> VersionPin:
        return VersionPin(kind=PinKind.BASELINE_REF, baseline_id=baseline)

    with pytest.raises(NotFound) as hidden:
        memory.get(mine.id, principal=agent, selector=by_ref(baseline_id))
    with pytest.raises(NotFound) as missing:
        memory.get(mine.id, principal=agent, selector=by_ref(never))
    _same(hidden.value, missing.value, baseline_id, never)
    answers = []
    for baseline in (baseline_id, never):
        with pytest.raises(NotFound) as refused:
            memory.retrieve("plan", principal=agent, mode="keyword", selector=by_ref(baseline))
        answers.append(str(refused.value).replace(baseline, "X"))
    assert answers[0] == answers[1]


def test_read_context_warns_alike_for_hidden_and_unpublished_scopes(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    memory.remember(content("Globex plan", kind="fact", scope="globex/app"), principal=curator)
    memory.publish("globex/app", principal=curator)

    def warnings(scope: str) -> tuple[str, ...]:
        request = ReadContextRequest(scope=scope, query="plan", mode="keyword")
        return memory.read_context(request, principal=agent).warnings

    assert warnings("globex/app") == (
        warnings("globex/never").__getitem__(0).replace("globex/never", "globex/app"),
    )


def test_rebase_and_get_of_a_hidden_proposal_read_like_a_missing_one(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    other = Principal(id="other", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))
    theirs = memory.remember(content("Belief", kind="belief"), principal=other).proposal.id
    never = "prp_01NEVEREXISTED00000000000"
    for verb in (memory.rebase, memory.proposal):
        with pytest.raises(NotFound) as hidden:
            verb(theirs, principal=agent)
        with pytest.raises(NotFound) as missing:
            verb(never, principal=agent)
        _same(hidden.value, missing.value, theirs, never)


def test_get_and_validate_of_a_hidden_record_read_like_a_missing_one(
    memory: Memory, curator: Principal
) -> None:
    agent = _agent()
    hidden = memory.remember(
        content("Secret", kind="fact", acl=Acl(roles=("curator",))), principal=curator
    ).record
    assert hidden is not None
    with pytest.raises(NotFound) as seen:
        memory.get(hidden.id, principal=agent)
    with pytest.raises(NotFound) as unseen:
        memory.get(NEVER, principal=agent)
    _same(seen.value, unseen.value, hidden.id, NEVER)
    a = memory.validate([hidden.id], principal=agent).records[0].model_dump()
    b = memory.validate([NEVER], principal=agent).records[0].model_dump()
    assert {**a, "record_id": "X"} == {**b, "record_id": "X"}


def test_completions_offer_only_readable_ids_and_scopes(memory: Memory, curator: Principal) -> None:
    agent = _agent()
    shown = {
        memory.remember(
            content(f"Shown {n}", kind="fact", scope=scope), principal=curator
        ).record.id  # type: ignore[union-attr]
        for n, scope in enumerate(("acme/app", "acme/ops", "acme/app"))
    }
    hidden_record = memory.remember(
        content("Hidden", kind="fact", scope="acme/vault", acl=Acl(roles=("curator",))),
        principal=curator,
    ).record
    memory.remember(content("Elsewhere", kind="fact", scope="globex/app"), principal=curator)
    assert hidden_record is not None
    assert set(memory.record_ids("rec_", principal=agent)) == shown
    assert memory.record_ids(hidden_record.id, principal=agent) == []
    # ids made in one millisecond differ only in their last characters, so a shorter prefix
    # of the hidden id may offer shown records, but never the hidden one
    near = memory.record_ids(hidden_record.id[:-1], principal=agent)
    assert hidden_record.id not in near and set(near) <= shown
    assert memory.scopes("", principal=agent) == ["acme/app", "acme/ops"]
    assert memory.scopes("acme/o", principal=agent) == ["acme/ops"]
    assert memory.scopes("acme/v", principal=agent) == []  # holds only a hidden record
    assert memory.scopes("", principal=curator) == [
        "acme/app", "acme/ops", "acme/vault", "globex/app"
    ]  # fmt: skip
    ordered = memory.record_ids("", principal=curator, limit=2)
    assert ordered == sorted(ordered) and len(ordered) == 2
