"""The meta of every answer against its schema, replay fingerprints, the candidate cache
partitioned by policy and snapshot, the trace bundle kept per answer, and the downloads:
who may take which, and who may read whose trace."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.graph.llm import ChatAnswerer
from cairn.graph.schema import meta_errors
from cairn.graph.settings import GraphSettings
from cairn.graph.traces import BUNDLE_FILES, TraceFolder
from cairn.graph.why import WhyRequest
from cairn.memory import Memory
from cairn.model import Content, Principal, PrincipalKind, Sensitivity
from cairn.openai_compat import MAX_ANSWER_BYTES
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR
from tests.graph.conftest import (
    ASKERS,
    DIRECTOR,
    MANAGER,
    ROLES,
    STAFF,
    asker,
    echo_answerer,
    ingest,
    new_memory,
    stored_edges,
)
from tests.graph.mini import mini_graph

ASKED_FILES = {
    "_meta.json", "envelope.json", "evidence_pre.json", "plan.json", "evidence_post.json",
    "evidence_canonical.json", "response.json", "validator_report.json",
}  # fmt: skip


def why(
    memory: Memory, principal: Principal, anchor: str = "emea-sunset", *, mode: str = "ask",
    answerer: ChatAnswerer | None = None, **request: Any,
) -> dict[str, Any]:  # fmt: skip
    memory._answerer = answerer
    try:
        return memory.why(
            WhyRequest(anchor=anchor, **request), principal=principal,
            mode="ask" if mode == "ask" else "query",
        )  # fmt: skip
    finally:
        memory._answerer = None


def unzip(data: bytes) -> dict[str, Any]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: json.loads(archive.read(name)) for name in archive.namelist()}


# ---- the meta ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_the_meta_validates_for_every_role_and_mode(
    role: str, lite: Memory, mini: dict[str, str]
) -> None:
    principal = ASKERS[role]
    for mode, answerer in (("ask", None), ("query", None), ("query", echo_answerer())):
        body = why(lite, principal, mode=mode, answerer=answerer)
        meta = body["_meta"]
        assert meta_errors(meta) == []
        assert meta["validator"] == {"error_count": 0, "warnings": []}
        audit = lite.trace(body["trace_id"], principal=CURATOR)["files"]["_meta.json"]
        assert meta_errors(audit) == []
        assert meta["request"]["mode"] == mode
        assert meta["actor"]["role"] == role
        runtime, response = meta["runtime"], meta["response"]
        if answerer is not None:
            assert response["mode"] == meta_mode(meta) == "llm"
            assert response["short_answer"] is None
            assert response["llm_completion"]["token_usage"]["completion"] == 1
            assert (runtime["fallback_used"], runtime["fallback_reason"]) == (False, None)
            assert meta["policy"]["llm"] == {"mode": "auto", "model": "echo-1"}
        else:
            assert response["mode"] == "templater"
            assert response["short_answer"] == body["answer"]
            assert response["llm_completion"] is None
            if mode == "query":
                assert runtime["fallback_used"] is True
                assert runtime["fallback_reason"] == "llm:not_configured"
            else:
                assert runtime["fallback_used"] is False
                assert meta["policy"]["llm"]["mode"] == "off"


def meta_mode(meta: dict[str, Any]) -> str:
    mode: str = meta["response"]["mode"]
    return mode


def test_the_schema_is_not_vacuous(lite: Memory, mini: dict[str, str]) -> None:
    meta = why(lite, STAFF)["_meta"]
    broken = {k: v for k, v in meta.items() if k != "downloads"}
    assert any("downloads" in error for error in meta_errors(broken))
    wrong = json.loads(json.dumps(meta))
    wrong["policy_trace"]["reasons_by_id"] = {"withheld-1": "because"}
    assert meta_errors(wrong)


def _failing(error: Exception | None, status: int = 200, content: Any = None) -> ChatAnswerer:
    def handler(request: httpx.Request) -> httpx.Response:
        if error is not None:
            raise error
        return httpx.Response(status, json=content)

    return ChatAnswerer(base_url="http://llm.invalid", model="m", timeout=5,
                        transport=httpx.MockTransport(handler))  # fmt: skip


def _flooding() -> ChatAnswerer:
    """An endpoint whose answer is twice as large as any endpoint's answer may be."""

    def pieces() -> Iterator[bytes]:
        for _ in range(2 * MAX_ANSWER_BYTES >> 20):
            yield b" " * (1 << 20)

    return ChatAnswerer(base_url="http://llm.invalid", model="m", timeout=5,
                        transport=httpx.MockTransport(
                            lambda request: httpx.Response(200, content=pieces())))  # fmt: skip


