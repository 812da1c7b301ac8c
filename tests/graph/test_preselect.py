"""The pre-selector on each backend: what each role walks, reads and is withheld, with the
reason the trace gives, permission decided on every hop, and fields masked by whitelist."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cairn.errors import NotFound
from cairn.graph.passport import parse_passport, view_for
from cairn.graph.preselect import CandidateSet, PolicyTrace, preselect
from cairn.graph.roles import GraphPolicy
from cairn.graph.why import WhyRequest
from cairn.memory import Memory
from cairn.model import Principal
from tests.graph.conftest import (
    DIRECTOR,
    EXEC,
    MANAGER,
    STAFF,
    asker,
    ingest,
    store_of,
    stored_edges,
)
from tests.graph.graphs import hop_graph, reasons_graph
from tests.graph.mini import SECRET_RATIONALE, mini_graph, vertex, write_graph

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def walk(
    memory: Memory, ids: dict[str, str], anchor: str, principal: Principal, *,
    hops: int = 1, policy: GraphPolicy | None = None, **headers: str,
) -> tuple[CandidateSet, PolicyTrace]:  # fmt: skip
    graph = policy or memory.policy_in_force.graph
    passport = None
    if headers:
        role = principal.roles[0]
        passport = parse_passport({
            "X-User-Id": principal.id, "X-User-Roles": role,
            "X-User-Namespaces": ",".join(principal.labels),
            "X-Policy-Version": graph.version, "X-Policy-Key": graph.policy_key(role),
            "X-Request-Id": "r", "X-Trace-Id": "t",
            **{name.replace("_", "-"): value for name, value in headers.items()},
        })  # fmt: skip
    view = view_for(graph, principal, passport=passport)
    view = replace(view, max_hops=min(view.max_hops, hops))  # as a request's hops do
    return preselect(store_of(memory), ids[anchor], view, now=NOW, asked=anchor)


def keys_of(candidates: CandidateSet) -> set[str | None]:
    return {c.key for c in candidates.neighbours}


def reasons(trace: PolicyTrace, ids: dict[str, str], memory: Memory) -> dict[str, str]:
    """The trace's reasons by graph key (vertices and edges)."""
    by_id = {v: k for k, v in ids.items()}
    by_id |= {edge.id: key for key, edge in stored_edges(memory).items()}
    return {by_id[i]: reason for i, reason in trace.reasons.items()}


def test_each_reason_is_given_for_what_it_withholds(gmemory: Memory, tmp_path: Path) -> None:
    ids = ingest(gmemory, reasons_graph(tmp_path / "g"))
    found, trace = walk(gmemory, ids, "r-anchor", STAFF)
    assert keys_of(found) == {"r-ok", "r-apac"}
    assert reasons(trace, ids, gmemory) == {
        "r-high": "acl:sensitivity_exceeded",
        "r-conf": "acl:namespace_mismatch",
        "r-mgr": "acl:role_missing",
        "r-prod": "scope:out_of_domain",
        "alias-prod-anchor": "edge:not_allowed",
        "t-secret": "acl:sensitivity_exceeded",
    }
    assert trace.hidden_vertices == {ids[k] for k in ("r-high", "r-conf", "r-mgr", "r-prod")}
    assert len(trace.hidden_edges) == 2
    assert trace.edge_types_used == {"CAUSAL_PRECEDES"}
    # behind a withheld edge, nothing is even looked at
    assert ids["r-behind"] not in trace.reasons
    assert {s.dst for s in found.steps} == {ids["r-ok"], ids["r-apac"]}

    found, trace = walk(gmemory, ids, "r-anchor", MANAGER)
    assert keys_of(found) == {"r-ok", "r-apac", "r-mgr", "r-prod"}
    assert reasons(trace, ids, gmemory) == {
        "r-high": "acl:sensitivity_exceeded",
        "r-conf": "acl:namespace_mismatch",
        "alias-prod-anchor": "edge:not_allowed",
        "t-secret": "acl:sensitivity_exceeded",
    }

    found, trace = walk(gmemory, ids, "r-anchor", DIRECTOR)
    assert keys_of(found) == {"r-ok", "r-apac", "r-mgr", "r-prod", "r-high", "r-conf", "r-behind"}
    assert trace.reasons == {}
    assert trace.edge_types_used == {"CAUSAL_PRECEDES", "SUPPORTED_BY", "ALIAS_OF"}


