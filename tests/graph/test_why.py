"""The whole answer for each role on the mini graph and a few graphs of their own: what is
used, what is withheld and why, field masking per role, the permission note, and policy
withholding told apart from budget clipping in one answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import PermissionDenied
from cairn.graph.passport import parse_passport
from cairn.graph.template import PERMISSION_NOTE
from cairn.graph.why import WhyBudgets, WhyRequest
from cairn.memory import Memory
from cairn.model import Principal
from cairn.retrieval.budget import estimate_item_tokens
from tests.factories import CURATOR
from tests.graph.conftest import DIRECTOR, EXEC, MANAGER, STAFF, Asked, echo_answerer, ingest
from tests.graph.graphs import CORP_SECRETS, OPEN_ACL, headers_graph, hop_graph
from tests.graph.mini import ALL, SECRET_RATIONALE, vertex, write_graph

INCIDENT = "Confidential outage at Zephyr Bank caused by the appliance connector"
# what an evidence item carries besides the fields its role may see
ITEM_KEYS = {"id", "version_id", "cite", "key", "kind", "scope", "shown", "hops", "via"}


def ask(memory: Memory, principal: Principal, anchor: str, **request: Any) -> Asked:
    body = memory.why(WhyRequest(anchor=anchor, **request), principal=principal)
    trace = memory.trace(body["trace_id"], principal=principal)["files"]
    return Asked(body, trace)


def item(asked: Asked, key: str) -> dict[str, Any]:
    (found,) = [i for i in asked.body["evidence"] if i["key"] == key]
    return found


def everything(asked: Asked) -> str:
    return json.dumps(asked.body, ensure_ascii=False) + json.dumps(asked.trace, ensure_ascii=False)


def test_staff_get_the_regional_story_and_a_note(lite: Memory, mini: dict[str, str]) -> None:
    got = ask(lite, STAFF, "emea-sunset")
    assert got.keys[0] == "emea-sunset"
    assert set(got.keys) == {"emea-sunset", "e-emea-tickets", "e-prod-alias", "emea-training"}
    assert got.reasons == ["acl:sensitivity_exceeded"]  # the incident's link is high
    assert got.meta["policy_trace"]["withheld_ids"] == ["withheld-1"]
    assert got.body["answer"].endswith(PERMISSION_NOTE)
    assert got.body["envelope"]["note"] == PERMISSION_NOTE
    assert got.body["answer"].startswith(
        "VP Engineering on 2024-03-01: Migrate EMEA appliance customers to cloud connectors."
    )
    assert "Zephyr" not in everything(got)
    assert got.meta["response"]["mode"] == "templater"
    assert got.meta["actor"]["role"] == "staff"


def test_directors_get_everything_and_no_note(lite: Memory, mini: dict[str, str]) -> None:
    got = ask(lite, DIRECTOR, "emea-sunset")
    assert "e-emea-incident" in got.keys
    assert got.meta["policy_trace"]["withheld_ids"] == []
    assert got.meta["evidence_sets"]["payload_excluded_ids"] == []
    assert got.body["envelope"]["note"] is None
    assert PERMISSION_NOTE not in got.body["answer"]
    assert "Zephyr Bank" in got.body["answer"]


def test_directors_see_the_whitelisted_kpis_only(lite: Memory, mini: dict[str, str]) -> None:
    got = ask(lite, DIRECTOR, "corp-divest")
    corp = item(got, "corp-divest")
    assert corp["shown"] == "full"
    assert corp["text"] == SECRET_RATIONALE
    assert corp["decision_maker"] == "CEO"
    assert corp["x-extra"] == {
        "kpis": [{"name": "Margin uplift", "unit": "%", "baseline": 3, "target": 9}]
    }
    assert "BRD-7781-secret" not in everything(got)  # board_ref is not whitelisted
    assert got.meta["policy_trace"]["masked_fields"][mini["corp-divest"]] == ["x-extra.board_ref"]
    assert got.body["answer"].startswith("CEO on 2024-01-10: Divest the appliance line.")


def test_managers_cannot_read_a_decision_for_directors(lite: Memory, mini: dict[str, str]) -> None:
    got = ask(lite, MANAGER, "prod-sunset")
    assert "corp-divest" not in got.keys
    assert SECRET_RATIONALE not in everything(got)
    assert got.body["envelope"]["note"] == PERMISSION_NOTE


def test_staff_at_the_alias_event_cannot_walk_up_to_the_product_decision(
    lite: Memory, mini: dict[str, str]
) -> None:
    got = ask(lite, STAFF, "e-prod-alias")
    assert set(got.keys) == {"e-prod-alias", "emea-sunset"}
    assert got.reasons == ["edge:not_allowed"]
    assert mini["prod-sunset"] not in got.meta["evidence_sets"]["pool_ids"]
    text = everything(got)
    # neither the decision's text nor its key (the alias event names it in x-extra)
    assert "Connector upkeep outweighs" not in text
    assert "prod-sunset" not in text
    assert item(got, "e-prod-alias")["x-extra"] == {
        "visibility_note": "Projection of a product decision"
    }
    # a director walks the same edge up, and reads which decision the event stands for
    up = ask(lite, DIRECTOR, "e-prod-alias")
    assert "prod-sunset" in up.keys
    assert item(up, "e-prod-alias")["x-extra"]["alias_of_decision"] == "prod-sunset"


def test_managers_see_a_corporate_decision_as_headers_only(lite: Memory, tmp_path: Path) -> None:
    ingest(lite, headers_graph(tmp_path / "g"))
    got = ask(lite, MANAGER, "prod-y")
    corp = item(got, "corp-open")
    assert corp["shown"] == "headers"
    assert set(corp) == ITEM_KEYS | {"title", "date"}
    assert (corp["title"], corp["date"]) == ("Open a cloud-only pricing tier", "2024-01-15")
    text = everything(got)
    for secret in CORP_SECRETS:
        assert secret not in text, secret
    masked = got.meta["policy_trace"]["masked_fields"][corp["id"]]
    assert masked == ["text", "decision_maker", "tags", "x-extra"]
    # masking is not withholding: nothing was withheld, so no note
    assert got.body["envelope"]["note"] is None
    # asking about the corporate decision itself: its header, no maker
    own = ask(lite, MANAGER, "corp-open")
    assert own.body["answer"].startswith("On 2024-01-15: Open a cloud-only pricing tier.")
    assert not any(secret in everything(own) for secret in CORP_SECRETS)

    full = item(ask(lite, DIRECTOR, "prod-y"), "corp-open")
    assert full["shown"] == "full"
    assert "Operation Kestrel" in full["text"]
    assert full["decision_maker"] == "Chief Strategy Officer Imani"
    assert full["x-extra"]["kpis"][0]["name"] == "Recurring revenue share"
    assert full["x-extra"]["visibility_note"] == "Corporate note Pemberton"


def test_a_hidden_vertex_is_never_passed_through_at_two_hops(lite: Memory, tmp_path: Path) -> None:
    ingest(lite, hop_graph(tmp_path / "g"))
    got = ask(lite, DIRECTOR, "h-a", hops=2)
    assert got.keys == ["h-a"]
    assert got.reasons == ["acl:role_missing"]
    text = everything(got)
    for hidden in ("Bexhill", "Cromarty", "h-b", "h-c"):
        assert hidden not in text, hidden
    assert got.meta["policy"]["max_hops"] == 2
    execs = ask(lite, EXEC, "h-a", hops=2)
    assert execs.keys[0] == "h-a" and set(execs.keys) == {"h-a", "h-b", "h-c"}


def test_more_hops_than_the_role_walks_are_refused(lite: Memory, mini: dict[str, str]) -> None:
    with pytest.raises(PermissionDenied) as caught:
        lite.why(WhyRequest(anchor="emea-sunset", hops=2), principal=STAFF)
    assert caught.value.field == "hops"


def test_a_lower_ceiling_in_the_passport_withholds_more(lite: Memory, mini: dict[str, str]) -> None:
    graph = lite.policy_in_force.graph
    passport = parse_passport({
        "X-User-Id": DIRECTOR.id, "X-User-Roles": "director",
        "X-User-Namespaces": "public,internal,confidential", "X-Policy-Version": graph.version,
        "X-Policy-Key": graph.policy_key("director"), "X-Request-Id": "req-9",
        "X-Trace-Id": "trace-9", "X-Sensitivity-Ceiling": "low",
    })  # fmt: skip
    body = lite.why(WhyRequest(anchor="emea-sunset"), principal=DIRECTOR, passport=passport)
    assert body["_meta"]["policy"]["sensitivity_ceiling"] == "low"
    assert "Zephyr" not in json.dumps(body)
    assert list(body["_meta"]["policy_trace"]["reasons_by_id"].values()) == [
        "acl:sensitivity_exceeded"
    ]
    assert body["answer"].endswith(PERMISSION_NOTE)
    assert (body["_meta"]["request"]["request_id"], body["_meta"]["request"]["trace_id"]) == (
        "req-9", "trace-9",
    )  # fmt: skip


def _cost(evidence_item: dict[str, Any]) -> int:
    """What the budget gate charges for an item: its visible fields, as JSON."""
    fields = {k: v for k, v in evidence_item.items() if k not in ITEM_KEYS}
    return estimate_item_tokens(json.dumps(fields, sort_keys=True, ensure_ascii=False))


def _budget(tokens: int) -> WhyBudgets:
    # the smallest window is 64 tokens: the rest is given to the completion
    return WhyBudgets(
        context_window=max(64, tokens), desired_completion_tokens=max(0, 64 - tokens),
        guard_tokens=0, overhead_tokens=0,
    )  # fmt: skip


def test_budget_clipping_and_policy_withholding_are_told_apart(
    lite: Memory, mini: dict[str, str]
) -> None:
    whole = ask(lite, STAFF, "emea-sunset")
    ordered = whole.body["evidence"]  # the anchor, then the selector's order
    assert len(ordered) == 4
    fits = _cost(ordered[0]) + _cost(ordered[1])
    got = ask(lite, STAFF, "emea-sunset", budgets=_budget(fits))
    sets = got.meta["evidence_sets"]
    assert sets["prompt_included_ids"] == [i["id"] for i in ordered[:2]]
    assert sets["prompt_excluded_ids"] == [
        {"id": i["id"], "reason": "token_budget"} for i in ordered[2:]
    ]
    assert sets["payload_excluded_ids"] == [
        {"id": "withheld-1", "reason": "acl:sensitivity_exceeded"}
    ]
    assert sets["pool_ids"] == whole.meta["evidence_sets"]["pool_ids"]
    assert [i["id"] for i in got.body["evidence"]] == sets["payload_included_ids"]
    assert got.meta["truncation_metrics"]["prompt_selector_truncation"] is True
    assert got.meta["truncation_metrics"]["passes"][0]["max_prompt_tokens"] == fits
    assert got.meta["evidence_counts"]["prompt_included"]["total"] == 2
    clipped = ordered[2]["title"]
    assert clipped not in got.body["answer"]
    assert got.body["answer"].endswith(PERMISSION_NOTE)
    # the budget alone withholds nothing: a director's clipped answer has no note
    director = ask(lite, DIRECTOR, "emea-sunset", budgets=_budget(fits))
    assert director.meta["evidence_sets"]["prompt_excluded_ids"]
    assert director.meta["evidence_sets"]["payload_excluded_ids"] == []
    assert director.body["envelope"]["note"] is None


def test_a_budget_too_small_for_the_anchor_says_so(lite: Memory, mini: dict[str, str]) -> None:
    got = ask(lite, STAFF, "emea-sunset", budgets=_budget(1))
    assert got.body["evidence"] == []
    assert got.body["answer"].startswith("The token budget is too small for any evidence.")
    assert got.body["answer"].endswith(PERMISSION_NOTE)  # the policy still withheld
    assert len(got.meta["evidence_sets"]["prompt_excluded_ids"]) == 4
    query = lite.why(
        WhyRequest(anchor="emea-sunset", budgets=_budget(1)), principal=STAFF, mode="query"
    )
    assert query["_meta"]["runtime"]["fallback_reason"] == "llm:not_configured"


def test_a_query_prompt_holds_only_what_the_budget_let_in(
    lite: Memory, mini: dict[str, str]
) -> None:
    whole = ask(lite, STAFF, "emea-sunset").body["evidence"]
    fits = _cost(whole[0]) + _cost(whole[1])
    lite._answerer = echo_answerer()
    try:
        body = lite.why(
            WhyRequest(anchor="emea-sunset", budgets=_budget(fits)), principal=STAFF, mode="query"
        )
    finally:
        lite._answerer = None
    assert body["_meta"]["response"]["mode"] == "llm"
    # the prompt is a bundle_full file, which staff may not take: read the audit copy
    prompt = json.dumps(lite.trace(body["trace_id"], principal=CURATOR)["files"]["prompt.json"])
    for kept in whole[:2]:
        assert kept["title"] in body["answer"] and kept["title"] in prompt
    for clipped in whole[2:]:
        assert clipped["title"] not in body["answer"] and clipped["title"] not in prompt
    # no id reaches the model, and the note follows the model's answer
    assert "rec_" not in prompt and "emea-sunset" not in prompt
    assert body["answer"].endswith(PERMISSION_NOTE)


def test_the_prose_is_clamped_and_scrubbed_of_ids(lite: Memory, tmp_path: Path) -> None:
    raw_id = "rec_01HZZZZZZZZZZZZZZZZZZZZZZZ"
    write_graph(tmp_path / "g", {
        "decisions/s.json": vertex(
            "decision", "s-anchor", "acme/region_emea", roles=ALL,
            option="Adopt queues " + "with care " * 40, rationale="Queues decouple work",
            supported_by=["s-event"],
        ),
        "events/e.json": vertex(
            "event", "s-event", "acme/region_emea", roles=ALL,
            summary=f"Backlog grew, see s-anchor and {raw_id}",
        ),
    })  # fmt: skip
    ingest(lite, tmp_path / "g")
    got = ask(lite, STAFF, "s-anchor")
    head, facts = got.body["answer"].split("\n")[:2]
    assert head.endswith("….") and len(head) < 220
    assert facts.startswith("Supporting Facts: Backlog grew, see […] and […]")
    assert raw_id not in got.body["answer"]
    # the evidence keeps the text as it is: ids are scrubbed from prose only
    assert item(got, "s-event")["title"] == f"Backlog grew, see s-anchor and {raw_id}"


def test_a_withheld_vertex_key_named_in_visible_text_stays_out_of_the_answer(
    lite: Memory, tmp_path: Path
) -> None:
    """A visible event's snippet names the key of a decision staff may not read: the
    answer's prose drops the key (the event's own text is the staff's to read anyway)."""
    write_graph(tmp_path / "g", {
        "decisions/open.json": vertex(
            "decision", "emea-open", "acme/region_emea", roles=ALL, option="Open decision",
            rationale="Visible to everyone in the region",
            supported_by=["e-names-secret"],
        ),
        "decisions/secret.json": vertex(
            "decision", "emea-secret-plan-2024", "acme/region_emea", roles=ALL,
            sensitivity="high", option="Hidden decision", rationale="Only for directors",
        ),
        "events/names.json": vertex(
            "event", "e-names-secret", "acme/region_emea", roles=ALL,
            summary="Follow-up on emea-secret-plan-2024 scheduled",
            snippet="Follow-up on emea-secret-plan-2024 scheduled",
        ),
        "transitions/t.json": {
            "id": "t-secret-open", "from": "emea-secret-plan-2024", "to": "emea-open",
            "relation": "causal", "timestamp": "2024-03-01T09:00:00Z",
            "domain": "acme/region_emea", **OPEN_ACL,
        },
    })  # fmt: skip
    ingest(lite, tmp_path / "g")
    body = lite.why(WhyRequest(anchor="emea-open"), principal=STAFF)
    assert body["_meta"]["policy_trace"]["counts"]["hidden_vertices"] == 1
    assert "Follow-up on" in body["answer"]  # the event made it into the answer
    assert "emea-secret-plan-2024" not in body["answer"]