def _compressing() -> ChatAnswerer:
    """An endpoint that compresses its answer though asked not to."""
    return ChatAnswerer(base_url="http://llm.invalid", model="m", timeout=5,
                        transport=httpx.MockTransport(
                            lambda request: httpx.Response(
                                200, headers={"Content-Encoding": "gzip"},
                                content=iter([b"\x1f\x8b"]))))  # fmt: skip


@pytest.mark.parametrize(
    ("answerer", "reason"),
    [
        (_failing(httpx.ReadTimeout("slow")), "llm:timeout"),
        (_flooding(), "llm:answer_too_large"),
        (_compressing(), "llm:compressed_answer"),
        (_failing(httpx.ConnectError("refused")), "llm:unreachable"),
        (_failing(None, 500, {"error": "boom"}), "llm:http_500"),
        (_failing(None, 200, {"choices": []}), "llm:malformed_answer"),
        (_failing(None, 200, {"choices": [{"message": {"content": "  "}}]}), "llm:empty_answer"),
    ],
)
def test_a_failing_llm_falls_back_to_the_template(
    lite: Memory, mini: dict[str, str], answerer: ChatAnswerer, reason: str
) -> None:
    body = why(lite, DIRECTOR, mode="query", answerer=answerer)
    meta = body["_meta"]
    assert (meta["runtime"]["fallback_used"], meta["runtime"]["fallback_reason"]) == (True, reason)
    assert meta["response"]["mode"] == "templater"
    assert body["answer"] == meta["response"]["short_answer"]
    assert meta_errors(meta) == []


# ---- replay and the cache ------------------------------------------------------------------


def fingerprints(body: dict[str, Any]) -> tuple[str, str]:
    found = body["_meta"]["fingerprints"]
    return found["prompt_fp"], found["bundle_fp"]


def test_a_replay_gives_the_same_fingerprints(
    lite: Memory, mini: dict[str, str], tmp_path: Path
) -> None:
    for principal in (STAFF, DIRECTOR):
        for mode in ("ask", "query"):
            first = why(lite, principal, mode=mode, answerer=echo_answerer(), question="why?")
            again = why(lite, principal, mode=mode, answerer=echo_answerer(), question="why?")
            assert again["trace_id"] != first["trace_id"]
            assert fingerprints(again) == fingerprints(first)
            assert again["_meta"]["runtime"]["candidate_cache"] == "hit"
            # a fresh process (no cache) over the same snapshot reproduces them too
            fresh = new_memory(SqliteStore(tmp_path / "cairn.db"), tmp_path)
            try:
                cold = why(fresh, principal, mode=mode, answerer=echo_answerer(), question="why?")
            finally:
                fresh.close()
            assert cold["_meta"]["runtime"]["candidate_cache"] == "miss"
            assert fingerprints(cold) == fingerprints(first)
    # another role sees another bundle
    assert fingerprints(why(lite, STAFF))[1] != fingerprints(why(lite, DIRECTOR))[1]


def cache(body: dict[str, Any]) -> str:
    state: str = body["_meta"]["runtime"]["candidate_cache"]
    return state


def test_the_cache_is_partitioned_by_policy_and_snapshot(
    lite: Memory, mini: dict[str, str]
) -> None:
    first = why(lite, STAFF)
    assert cache(first) == "miss"
    assert cache(why(lite, STAFF)) == "hit"
    # never shared across roles, nor across namespaces within a role
    assert cache(why(lite, MANAGER)) == "miss"
    assert cache(why(lite, asker("staff", labels=("internal",), principal_id="u-2"))) == "miss"
    # another staff profile is another policy key: a miss, then hits again
    graph = lite.policy_in_force.graph
    staff = graph.roles["staff"].model_copy(update={"description": "staff, reworded"})
    changed = graph.model_copy(update={"roles": {**graph.roles, "staff": staff}})
    lite.govern_by(lite.policy_in_force.model_copy(update={"graph": changed}))
    moved = why(lite, STAFF)
    assert moved["_meta"]["actor"]["policy_key"] != first["_meta"]["actor"]["policy_key"]
    assert moved["_meta"]["actor"]["policy_key"] == changed.policy_key("staff")
    assert cache(moved) == "miss"
    assert cache(why(lite, STAFF)) == "hit"
    # any write to the store is a new snapshot
    lite.remember(
        Content(kind="fact", scope="acme/app", title="Unrelated fact", body="Unrelated."),
        principal=CURATOR,
    )
    after = why(lite, STAFF)
    assert cache(after) == "miss"
    assert (
        after["_meta"]["fingerprints"]["snapshot_etag"]
        != (moved["_meta"]["fingerprints"]["snapshot_etag"])
    )
    assert cache(why(lite, STAFF)) == "hit"


# ---- traces and downloads ------------------------------------------------------------------


