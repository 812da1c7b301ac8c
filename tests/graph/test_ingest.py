"""Loading a graph, on each backend: idempotent, new versions for changed vertices, errors
that name the file, the field and the id, nothing half-written, only curators, and edge
ACLs from their ends unless they carry their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.governance.gate import GraphLink
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.graph.fixtures import GraphPlan, edge_acl, plan_graph
from cairn.graph.why import WhyRequest
from cairn.memory import Memory
from cairn.model import Acl, Principal, PrincipalKind, RecordQuery, Sensitivity
from cairn.store.base import Store
from tests.factories import CURATOR
from tests.graph.conftest import (
    MANAGER,
    STAFF,
    ingest,
    new_memory,
    record_ids,
    store_of,
    stored_edges,
)
from tests.graph.graphs import reasons_graph
from tests.graph.mini import ALL, SECRET_RATIONALE, mini_graph, vertex, write_graph


def state(memory: Memory) -> tuple[dict[str, int], int]:
    store = store_of(memory)
    return store.counts(), store.count_audit()


def edit(folder: Path, name: str, **changes: Any) -> None:
    path = folder / name
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_a_second_run_changes_nothing_and_says_so(gmemory: Memory, tmp_path: Path) -> None:
    plan = plan_graph(mini_graph(tmp_path / "mini"))
    first = gmemory.graph_ingest(plan, principal=CURATOR)
    assert (first.vertices_created, first.edges_created) == (8, 8)
    assert first.changed
    before = state(gmemory)
    again = gmemory.graph_ingest(plan, principal=CURATOR)
    assert not again.changed
    assert (again.vertices_unchanged, again.edges_unchanged) == (8, 8)
    assert (again.vertices_created, again.vertices_updated, again.edges_created) == (0, 0, 0)
    assert state(gmemory) == before


def test_fixture_fields_map_onto_the_record(gmemory: Memory, tmp_path: Path) -> None:
    ids = ingest(gmemory, mini_graph(tmp_path / "mini"))
    corp = store_of(gmemory).get_record(ids["corp-divest"])
    assert corp is not None
    content = corp.content
    assert (content.kind, content.scope, content.title) == (
        "decision", "acme/corporate", "Divest the appliance line",
    )  # fmt: skip
    assert content.body == SECRET_RATIONALE
    assert content.acl == Acl(
        roles=("director", "exec"), labels=("internal", "confidential"),
        sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    assert content.metadata["graph_id"] == "corp-divest"
    assert content.metadata["decision_maker"] == "CEO"
    assert content.metadata["timestamp"] == "2024-01-10T09:00:00Z"
    assert content.metadata["importance"] == 0.6
    assert content.metadata["x-extra"]["board_ref"] == "BRD-7781-secret"
    tickets = store_of(gmemory).get_record(ids["e-emea-tickets"])
    assert tickets is not None
    assert tickets.content.metadata["snippet"] == "Connector tickets doubled in EMEA"
    assert set(stored_edges(gmemory)) == {
        "t-sunset-training", "t-corp-prod", "alias-corp-prod", "alias-prod-emea",
        "prod-sunset~supported_by~e-corp-alias", "emea-sunset~supported_by~e-emea-tickets",
        "emea-sunset~supported_by~e-prod-alias", "e-emea-incident~led_to~emea-sunset",
    }  # fmt: skip


def test_a_changed_vertex_gets_a_new_version(gmemory: Memory, tmp_path: Path) -> None:
    folder = mini_graph(tmp_path / "mini")
    ids = ingest(gmemory, folder)
    edges = len(stored_edges(gmemory))
    edit(folder, "decisions/region2.json", rationale="Support now trains in two waves")
    report = gmemory.graph_ingest(plan_graph(folder), principal=CURATOR)
    assert (report.vertices_updated, report.vertices_unchanged) == (1, 7)
    assert (report.vertices_created, report.edges_created) == (0, 0)
    stored = store_of(gmemory).get_record(ids["emea-training"])
    assert stored is not None
    assert stored.current_version == 2
    assert stored.content.body == "Support now trains in two waves"
    assert record_ids(gmemory) == ids  # the same record, not a new one
    assert len(stored_edges(gmemory)) == edges
    # a new edge in a changed file is added; the rest stays
    edit(folder, "decisions/region2.json", based_on=["emea-sunset"])
    report = gmemory.graph_ingest(plan_graph(folder), principal=CURATOR)
    assert (report.edges_created, report.vertices_updated) == (1, 0)
    assert "emea-training~based_on~emea-sunset" in stored_edges(gmemory)


@pytest.mark.parametrize(
    ("name", "changes", "expected"),
    [
        ("decisions/region.json", {"supported_by": ["e-emea-tickets", "e-nowhere"]},
         ["decisions/region.json", "supported_by.1", "'e-nowhere'"]),
        ("events/secret-incident.json", {"led_to": ["no-such-decision"]},
         ["events/secret-incident.json", "led_to.0", "'no-such-decision'"]),
        ("transitions/t1.json", {"to": "emea-gone"},
         ["transitions/t1.json", "to", "'emea-gone'"]),
        ("edges/aliases/a2.json", {"decision_id": "prod-vanished"},
         ["edges/aliases/a2.json", "decision_id", "'prod-vanished'"]),
        ("events/prod-alias.json", {"x-extra": {"alias_of_decision": "e-emea-tickets"}},
         ["events/prod-alias.json", "x-extra.alias_of_decision", "'e-emea-tickets'",
          "not a decision"]),
        ("edges/aliases/a2.json", {"event_id": "e-corp-alias"},
         ["events/prod-alias.json", "x-extra.alias_of_decision", "no alias edge",
          "'prod-sunset'"]),
        ("decisions/region.json", {"sensitivity": "ultra"},
         ["decisions/region.json", "sensitivity", "'ultra'"]),
        ("decisions/region.json", {"rationale": None},
         ["decisions/region.json", "'rationale' is a required property"]),
        ("events/tickets.json", {"roles_allowed": ["staff", "intern"]},
         ["events/tickets.json", "roles_allowed.1", "'intern'"]),
        ("transitions/t2.json", {"colour": "red"},
         ["transitions/t2.json", "'colour'"]),
    ],
)  # fmt: skip
def test_an_error_names_the_file_the_field_and_the_id_and_writes_nothing(
    lite: Memory, tmp_path: Path, name: str, changes: dict[str, Any], expected: list[str]
) -> None:
    folder = mini_graph(tmp_path / "mini")
    edit(folder, name, **changes)
    before = state(lite)
    with pytest.raises(InvalidInput) as caught:
        lite.graph_ingest(plan_graph(folder), principal=CURATOR)
    message = str(caught.value)
    for part in expected:
        assert part in message, (part, message)
    assert "nothing was written" in message
    assert state(lite) == before


def test_a_policy_that_would_queue_an_edge_refuses_the_whole_graph(
    store: Store, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        DEFAULT_POLICY_YAML.replace(
            "\nrules:\n",
            "\nrules:\n  - name: links-wait\n    match: {op: link}\n    decision: queue\n"
            "    reason: every link is reviewed\n",
            1,
        )
    )
    memory = new_memory(store, tmp_path, parse_policy(policy_file.read_text()))
    before = state(memory)
    with pytest.raises(PermissionDenied) as caught:
        memory.graph_ingest(plan_graph(mini_graph(tmp_path / "mini")), principal=CURATOR)
    assert caught.value.field == "policy"
    assert "links-wait" in str(caught.value)
    assert "nothing was written" in str(caught.value)
    assert state(memory) == before
    assert record_ids(memory) == {}


def _bulk_load(memory: Memory, plan: GraphPlan, principal: Principal) -> int:
    """Load ``plan`` in one ``graph_load`` as a bulk loader would (ends by index, each edge
    under the ACL ingest gives it); how many proposals it made."""
    index = {v.key: n for n, v in enumerate(plan.vertices)}
    acls = {v.key: v.content.acl for v in plan.vertices}
    links = [
        GraphLink(
            draft=e.draft.model_copy(
                update={"acl": edge_acl(e, acls[e.draft.src], acls[e.draft.dst])}
            ),
            src=index[e.draft.src],
            dst=index[e.draft.dst],
        )
        for e in plan.edges
    ]
    contents = [v.content for v in plan.vertices]
    return len(memory.graph_load(contents, links, principal=principal))


def test_a_bulk_load_writes_what_an_ingest_does(gmemory: Memory, tmp_path: Path) -> None:
    plan = plan_graph(mini_graph(tmp_path / "mini"))
    assert _bulk_load(gmemory, plan, CURATOR) == len(plan.vertices) + len(plan.edges)
    assert set(record_ids(gmemory)) == {v.key for v in plan.vertices}
    loaded = stored_edges(gmemory)
    # an ingest of the same graph afterwards finds every vertex and edge already there
    report = gmemory.graph_ingest(plan, principal=CURATOR)
    assert not report.changed, report
    assert stored_edges(gmemory) == loaded


def test_only_a_curator_may_bulk_load_a_graph(gmemory: Memory, tmp_path: Path) -> None:
    plan = plan_graph(mini_graph(tmp_path / "mini"))
    before = state(gmemory)
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))
    with pytest.raises(PermissionDenied):
        _bulk_load(gmemory, plan, agent)
    assert state(gmemory) == before


def test_only_a_curator_may_load_a_graph(gmemory: Memory, tmp_path: Path) -> None:
    plan = plan_graph(mini_graph(tmp_path / "mini"))
    before = state(gmemory)
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("*",))
    director = Principal(
        id="dee", kind=PrincipalKind.HUMAN, roles=("director",), scopes=("*",),
        labels=("*",), sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    for who in (agent, director):
        with pytest.raises(PermissionDenied):
            gmemory.graph_ingest(plan, principal=who)
    assert state(gmemory) == before


def test_an_edge_takes_the_stricter_acl_of_its_ends_unless_it_has_its_own(
    gmemory: Memory, tmp_path: Path
) -> None:
    ingest(gmemory, mini_graph(tmp_path / "mini"))
    edges = stored_edges(gmemory)
    low = Acl(roles=tuple(ALL), labels=("internal",), sensitivity=Sensitivity.LOW)
    assert edges["emea-sunset~supported_by~e-emea-tickets"].acl == low
    # one end high: the edge is high
    assert edges["e-emea-incident~led_to~emea-sunset"].acl == low.model_copy(
        update={"sensitivity": Sensitivity.HIGH}
    )
    # the roles both ends admit, every label either needs, the higher sensitivity
    assert edges["t-corp-prod"].acl == Acl(
        roles=("director", "exec"), labels=("internal", "confidential"),
        sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    # an alias edge with some ACL fields of its own: those win, the rest come from the ends
    assert edges["alias-corp-prod"].acl == Acl(
        roles=("director", "exec"), labels=("internal", "confidential"),
        sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    assert edges["alias-prod-emea"].acl == Acl(
        roles=("manager", "director", "exec"), labels=("internal",),
        sensitivity=Sensitivity.MEDIUM,
    )  # fmt: skip


def test_own_acl_fields_and_ends_with_no_common_role(gmemory: Memory, tmp_path: Path) -> None:
    folder = reasons_graph(tmp_path / "g")
    write_graph(folder, {
        "decisions/lone.json": vertex(
            "decision", "r-lone", "acme/region_emea", roles=["staff"], option="Staff only",
            rationale="Nobody above staff reads this",
        ),
        "decisions/top.json": vertex(
            "decision", "r-top", "acme/region_emea", roles=["exec"], option="Execs only",
            rationale="Only execs read this", based_on=["r-lone"],
        ),
    })  # fmt: skip
    ingest(gmemory, folder)
    edges = stored_edges(gmemory)
    # its own ACL, though one end is high
    assert edges["t-high"].acl == Acl(
        roles=tuple(ALL), labels=("internal",), sensitivity=Sensitivity.LOW
    )
    # only a sensitivity of its own: the ends give the roles and labels
    assert edges["t-secret"].acl == Acl(
        roles=tuple(ALL), labels=("internal",), sensitivity=Sensitivity.HIGH
    )
    # no role in common: only curators read the edge (an empty list would mean anyone)
    assert edges["r-top~based_on~r-lone"].acl.roles == ("curator",)


def test_a_changed_edge_is_replaced_and_its_new_acl_applies(
    gmemory: Memory, tmp_path: Path
) -> None:
    folder = mini_graph(tmp_path / "mini")
    ingest(gmemory, folder)
    old = stored_edges(gmemory)["alias-prod-emea"]
    walked = gmemory.why(WhyRequest(anchor="prod-sunset"), principal=MANAGER)
    assert "e-prod-alias" in [i["key"] for i in walked["evidence"]]
    # the curator hides the way down from managers, and a transition gets a new reason
    edit(folder, "edges/aliases/a2.json", sensitivity="high", roles_allowed=["director", "exec"])
    edit(folder, "transitions/t1.json", reason="Support staff must be trained first")
    report = gmemory.graph_ingest(plan_graph(folder), principal=CURATOR)
    assert report.changed
    assert (report.edges_updated, report.edges_created, report.edges_unchanged) == (2, 0, 6)
    edges = stored_edges(gmemory)
    assert edges["alias-prod-emea"].acl == Acl(
        roles=("director", "exec"), labels=("internal",), sensitivity=Sensitivity.HIGH
    )
    assert edges["t-sunset-training"].metadata["reason"] == "Support staff must be trained first"
    assert set(stored_edges(gmemory, removed=True)) == {"alias-prod-emea", "t-sunset-training"}
    assert stored_edges(gmemory, removed=True)["alias-prod-emea"].id == old.id
    after = gmemory.why(WhyRequest(anchor="prod-sunset"), principal=MANAGER)
    assert "e-prod-alias" not in [i["key"] for i in after["evidence"]]
    assert "acl:role_missing" in after["_meta"]["policy_trace"]["reasons_by_id"].values()
    # and then there is nothing left to do
    assert not gmemory.graph_ingest(plan_graph(folder), principal=CURATOR).changed


def test_a_vertex_acl_change_carries_to_the_edges_that_take_it(
    gmemory: Memory, tmp_path: Path
) -> None:
    folder = mini_graph(tmp_path / "mini")
    ingest(gmemory, folder)
    edit(folder, "events/tickets.json", sensitivity="medium")
    report = gmemory.graph_ingest(plan_graph(folder), principal=CURATOR)
    assert (report.vertices_updated, report.edges_updated) == (1, 1)
    link = stored_edges(gmemory)["emea-sunset~supported_by~e-emea-tickets"]
    assert link.acl.sensitivity is Sensitivity.MEDIUM


def test_a_vertex_keeps_its_kind_and_domain(gmemory: Memory, tmp_path: Path) -> None:
    folder = mini_graph(tmp_path / "mini")
    ingest(gmemory, folder)
    before = store_of(gmemory).counts()
    moved = json.loads((folder / "decisions/region2.json").read_text())
    moved["domain"] = "acme/region_apac"
    (folder / "decisions/region2.json").write_text(json.dumps(moved))
    with pytest.raises(InvalidInput, match="emea-training is stored as a decision in"):
        gmemory.graph_ingest(plan_graph(folder), principal=CURATOR)
    assert store_of(gmemory).counts() == before


def test_a_curator_of_other_scopes_never_meets_a_key_it_cannot_see(
    gmemory: Memory, tmp_path: Path
) -> None:
    """The same key in a scope the curator does not hold is neither updated nor named: the
    curator's graph is its own."""
    ingest(gmemory, mini_graph(tmp_path / "mini"))
    emea_curator = Principal(
        id="emea-curator", kind=PrincipalKind.HUMAN, roles=("curator",),
        scopes=("acme/region_apac",), labels=("*",), sensitivity=Sensitivity.HIGH,
    )  # fmt: skip
    folder = write_graph(tmp_path / "apac", {
        "decisions/d.json": vertex(
            "decision", "emea-training", "acme/region_apac", roles=ALL,
            option="APAC's own training plan", rationale="Unrelated to EMEA's",
        ),
    })  # fmt: skip
    report = gmemory.graph_ingest(plan_graph(folder), principal=emea_curator)
    assert report.vertices_created == 1 and report.vertices_updated == 0


