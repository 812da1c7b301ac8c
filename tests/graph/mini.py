"""A small hand-made graph for the graph tests: one corporate decision seen by directors
only, a product decision and its alias into one region, a regional decision with its
supporting events, and a transition between regional decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SECRET_RATIONALE = "Quarterly board memo: divest the tundra appliance line to fund Orion"


def vertex(kind: str, key: str, domain: str, *, roles: list[str], sensitivity: str = "low",
           namespaces: list[str] | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    base: dict[str, Any] = {
        "id": key,
        "timestamp": extra.pop("timestamp", "2024-03-01T10:00:00Z"),
        "domain": domain,
        "importance": extra.pop("importance", 0.6),
        "sensitivity": sensitivity,
        "namespaces": namespaces or ["internal"],
        "roles_allowed": roles,
    }
    if kind == "decision":
        base |= {"option": extra.pop("option"), "rationale": extra.pop("rationale"),
                 "decision_maker": extra.pop("decision_maker", "VP Engineering")}  # fmt: skip
    else:
        base |= {"summary": extra.pop("summary")}
    base.update(extra)
    return base


def write_graph(folder: Path, files: dict[str, dict[str, Any]]) -> Path:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
    return folder


ALL = ["staff", "manager", "director", "exec"]


def mini_graph(folder: Path) -> Path:
    return write_graph(folder, {
        "decisions/corp.json": vertex(
            "decision", "corp-divest", "acme/corporate", roles=["director", "exec"],
            sensitivity="high", namespaces=["internal", "confidential"],
            option="Divest the appliance line", rationale=SECRET_RATIONALE,
            decision_maker="CEO", timestamp="2024-01-10T09:00:00Z",
            **{"x-extra": {"kpis": [{"name": "Margin uplift", "unit": "%", "baseline": 3,
                                     "target": 9}], "board_ref": "BRD-7781-secret"}},
        ),
        "decisions/prod.json": vertex(
            "decision", "prod-sunset", "acme/product", roles=["manager", "director", "exec"],
            sensitivity="medium", option="Sunset appliance connectors in the product",
            rationale="Connector upkeep outweighs appliance revenue after the divestment",
            timestamp="2024-02-01T09:00:00Z", supported_by=["e-corp-alias"],
        ),
        "decisions/region.json": vertex(
            "decision", "emea-sunset", "acme/region_emea", roles=ALL,
            option="Migrate EMEA appliance customers to cloud connectors",
            rationale="Regional migration plan following the product sunset directive",
            timestamp="2024-03-01T09:00:00Z", supported_by=["e-emea-tickets", "e-prod-alias"],
        ),
        "decisions/region2.json": vertex(
            "decision", "emea-training", "acme/region_emea", roles=ALL,
            option="Train EMEA support on cloud connectors",
            rationale="Support needs cloud connector skills before the migration wave",
            timestamp="2024-04-01T09:00:00Z",
        ),
        "events/tickets.json": vertex(
            "event", "e-emea-tickets", "acme/region_emea", roles=ALL,
            summary="EMEA support tickets about appliance connectors doubled",
            snippet="Connector tickets doubled in EMEA", timestamp="2024-02-20T09:00:00Z",
        ),
        "events/secret-incident.json": vertex(
            "event", "e-emea-incident", "acme/region_emea", roles=ALL, sensitivity="high",
            summary="Confidential outage at Zephyr Bank caused by the appliance connector",
            timestamp="2024-02-25T09:00:00Z", led_to=["emea-sunset"],
        ),
        "events/prod-alias.json": vertex(
            "event", "e-prod-alias", "acme/region_emea", roles=ALL,
            summary="Product directive: appliance connectors end in 2025",
            timestamp="2024-02-02T09:00:00Z",
            **{"x-extra": {"alias_of_decision": "prod-sunset",
                           "visibility_note": "Projection of a product decision"}},
        ),
        "events/corp-alias.json": vertex(
            "event", "e-corp-alias", "acme/product", roles=["manager", "director", "exec"],
            sensitivity="medium", summary="Corporate directive: appliance line to be divested",
            timestamp="2024-01-11T09:00:00Z",
            **{"x-extra": {"alias_of_decision": "corp-divest"}},
        ),
        "transitions/t1.json": {
            "id": "t-sunset-training", "from": "emea-sunset", "to": "emea-training",
            "relation": "causal", "reason": "The migration needs trained support staff",
            "timestamp": "2024-04-01T09:00:00Z", "domain": "acme/region_emea",
        },
        "transitions/t2.json": {
            "id": "t-corp-prod", "from": "corp-divest", "to": "prod-sunset",
            "relation": "causal", "reason": "Divestment made connector upkeep pointless",
            "timestamp": "2024-02-01T09:00:00Z", "domain": "acme/corporate",
        },
        "edges/aliases/a1.json": {
            "id": "alias-corp-prod", "type": "alias_event", "decision_id": "corp-divest",
            "event_id": "e-corp-alias", "domain_from": "acme/corporate",
            "domain_to": "acme/product", "sensitivity": "high",
            "roles_allowed": ["director", "exec"],
        },
        "edges/aliases/a2.json": {
            "id": "alias-prod-emea", "type": "alias_event", "decision_id": "prod-sunset",
            "event_id": "e-prod-alias", "domain_from": "acme/product",
            "domain_to": "acme/region_emea",
        },
    })  # fmt: skip