def test_each_answer_keeps_its_trace_files(lite: Memory, mini: dict[str, str]) -> None:
    asked = why(lite, STAFF)
    trace = lite.trace(asked["trace_id"], principal=STAFF)
    assert trace["view"] == "asker"
    # staff may not take bundle_full, so its copy holds only the view bundle's files
    assert set(trace["files"]) == ASKED_FILES & set(BUNDLE_FILES["bundle_view"])
    assert set(lite.trace(asked["trace_id"], principal=CURATOR)["files"]) == ASKED_FILES
    assert trace["files"]["_meta.json"] == asked["_meta"]
    assert trace["files"]["envelope.json"] == asked["envelope"]
    assert trace["files"]["evidence_canonical.json"]["items"] == asked["evidence"]
    queried = why(lite, DIRECTOR, mode="query", answerer=echo_answerer())
    files = lite.trace(queried["trace_id"], principal=DIRECTOR)["files"]
    assert set(files) == ASKED_FILES | {"prompt.json", "llm_raw.json"}
    assert files["llm_raw.json"]["model"] == "echo-1"
    assert lite.folder is not None
    (folder,) = (lite.folder / "traces").glob(f"*/*/{asked['trace_id']}")
    assert {p.name for p in folder.iterdir()} == ASKED_FILES | {"_meta.asker.json", "_owner.json"}
    assert all(p.stat().st_mode & 0o077 == 0 for p in folder.iterdir())  # owner only


def test_staff_may_take_the_view_bundle_but_not_the_full_one(
    lite: Memory, mini: dict[str, str]
) -> None:
    body = why(lite, STAFF)
    trace_id = body["trace_id"]
    assert body["_meta"]["downloads"]["artifacts"] == [
        {"name": "bundle_view", "allowed": True, "reason": None,
         "href": f"/v1/traces/{trace_id}/downloads/bundle_view"},
        {"name": "bundle_full", "allowed": False, "reason": "acl:role_missing", "href": None},
    ]  # fmt: skip
    with pytest.raises(PermissionDenied) as caught:
        lite.trace_download(trace_id, "bundle_full", principal=STAFF)
    assert "acl:role_missing" in str(caught.value)
    # nor does showing the trace hand out what only the full bundle holds
    shown = lite.trace(trace_id, principal=STAFF)["files"]
    assert not set(shown) - set(BUNDLE_FILES["bundle_view"])
    assert "evidence_pre.json" not in shown and "evidence_post.json" not in shown
    view = unzip(lite.trace_download(trace_id, "bundle_view", principal=STAFF))
    assert list(view) == [f for f in BUNDLE_FILES["bundle_view"]]
    assert view["_meta.json"] == body["_meta"]  # the asker's copy: handles, not ids
    assert view["_meta.json"]["policy_trace"]["withheld_ids"] == ["withheld-1"]
    with pytest.raises(InvalidInput):
        lite.trace_download(trace_id, "bundle_secret", principal=STAFF)


def test_directors_may_take_the_full_bundle(lite: Memory, mini: dict[str, str]) -> None:
    body = why(lite, DIRECTOR, mode="query", answerer=echo_answerer())
    assert [a["allowed"] for a in body["_meta"]["downloads"]["artifacts"]] == [True, True]
    full = unzip(lite.trace_download(body["trace_id"], "bundle_full", principal=DIRECTOR))
    assert list(full) == list(BUNDLE_FILES["bundle_full"])
    assert full["evidence_pre.json"]["role"] == "director"
    assert full["llm_raw.json"]["model"] == "echo-1"
    # the same answer's zip is the same bytes every time
    again = lite.trace_download(body["trace_id"], "bundle_full", principal=DIRECTOR)
    assert again == lite.trace_download(body["trace_id"], "bundle_full", principal=DIRECTOR)


