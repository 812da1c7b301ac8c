"""No answer carries a word its asker may not see: for every role and every vertex of the
mini graph as anchor, then on random graphs with random ACLs and role profiles, in ASK,
QUERY without an LLM and QUERY with an LLM that echoes its whole prompt back. The rule and
the search are in ``leaks.py``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.graph.fixtures import example_fixtures
from cairn.graph.roles import EdgeRule, FieldRule, GraphPolicy, RoleProfile
from cairn.memory import Memory
from cairn.model import Direction, Sensitivity
from cairn.store.sqlite import SqliteStore
from tests.graph.conftest import ASKERS, ROLES, asker, ingest, new_memory
from tests.graph.graphs import headers_graph, hop_graph, reasons_graph
from tests.graph.leaks import check_answers, fixtures, oracle
from tests.graph.mini import ALL, mini_graph, write_graph


@pytest.mark.parametrize("role", ROLES)
def test_no_answer_on_the_mini_graph_leaks(role: str, lite: Memory, tmp_path: Path) -> None:
    folder = mini_graph(tmp_path / "mini")
    ingest(lite, folder)
    principal = ASKERS[role]
    known = oracle(lite, folder, principal)
    # the oracle is not vacuous: the roles below director are kept from something
    if role in ("staff", "manager"):
        assert "Quarterly board memo: divest the tundra appliance line to fund Orion" in (
            known.withheld
        )
    else:
        assert "BRD-7781-secret" in known.withheld  # masked even for directors
    anchors = sorted(fixtures(folder))
    checked = check_answers(lite, folder, principal, anchors)
    readable = [a for a in anchors if known.readable(a)]
    assert checked == 3 * len(readable) > 0
    if role in ("director", "exec"):  # and two hops, which only they may walk
        check_answers(lite, folder, principal, readable, modes=("ask", "query+llm"), hops=2)


@pytest.mark.parametrize("role", ROLES)
def test_no_answer_on_the_shipped_example_graph_leaks(role: str, lite: Memory) -> None:
    """Every role, every decision and event of the ACME example as anchor, in every mode."""
    folder = example_fixtures()
    ingest(lite, folder)
    principal = ASKERS[role]
    known = oracle(lite, folder, principal)
    anchors = sorted(fixtures(folder))
    readable = [a for a in anchors if known.readable(a)]
    if role != "exec":  # an exec reads every vertex; everyone below is kept from some
        assert len(readable) < len(anchors)
    assert check_answers(lite, folder, principal, anchors) == 3 * len(readable) > 0


# Graphs whose edges are open while a vertex at their end is not (the mini graph's edges
# take the stricter ACL of their ends, so there the edge alone would hide the vertex).
@pytest.mark.parametrize("build", [reasons_graph, hop_graph, headers_graph])
@pytest.mark.parametrize("role", ROLES)
def test_no_answer_on_the_open_edge_graphs_leaks(
    role: str, build: Callable[[Path], Path], lite: Memory, tmp_path: Path
) -> None:
    folder = build(tmp_path / "g")
    ingest(lite, folder)
    principal = ASKERS[role]
    anchors = sorted(fixtures(folder))
    hops = lite.policy_in_force.graph.roles[role].max_hops
    readable = [a for a in anchors if oracle(lite, folder, principal).readable(a)]
    assert check_answers(lite, folder, principal, anchors, hops=hops) == 3 * len(readable)


def test_a_narrowed_passport_does_not_leak_either(lite: Memory, tmp_path: Path) -> None:
    """A director asking as staff, or with fewer namespaces, is the narrower asker."""
    folder = mini_graph(tmp_path / "mini")
    ingest(lite, folder)
    anchors = sorted(fixtures(folder))
    internal_only = asker("director", labels=("internal",), principal_id="u-internal")
    check_answers(lite, folder, internal_only, anchors, modes=("ask", "query+llm"))


# ---- random graphs -----------------------------------------------------------------------

DOMAINS = ("acme/corporate", "acme/product", "acme/region_emea", "acme/region_apac")
GLOBS = (*DOMAINS, "acme/*", "acme/region_*")
NAMESPACES = ("public", "internal", "confidential")
LEVELS = ("low", "medium", "high")
EDGE_TYPES = ("CAUSAL_PRECEDES", "SUPPORTED_BY", "BASED_ON", "ALIAS_OF")
X_EXTRA_KEYS = ("kpis", "visibility_note", "alias_of_decision", "secret_note", "board")


def subset(draw: Any, items: tuple[str, ...], *, min_size: int = 1) -> list[str]:
    return draw(st.lists(st.sampled_from(items), min_size=min_size, max_size=len(items),
                         unique=True))  # fmt: skip


def acl(draw: Any) -> dict[str, Any]:
    return {
        "sensitivity": draw(st.sampled_from(LEVELS)),
        "namespaces": subset(draw, NAMESPACES),
        "roles_allowed": subset(draw, tuple(ALL)),
    }


@st.composite
def random_graph(draw: Any) -> dict[str, dict[str, Any]]:
    """5 to 15 decisions and events with random ACLs and domains, and random edges of the
    catalog's types (transitions and alias edges with or without an ACL of their own).
    Every text holds its vertex's number, so no two texts contain one another."""
    count = draw(st.integers(5, 15))
    kinds = [draw(st.sampled_from(("decision", "event"))) for _ in range(count)]
    keys = [f"vx-{i:02d}-{kinds[i][:3]}" for i in range(count)]
    decisions = [k for k, kind in zip(keys, kinds, strict=True) if kind == "decision"]
    events = [k for k, kind in zip(keys, kinds, strict=True) if kind == "event"]
    files: dict[str, dict[str, Any]] = {}
    domain_of = {key: draw(st.sampled_from(DOMAINS)) for key in keys}
    for i, key in enumerate(keys):
        domain = domain_of[key]
        data: dict[str, Any] = {
            "id": key, "timestamp": f"2024-{1 + i % 12:02d}-{1 + i:02d}T09:00:00Z",
            "domain": domain, "importance": draw(st.sampled_from((0.1, 0.5, 0.9))),
            **acl(draw),
        }  # fmt: skip
        extra: dict[str, Any] = {}
        if draw(st.booleans()):
            extra["visibility_note"] = f"Note{i:02d} visible or not"
        if draw(st.booleans()):
            extra["secret_note"] = f"SecretNote{i:02d} off every whitelist"
        if draw(st.booleans()):
            extra["board"] = {"ref": f"BoardRef{i:02d}", "kpis": f"NestedKpi{i:02d}"}
        if kinds[i] == "decision":
            data |= {
                "option": f"Option{i:02d} chosen here",
                "rationale": f"Rationale{i:02d} why it was chosen",
                "decision_maker": f"Maker{i:02d} Person",
            }
            if draw(st.booleans()):
                extra["kpis"] = [{"name": f"Kpi{i:02d} metric", "unit": "%", "baseline": 1,
                                  "target": 2}]  # fmt: skip
            others = [d for d in decisions if d != key]
            if others and draw(st.booleans()):
                data["based_on"] = subset(draw, tuple(others))[:2]
            if events and draw(st.booleans()):
                data["supported_by"] = subset(draw, tuple(events))[:2]
        else:
            data["summary"] = f"Summary{i:02d} of what happened"
            if draw(st.booleans()):
                data["description"] = f"Description{i:02d} in detail"
            if draw(st.booleans()):
                data["snippet"] = f"Snippet{i:02d} quoted"
            if decisions and draw(st.booleans()):
                data["led_to"] = subset(draw, tuple(decisions))[:2]
            if decisions and draw(st.booleans()):
                # an alias event names its decision, and an alias edge joins the two
                extra["alias_of_decision"] = aliased = draw(st.sampled_from(decisions))
                alias_edge: dict[str, Any] = {
                    "id": f"al-{key}-edge", "type": "alias_event", "decision_id": aliased,
                    "event_id": key, "domain_from": domain_of[aliased],
                    "domain_to": domain_of[key],
                }  # fmt: skip
                if draw(st.booleans()):
                    alias_edge |= acl(draw)
                files[f"edges/aliases/al-{key}.json"] = alias_edge
        if draw(st.booleans()):
            data["tags"] = [f"tag{i:02d}x"]
        if extra:
            data["x-extra"] = extra
        files[f"{kinds[i]}s/{key}.json"] = data
    for n in range(draw(st.integers(0, count))):
        src, dst = draw(st.lists(st.sampled_from(keys), min_size=2, max_size=2, unique=True))
        edge = {
            "id": f"tr-{n:02d}-edge", "from": src, "to": dst, "relation": "causal",
            "reason": f"TransitionReason{n:02d} because", "timestamp": "2024-06-01T00:00:00Z",
            "domain": domain_of[src],
        }  # fmt: skip
        if draw(st.booleans()):
            edge |= acl(draw)
        files[f"transitions/tr-{n:02d}.json"] = edge
    if decisions and events:
        for n in range(draw(st.integers(0, 4))):
            decision, event = draw(st.sampled_from(decisions)), draw(st.sampled_from(events))
            alias: dict[str, Any] = {
                "id": f"al-{n:02d}-edge", "type": "alias_event", "decision_id": decision,
                "event_id": event, "domain_from": domain_of[decision],
                "domain_to": domain_of[event],
                "x-extra": {"note": f"AliasNote{n:02d} overlay"},
            }  # fmt: skip
            if draw(st.booleans()):
                alias |= acl(draw)
            files[f"edges/aliases/al-{n:02d}.json"] = alias
    return files


