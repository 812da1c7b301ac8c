"""Small graphs built for one point each, beside ``mini.py``'s story graph.

Every text carries a word found nowhere else (Quillfeather, Larkspur, …), so a test can
look for it in an answer and know where it came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.graph.mini import ALL, vertex, write_graph

OPEN_ACL = {"sensitivity": "low", "roles_allowed": ALL, "namespaces": ["internal"]}


def transition(key: str, src: str, dst: str, reason: str, **acl: Any) -> dict[str, Any]:
    return {
        "id": key, "from": src, "to": dst, "relation": "causal", "reason": reason,
        "timestamp": "2024-03-02T09:00:00Z", "domain": "acme/region_emea", **acl,
    }  # fmt: skip


def reasons_graph(folder: Path) -> Path:
    """A regional event ``r-anchor`` with one neighbour per reason a walk withholds:

    - ``r-high`` (sensitivity high) over an open transition: acl:sensitivity_exceeded
    - ``r-conf`` (namespaces internal + confidential): acl:namespace_mismatch
    - ``r-mgr`` (managers and up): acl:role_missing
    - ``r-prod`` (a product decision it supports): scope:out_of_domain for staff, and its
      ALIAS_OF edge to the anchor, which staff walk only downward: edge:not_allowed
    - ``r-behind``, behind a transition of sensitivity high: the edge is withheld and the
      vertex behind it never reached
    - ``r-ok`` (open) and ``r-apac`` (another region), both readable by everyone."""
    return write_graph(folder, {
        "events/anchor.json": vertex(
            "event", "r-anchor", "acme/region_emea", roles=ALL,
            summary="Regional anchor: cloud connector rollout in EMEA",
        ),
        "events/high.json": vertex(
            "event", "r-high", "acme/region_emea", roles=ALL, sensitivity="high",
            summary="Hushed outage at Quillfeather Bank", snippet="Quillfeather snippet",
        ),
        "events/conf.json": vertex(
            "event", "r-conf", "acme/region_emea", roles=ALL,
            namespaces=["internal", "confidential"], summary="Larkspur pricing memo",
        ),
        "events/mgr.json": vertex(
            "event", "r-mgr", "acme/region_emea", roles=["manager", "director", "exec"],
            summary="Brambleton staffing plan for managers",
        ),
        "decisions/prod.json": vertex(
            "decision", "r-prod", "acme/product", roles=ALL, option="Mossgiel product pivot",
            rationale="Mossgiel rationale from the product level", supported_by=["r-anchor"],
        ),
        "decisions/ok.json": vertex(
            "decision", "r-ok", "acme/region_emea", roles=ALL,
            option="Tidewater follow-up for the region", rationale="Tidewater rationale",
        ),
        "decisions/apac.json": vertex(
            "decision", "r-apac", "acme/region_apac", roles=ALL,
            option="Ashgrove plan in APAC", rationale="Ashgrove rationale",
        ),
        "decisions/behind.json": vertex(
            "decision", "r-behind", "acme/region_emea", roles=ALL,
            option="Wrenfield step behind a secret link", rationale="Wrenfield rationale",
        ),
        "transitions/high.json": transition(
            "t-high", "r-high", "r-anchor", "Quillfeather led here", **OPEN_ACL),
        "transitions/conf.json": transition(
            "t-conf", "r-conf", "r-anchor", "Larkspur led here", **OPEN_ACL),
        "transitions/mgr.json": transition(
            "t-mgr", "r-mgr", "r-anchor", "Brambleton led here", **OPEN_ACL),
        "transitions/ok.json": transition(
            "t-ok", "r-anchor", "r-ok", "The rollout needed Tidewater"),
        "transitions/apac.json": transition(
            "t-apac", "r-anchor", "r-apac", "EMEA taught APAC the Ashgrove way"),
        "transitions/secret.json": transition(
            "t-secret", "r-anchor", "r-behind", "Nightjar secret link reason",
            sensitivity="high"),
        "edges/aliases/prod.json": {
            "id": "alias-prod-anchor", "type": "alias_event", "decision_id": "r-prod",
            "event_id": "r-anchor", "domain_from": "acme/product",
            "domain_to": "acme/region_emea",
        },
    })  # fmt: skip


def hop_graph(folder: Path) -> Path:
    """``h-a`` → ``h-b`` → ``h-c`` in one region, over open transitions; ``h-b`` is for
    execs only, so a director reads ``h-a`` and ``h-c`` but never ``h-b``."""
    return write_graph(folder, {
        "decisions/a.json": vertex(
            "decision", "h-a", "acme/region_emea", roles=ALL, option="Alderney start",
            rationale="Alderney rationale",
        ),
        "decisions/b.json": vertex(
            "decision", "h-b", "acme/region_emea", roles=["exec"], option="Bexhill middle",
            rationale="Bexhill rationale only execs read",
        ),
        "decisions/c.json": vertex(
            "decision", "h-c", "acme/region_emea", roles=ALL, option="Cromarty end",
            rationale="Cromarty rationale beyond the hidden middle",
        ),
        "transitions/ab.json": transition("t-ab", "h-a", "h-b", "Alderney to Bexhill",
                                          **OPEN_ACL),
        "transitions/bc.json": transition("t-bc", "h-b", "h-c", "Bexhill to Cromarty",
                                          **OPEN_ACL),
    })  # fmt: skip


CORP_SECRETS = (
    "Operation Kestrel",  # the rationale
    "Chief Strategy Officer Imani",  # the decision maker
    "Recurring revenue share",  # a KPI's name
    "Corporate note Pemberton",  # a whitelisted x-extra key, still hidden under headers
    "tagsecret-corp",  # a tag
)


def headers_graph(folder: Path) -> Path:
    """A corporate decision ``corp-open`` whose ACL admits managers (so managers see it,
    as headers only) and a product decision ``prod-y`` based on it."""
    return write_graph(folder, {
        "decisions/corp.json": vertex(
            "decision", "corp-open", "acme/corporate", roles=["manager", "director", "exec"],
            sensitivity="medium", option="Open a cloud-only pricing tier",
            rationale="The board wants recurring revenue: Operation Kestrel",
            decision_maker="Chief Strategy Officer Imani", timestamp="2024-01-15T09:00:00Z",
            tags=["tagsecret-corp"],
            **{"x-extra": {"kpis": [{"name": "Recurring revenue share", "unit": "%",
                                     "baseline": 12, "target": 40}],
                           "visibility_note": "Corporate note Pemberton"}},
        ),
        "decisions/prod.json": vertex(
            "decision", "prod-y", "acme/product", roles=["manager", "director", "exec"],
            sensitivity="medium", option="Ship the cloud-only tier in the product",
            rationale="The product follows the corporate pricing change",
            timestamp="2024-02-15T09:00:00Z", based_on=["corp-open"],
        ),
    })  # fmt: skip