def test_a_narrower_domain_or_key_scope_withholds_as_out_of_domain(
    gmemory: Memory, tmp_path: Path
) -> None:
    ids = ingest(gmemory, reasons_graph(tmp_path / "g"))
    found, trace = walk(gmemory, ids, "r-anchor", STAFF, X_Domain_Scopes="acme/region_emea")
    assert "r-apac" not in keys_of(found)
    assert reasons(trace, ids, gmemory)["r-apac"] == "scope:out_of_domain"
    # a key whose scopes stop at one region: what lies in scopes the key may not read at
    # all is neither walked nor counted (a count would tell it that something is there)
    regional = asker("director", scopes=("acme/region_emea",))
    found, trace = walk(gmemory, ids, "r-anchor", regional)
    assert keys_of(found) == {"r-ok", "r-high", "r-conf", "r-mgr", "r-behind"}
    got = reasons(trace, ids, gmemory)
    # an edge lives in its source's scope: the product decision's edges are out of it
    for hidden in ("r-prod", "r-prod~supported_by~r-anchor", "alias-prod-anchor"):
        assert hidden not in got
    # the far end of an edge the key does read is withheld, and said so: the edge names it
    assert got["r-apac"] == "scope:out_of_domain"
    # a lower ceiling in the header withholds what the role could read
    found, trace = walk(gmemory, ids, "r-anchor", DIRECTOR, X_Sensitivity_Ceiling="low")
    assert "r-high" not in keys_of(found)
    assert reasons(trace, ids, gmemory)["r-high"] == "acl:sensitivity_exceeded"


def test_a_hidden_vertex_is_never_walked_through(gmemory: Memory, tmp_path: Path) -> None:
    ids = ingest(gmemory, hop_graph(tmp_path / "g"))
    found, trace = walk(gmemory, ids, "h-a", DIRECTOR, hops=2)
    assert keys_of(found) == set()
    assert trace.reasons == {ids["h-b"]: "acl:role_missing"}
    assert ids["h-c"] not in trace.reasons  # never reached, so never even judged
    # the same walk for a role that reads the middle reaches the far end at two hops
    found, trace = walk(gmemory, ids, "h-a", EXEC, hops=2)
    assert {(c.key, c.hops) for c in found.neighbours} == {("h-b", 1), ("h-c", 2)}
    # and with one hop, not even an exec gets past the middle
    found, _ = walk(gmemory, ids, "h-a", EXEC, hops=1)
    assert keys_of(found) == {"h-b"}


def test_staff_see_the_alias_event_but_never_walk_up_its_alias_edge(
    gmemory: Memory, tmp_path: Path
) -> None:
    ids = ingest(gmemory, mini_graph(tmp_path / "mini"))
    found, trace = walk(gmemory, ids, "e-prod-alias", STAFF)
    assert found.anchor.key == "e-prod-alias"
    assert keys_of(found) == {"emea-sunset"}
    alias = stored_edges(gmemory)["alias-prod-emea"]
    assert trace.reasons[alias.id] == "edge:not_allowed"
    assert ids["prod-sunset"] not in trace.reasons  # never reached: the edge stopped it
    # the alias event's x-extra is whitelisted: the note, not the decision it stands for
    assert found.anchor.fields["x-extra"] == {"visibility_note": "Projection of a product decision"}
    assert trace.masked[ids["e-prod-alias"]] == ["x-extra.alias_of_decision"]
    # managers walk it downward from the product decision, and directors either way
    found, _ = walk(gmemory, ids, "prod-sunset", MANAGER)
    assert "e-prod-alias" in keys_of(found)
    found, _ = walk(gmemory, ids, "e-prod-alias", DIRECTOR)
    assert keys_of(found) == {"emea-sunset", "prod-sunset"}


def test_an_anchor_the_role_cannot_read_is_not_found_by_its_given_name(
    gmemory: Memory, tmp_path: Path
) -> None:
    ids = ingest(gmemory, mini_graph(tmp_path / "mini"))
    for anchor, principal in (("corp-divest", MANAGER), ("prod-sunset", STAFF)):
        with pytest.raises(NotFound) as caught:
            walk(gmemory, ids, anchor, principal)
        assert repr(anchor) in str(caught.value)
        assert ids[anchor] not in str(caught.value)