@st.composite
def random_policy(draw: Any) -> GraphPolicy | None:
    """The default profiles, or random ones (rank order kept)."""
    if draw(st.booleans()):
        return None
    roles = {}
    for rank, role in enumerate(ROLES, 1):
        edges = tuple(
            EdgeRule(
                type=t,
                direction=draw(st.sampled_from(tuple(Direction))),
                from_domains=tuple(subset(draw, GLOBS, min_size=0)[:2]),
                to_domains=tuple(subset(draw, GLOBS, min_size=0)[:2]),
            )
            for t in subset(draw, EDGE_TYPES, min_size=0)
        )
        fields = ()
        if draw(st.booleans()):
            fields = (FieldRule(domains=tuple(subset(draw, GLOBS)[:2]), show="headers"),)
        roles[role] = RoleProfile(
            rank=rank * 10,
            domains=tuple(subset(draw, GLOBS)[:3]),
            sensitivity=draw(st.sampled_from(tuple(Sensitivity))),
            edges=edges,
            fields=fields,
            x_extra=tuple(subset(draw, (*X_EXTRA_KEYS, "board.ref"), min_size=0)),
            max_hops=draw(st.integers(1, 3)),
            per_type_cap=draw(st.integers(1, 5)),
            downloads=tuple(subset(draw, ("bundle_view", "bundle_full"), min_size=0)),
        )
    return GraphPolicy(version="vrand", roles=roles)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files=random_graph(), policy=random_policy(), data=st.data())