def test_a_readable_alias_event_never_names_a_decision_its_reader_cannot_read(
    lite: Memory, mini: dict[str, str]
) -> None:
    """An alias event's link to its decision is kept as the alias edge (read under its own
    ACL), not in the event's metadata, which every reader of the event sees."""
    alias_id, decision_id = mini["e-prod-alias"], mini["prod-sunset"]
    with pytest.raises(NotFound):
        lite.get(decision_id, principal=STAFF)
    shown = lite.get(alias_id, principal=STAFF)
    assert shown.version.content.metadata["x-extra"] == {
        "visibility_note": "Projection of a product decision"
    }
    listed = lite.list_records(RecordQuery(kinds=("event",)), principal=STAFF)
    assert alias_id in {r.id for r in listed}
    found = lite.retrieve("appliance connectors end", principal=STAFF, mode="keyword")
    assert alias_id in {item.record_id for item in found.items}
    history = lite.history(alias_id, principal=STAFF)
    for answer in (shown, *listed, found, *history):
        assert "prod-sunset" not in answer.model_dump_json()
    # the link is the alias edge, which a graph answer walks under the edge's own ACL
    link = stored_edges(lite)["alias-prod-emea"]
    assert (link.type, link.src, link.dst) == ("ALIAS_OF", decision_id, alias_id)