def test_only_the_asker_and_curators_of_every_scope_read_a_trace(
    lite: Memory, mini: dict[str, str]
) -> None:
    body = why(lite, STAFF)
    trace_id = body["trace_id"]
    stranger = asker("staff", principal_id="u-stranger")
    elsewhere = Principal(
        id="cur-other", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("other/*",),
        labels=("*",), sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    # a curator of the anchor's scope but not of every scope: the audit copy holds evidence
    # and withheld ids from scopes it may not curate, so it is "not found" to it too
    of_acme = Principal(
        id="cur-acme", kind=PrincipalKind.HUMAN, roles=("curator",), scopes=("acme/*",),
        labels=("*",), sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    for who in (stranger, elsewhere, of_acme, DIRECTOR):
        with pytest.raises(NotFound):
            lite.trace(trace_id, principal=who)
        with pytest.raises(NotFound):
            lite.trace_download(trace_id, "bundle_view", principal=who)
    for missing in ("trc_01HZZZZZZZZZZZZZZZZZZZZZZZ", "../../etc/passwd", "trc_"):
        with pytest.raises(NotFound):
            lite.trace(missing, principal=STAFF)
    # a curator of every scope gets the audit copy, with the real ids
    audit = lite.trace(trace_id, principal=CURATOR)
    assert audit["view"] == "audit"
    policy_trace = audit["files"]["_meta.json"]["policy_trace"]
    incident_link = stored_edges(lite)["e-emea-incident~led_to~emea-sunset"].id
    assert policy_trace["withheld_ids"] == [incident_link]
    assert policy_trace["reasons_by_id"] == {incident_link: "acl:sensitivity_exceeded"}
    assert policy_trace["handles"] == {"withheld-1": incident_link}
    assert "_meta.asker.json" not in audit["files"]
    assert incident_link not in json.dumps(lite.trace(trace_id, principal=STAFF))


def test_old_traces_are_pruned(tmp_path: Path) -> None:
    now = datetime(2025, 6, 30, 12, tzinfo=UTC)
    old_id, new_id = "trc_01HAAAAAAAAAAAAAAAAAAAAAAA", "trc_01HBBBBBBBBBBBBBBBBBBBBBBB"
    files = {"envelope.json": {"text": "x"}}
    TraceFolder(tmp_path, keep_days=7, per_day=10).save(
        old_id, owner="u", scope="acme/x", files=files, now=now - timedelta(days=8)
    )
    assert TraceFolder(tmp_path, keep_days=7, per_day=10).load(old_id) is not None
    TraceFolder(tmp_path, keep_days=7, per_day=10).save(
        new_id, owner="u", scope="acme/x", files=files, now=now
    )
    folder = TraceFolder(tmp_path, keep_days=7, per_day=10)
    assert folder.load(old_id) is None
    loaded = folder.load(new_id)
    assert loaded is not None
    assert (loaded.owner, loaded.scope, loaded.files) == ("u", "acme/x", files)


def test_each_stage_logs_one_structured_line_without_a_withheld_id(
    lite: Memory, mini: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="cairn.graph")
    body = why(lite, STAFF)
    lines = {
        r.getMessage(): r.__dict__["fields"] for r in caplog.records if r.name == "cairn.graph"
    }
    assert set(lines) == {
        "graph preselector", "graph selector", "graph gate", "graph templater",
    }  # fmt: skip
    trace_id = body["trace_id"]
    assert all(fields["trace_id"] == trace_id for fields in lines.values())
    pre = lines["graph preselector"]
    assert pre["policy_key"] == body["_meta"]["actor"]["policy_key"]
    counts = body["_meta"]["policy_trace"]["counts"]
    assert (pre["hidden_vertices"], pre["hidden_edges"]) == (
        counts["hidden_vertices"], counts["hidden_edges"],
    )  # fmt: skip
    assert pre["hidden_vertices"] + pre["hidden_edges"] >= 1
    gate = lines["graph gate"]
    assert (
        gate["max_tokens"] == body["_meta"]["truncation_metrics"]["passes"][0]["max_prompt_tokens"]
    )
    assert lines["graph templater"]["cited_ids"] == body["_meta"]["response"]["cited_ids"]
    # what staff may not see is named nowhere in the log
    audit = lite.trace(trace_id, principal=CURATOR)["files"]["_meta.json"]["policy_trace"]
    logged = json.dumps(lines)
    for withheld in audit["withheld_ids"]:
        assert withheld not in logged


def test_an_agent_asking_in_a_loop_cannot_fill_the_disk_with_traces(
    tmp_path: Path,
) -> None:
    memory = new_memory(
        SqliteStore(tmp_path / "cairn.db"), tmp_path, graph=GraphSettings(traces_per_day=3)
    )
    try:
        ingest(memory, mini_graph(tmp_path / "mini"))
        flood = [why(memory, STAFF)["trace_id"] for _ in range(7)]
        kept = [t for t in flood if _readable(memory, t, STAFF)]
        assert kept == flood[-3:]  # the newest three, the rest removed from disk
        folders = [p for p in (tmp_path / ".cairn" / "traces").rglob("trc_*") if p.is_dir()]
        assert sorted(p.name for p in folders) == sorted(kept)
        # another asker's trace survives the flood that follows it
        theirs = why(memory, DIRECTOR)["trace_id"]
        for _ in range(5):
            why(memory, STAFF)
        assert _readable(memory, theirs, DIRECTOR)
    finally:
        memory.close()


def _readable(memory: Memory, trace_id: str, principal: Principal) -> bool:
    try:
        memory.trace(trace_id, principal=principal)
    except NotFound:
        return False
    return True