def test_no_answer_on_a_random_graph_leaks(
    files: dict[str, dict[str, Any]], policy: GraphPolicy | None, data: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory(prefix="cairn-graph-") as tmp:
        root = Path(tmp)
        folder = write_graph(root / "fixtures", files)
        memory = new_memory(SqliteStore(root / "cairn.db"), root)
        try:
            ingest(memory, folder)
            if policy is not None:
                memory.govern_by(memory.policy_in_force.model_copy(update={"graph": policy}))
            keys = sorted(fixtures(folder))
            for role in ROLES:
                principal = ASKERS[role]
                if data.draw(st.booleans(), label=f"{role} narrower key"):
                    principal = asker(
                        role,
                        labels=tuple(data.draw(st.lists(st.sampled_from(NAMESPACES),
                                                        min_size=1, max_size=3, unique=True))),
                        sensitivity=data.draw(st.sampled_from(tuple(Sensitivity))),
                    )  # fmt: skip
                profile = memory.policy_in_force.graph.roles[role]
                anchors = data.draw(
                    st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True),
                    label=f"{role} anchors",
                )
                hops = data.draw(st.integers(1, profile.max_hops), label=f"{role} hops")
                check_answers(memory, folder, principal, anchors,
                              modes=("ask", "query+llm"), hops=hops)  # fmt: skip
        finally:
            memory.close()