def test_a_per_type_cap_keeps_the_same_edges_every_time(gmemory: Memory, tmp_path: Path) -> None:
    ids = ingest(gmemory, reasons_graph(tmp_path / "g"))
    base = gmemory.policy_in_force.graph
    capped = base.model_copy(
        update={"roles": {**base.roles, "director": base.roles["director"].model_copy(
            update={"per_type_cap": 2})}}
    )  # fmt: skip
    first, trace = walk(gmemory, ids, "r-anchor", DIRECTOR, policy=capped)
    causal = [c for c in first.neighbours if c.via == "CAUSAL_PRECEDES"]
    assert len(causal) == 2
    assert len(trace.capped) == 4  # six causal neighbours, two taken
    again, _ = walk(gmemory, ids, "r-anchor", DIRECTOR, policy=capped)
    assert [c.id for c in again.neighbours] == [c.id for c in first.neighbours]


def test_asking_as_a_lower_role_never_reads_what_the_key_may_not(
    gmemory: Memory, tmp_path: Path
) -> None:
    # a staff-only event beside a decision every role reads: ACLs list roles without ranks,
    # so a manager key may not read it, and asking as staff must not open it
    folder = mini_graph(tmp_path / "mini")
    write_graph(folder, {
        "events/rota.json": vertex(
            "event", "e-staff-rota", "acme/region_emea", roles=["staff"],
            summary="Staff-only shift rota of the EMEA support desk", led_to=["emea-sunset"],
        ),
    })  # fmt: skip
    ids = ingest(gmemory, folder)
    as_staff = view_for(gmemory.policy_in_force.graph, MANAGER, role="staff")
    assert as_staff.role == "staff"
    found, trace = preselect(
        store_of(gmemory), ids["emea-sunset"], as_staff, now=NOW, asked="emea-sunset"
    )
    assert "e-staff-rota" not in keys_of(found)
    # its edge carries its ACL, so the walk stops there, for the reason the key lacks
    assert reasons(trace, ids, gmemory)["e-staff-rota~led_to~emea-sunset"] == "acl:role_missing"
    # the anchor itself is "not found" to the manager asking as staff
    with pytest.raises(NotFound):
        gmemory.why(WhyRequest(anchor="e-staff-rota"), principal=MANAGER, role="staff")
    # a key that holds staff reads it, as staff and by its own role
    both = asker("manager", roles=("manager", "staff"))
    held = view_for(gmemory.policy_in_force.graph, both, role="staff")
    found, _ = preselect(store_of(gmemory), ids["emea-sunset"], held, now=NOW, asked="emea-sunset")
    assert "e-staff-rota" in keys_of(found)
    assert gmemory.why(WhyRequest(anchor="e-staff-rota"), principal=STAFF)["evidence"]


def test_an_alias_edge_the_reader_may_not_read_never_shows_through_its_field(
    gmemory: Memory, tmp_path: Path
) -> None:
    # the corporate alias edge is made exec-only, and the director reaches the decision at
    # its source another way: the alias event's field must not name it from the hidden edge
    folder = mini_graph(tmp_path / "mini")
    write_graph(folder, {
        "edges/aliases/a1.json": {
            "id": "alias-corp-prod", "type": "alias_event", "decision_id": "corp-divest",
            "event_id": "e-corp-alias", "domain_from": "acme/corporate",
            "domain_to": "acme/product", "sensitivity": "high", "roles_allowed": ["exec"],
        },
        "decisions/corp.json": vertex(
            "decision", "corp-divest", "acme/corporate", roles=["director", "exec"],
            sensitivity="high", namespaces=["internal", "confidential"],
            option="Divest the appliance line", rationale=SECRET_RATIONALE,
            decision_maker="CEO", timestamp="2024-01-10T09:00:00Z",
            supported_by=["e-corp-alias"],
        ),
    })  # fmt: skip
    ids = ingest(gmemory, folder)
    director = asker("director", labels=("internal", "confidential"))
    view = view_for(gmemory.policy_in_force.graph, director)
    found, trace = preselect(
        store_of(gmemory), ids["e-corp-alias"], view, now=NOW, asked="e-corp-alias"
    )
    assert "corp-divest" in keys_of(found)  # reached through its supporting edge
    assert reasons(trace, ids, gmemory)["alias-corp-prod"] == "acl:role_missing"
    assert "alias_of_decision" not in (found.anchor.fields.get("x-extra") or {})
    assert trace.masked[ids["e-corp-alias"]] == ["x-extra.alias_of_decision"]
    # an exec reads the edge, and the field names the decision
    found, _ = preselect(
        store_of(gmemory), ids["e-corp-alias"],
        view_for(gmemory.policy_in_force.graph, asker("exec", labels=("internal", "confidential"))),
        now=NOW, asked="e-corp-alias",
    )  # fmt: skip
    assert (found.anchor.fields.get("x-extra") or {}).get("alias_of_decision") == "corp-divest"
