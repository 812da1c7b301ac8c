"""The policy passport: every required header is needed, a malformed one is refused naming
it, and whatever the headers say can only narrow what the key's principal may read."""

from __future__ import annotations

import pytest

from cairn.errors import InvalidInput, PermissionDenied
from cairn.governance import access
from cairn.graph.passport import (
    OPTIONAL_HEADERS,
    REQUIRED_HEADERS,
    GraphView,
    Passport,
    parse_passport,
    view_for,
)
from cairn.graph.roles import GraphPolicy
from cairn.model import Principal, PrincipalKind, Sensitivity
from tests.factories import CURATOR
from tests.graph.conftest import DIRECTOR, MANAGER, STAFF, asker

POLICY = GraphPolicy()


def headers(principal: Principal, role: str | None = None, **extra: str) -> dict[str, str]:
    """A complete, correct passport for ``principal`` asking as ``role`` (its own)."""
    role = role or principal.roles[0]
    base = {
        "X-User-Id": principal.id,
        "X-User-Roles": role,
        "X-User-Namespaces": ",".join(principal.labels),
        "X-Policy-Version": POLICY.version,
        "X-Policy-Key": POLICY.policy_key(role),
        "X-Request-Id": "req-1",
        "X-Trace-Id": "trace-1",
    }
    for name, value in extra.items():
        base[name.replace("_", "-")] = value
    return base


def view(principal: Principal, role: str | None = None, **extra: str) -> GraphView:
    return view_for(POLICY, principal, passport=parse_passport(headers(principal, role, **extra)))


def refused(
    error: type[Exception], header: str, principal: Principal, role: str | None = None,
    **extra: str,
) -> None:  # fmt: skip
    with pytest.raises(error) as caught:
        view(principal, role, **extra)
    assert getattr(caught.value, "field", None) == header, caught.value
    assert header in str(caught.value) or header in str(getattr(caught.value, "field", ""))


# ---- parsing ---------------------------------------------------------------------------


def test_a_complete_passport_parses() -> None:
    parsed = parse_passport(headers(STAFF))
    assert parsed == Passport(
        user_id="u-staff",
        roles=("staff",),
        namespaces=("public", "internal"),
        policy_version="v1",
        policy_key=POLICY.policy_key("staff"),
        request_id="req-1",
        trace_id="trace-1",
    )
    # header names are case-insensitive, as over HTTP
    lower = {name.lower(): value for name, value in headers(STAFF).items()}
    assert parse_passport(lower) == parsed


@pytest.mark.parametrize("missing", REQUIRED_HEADERS)
def test_each_required_header_missing_is_refused_naming_it(missing: str) -> None:
    sent = headers(STAFF)
    del sent[missing]
    with pytest.raises(InvalidInput) as caught:
        parse_passport(sent)
    assert caught.value.field == missing
    assert missing in str(caught.value)
    # present but blank is missing too
    with pytest.raises(InvalidInput) as blank:
        parse_passport({**headers(STAFF), missing: "   "})
    assert blank.value.field == missing


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("X-Max-Hops", "x"),
        ("X-Max-Hops", "0"),
        ("X-Max-Hops", "4"),
        ("X-Max-Hops", "-1"),
        ("X-Sensitivity-Ceiling", "ultra"),
        ("X-User-Roles", "staff,<script>"),
        ("X-User-Roles", "staff manager"),
        ("X-User-Namespaces", "internal;drop table"),
        ("X-Domain-Scopes", "acme/region_emea,../etc"),
        ("X-Edge-Allow", "CAUSAL_PRECEDES,'"),
        ("X-User-Id", "u staff"),
        ("X-Policy-Key", "sha256:" + "a" * 300),
    ],
)
def test_a_malformed_header_is_refused_naming_it(header: str, value: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_passport({**headers(STAFF), header: value})
    assert caught.value.field == header
    assert header in str(caught.value)


def test_the_optional_headers_parse() -> None:
    assert set(OPTIONAL_HEADERS) == {
        "X-Domain-Scopes", "X-Edge-Allow", "X-Max-Hops", "X-Sensitivity-Ceiling",
    }  # fmt: skip
    parsed = parse_passport(
        headers(
            DIRECTOR, X_Domain_Scopes="acme/product, acme/region_*",
            X_Edge_Allow="ALIAS_OF", X_Max_Hops="2", X_Sensitivity_Ceiling="Medium",
        )
    )  # fmt: skip
    assert parsed.domain_scopes == ("acme/product", "acme/region_*")
    assert parsed.edge_allow == ("ALIAS_OF",)
    assert parsed.max_hops == 2
    assert parsed.sensitivity_ceiling is Sensitivity.MEDIUM


# ---- narrowing only ----------------------------------------------------------------------


def test_the_right_passport_gives_the_role_and_no_more() -> None:
    got = view(STAFF)
    assert got.role == "staff"
    assert got.reader.roles == ("staff",)
    assert got.reader.labels == ("public", "internal")
    assert got.reader.sensitivity is Sensitivity.LOW
    assert got.policy_key == POLICY.policy_key("staff")
    assert (got.request_id, got.trace_id) == ("req-1", "trace-1")
    assert got.max_hops == 1


@pytest.mark.parametrize(
    ("principal", "asked"),
    [
        (STAFF, "manager"),
        (STAFF, "director"),
        (MANAGER, "director"),
        (MANAGER, "exec"),
        (STAFF, "staff,director"),
    ],
)
def test_a_role_above_the_keys_is_refused(principal: Principal, asked: str) -> None:
    highest = asked.split(",")[-1]
    sent = {**headers(principal), "X-User-Roles": asked, "X-Policy-Key": POLICY.policy_key(highest)}
    with pytest.raises(PermissionDenied) as caught:
        view_for(POLICY, principal, passport=parse_passport(sent))
    assert caught.value.field == "X-User-Roles"


def test_a_lower_role_than_the_keys_narrows() -> None:
    got = view(DIRECTOR, "staff")
    assert got.role == "staff"
    assert got.reader.roles == ("staff",)
    assert got.profile == POLICY.roles["staff"]
    # the key of the role asked as, not the principal's own
    with pytest.raises(PermissionDenied) as caught:
        view(DIRECTOR, "staff", X_Policy_Key=POLICY.policy_key("director"))
    assert caught.value.field == "X-Policy-Key"


def test_an_unknown_role_is_refused() -> None:
    sent = {**headers(STAFF), "X-User-Roles": "ceo"}
    with pytest.raises(InvalidInput) as caught:
        view_for(POLICY, STAFF, passport=parse_passport(sent))
    assert caught.value.field == "X-User-Roles"


def test_namespaces_the_key_lacks_are_refused() -> None:
    refused(PermissionDenied, "X-User-Namespaces", STAFF, X_User_Namespaces="internal,confidential")
    refused(InvalidInput, "X-User-Namespaces", STAFF, X_User_Namespaces="*")
    narrowed = view(STAFF, X_User_Namespaces="internal")
    assert narrowed.reader.labels == ("internal",)


def test_domain_scopes_wider_than_the_role_are_refused_and_narrower_ones_narrow() -> None:
    for wider in ("acme/*", "acme/product", "acme/reg*", "acme/region_emea,acme/corporate"):
        refused(PermissionDenied, "X-Domain-Scopes", STAFF, X_Domain_Scopes=wider)
    refused(InvalidInput, "X-Domain-Scopes", STAFF, X_Domain_Scopes="*")  # not even a name
    got = view(STAFF, X_Domain_Scopes="acme/region_emea")
    assert got.domains == ("acme/region_emea",)
    assert got.in_domain("acme/region_emea")
    assert not got.in_domain("acme/region_apac")
    assert not got.in_domain("acme/product")
    assert view(STAFF, X_Domain_Scopes="acme/region_*").in_domain("acme/region_apac")
    assert not view(STAFF).in_domain("acme/product")


def test_an_edge_type_the_role_cannot_walk_is_refused() -> None:
    for edge_type in ("CONTRADICTS", "RELATES_TO", "NOT_A_TYPE"):
        refused(PermissionDenied, "X-Edge-Allow", STAFF, X_Edge_Allow=edge_type)
    got = view(STAFF, X_Edge_Allow="CAUSAL_PRECEDES")
    assert {rule.type for rule in got.edges} == {"CAUSAL_PRECEDES"}
    # the rules keep their directions and domains: staff's ALIAS_OF still only runs outward
    alias = view(STAFF, X_Edge_Allow="ALIAS_OF").edges
    assert alias == tuple(r for r in POLICY.roles["staff"].edges if r.type == "ALIAS_OF")


def test_more_hops_than_the_role_allows_are_refused() -> None:
    refused(PermissionDenied, "X-Max-Hops", STAFF, X_Max_Hops="2")
    refused(PermissionDenied, "X-Max-Hops", DIRECTOR, X_Max_Hops="3")
    assert view(DIRECTOR, X_Max_Hops="1").max_hops == 1
    assert view(DIRECTOR).max_hops == 2


def test_the_policy_key_and_version_must_be_the_ones_in_force() -> None:
    refused(PermissionDenied, "X-Policy-Key", STAFF, X_Policy_Key="sha256:" + "0" * 64)
    refused(PermissionDenied, "X-Policy-Key", STAFF, X_Policy_Key=POLICY.policy_key("manager"))
    refused(PermissionDenied, "X-Policy-Version", STAFF, X_Policy_Version="v2")
    assert view(STAFF).policy_key == POLICY.policy_key("staff")
    # another profile is another key: a client learns which policy answered it
    changed = GraphPolicy(
        roles={**POLICY.roles, "staff": POLICY.roles["staff"].model_copy(update={"max_hops": 2})}
    )
    assert changed.policy_key("staff") != POLICY.policy_key("staff")
    assert changed.policy_key("director") == POLICY.policy_key("director")


def test_the_user_id_must_be_the_keys_principal() -> None:
    refused(PermissionDenied, "X-User-Id", STAFF, X_User_Id="u-director")


def test_the_lowest_ceiling_applies() -> None:
    assert view(DIRECTOR, X_Sensitivity_Ceiling="low").reader.sensitivity is Sensitivity.LOW
    assert view(DIRECTOR, X_Sensitivity_Ceiling="medium").reader.sensitivity is Sensitivity.MEDIUM
    # a header cannot raise it above the role's …
    assert view(STAFF, X_Sensitivity_Ceiling="high").reader.sensitivity is Sensitivity.LOW
    # … nor above the key's own
    capped = asker("director", sensitivity=Sensitivity.MEDIUM)
    assert view(capped, X_Sensitivity_Ceiling="high").reader.sensitivity is Sensitivity.MEDIUM
    assert view_for(POLICY, capped).reader.sensitivity is Sensitivity.MEDIUM


def test_a_principal_without_a_graph_role_is_refused() -> None:
    agent = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("acme/*",))
    with pytest.raises(PermissionDenied) as caught:
        view_for(POLICY, agent, passport=parse_passport(headers(agent, "staff")))
    assert caught.value.field == "X-User-Roles"
    with pytest.raises(PermissionDenied):
        view_for(POLICY, agent)
    # a curator reads everything in the store, but holds no graph role
    with pytest.raises(PermissionDenied):
        view_for(POLICY, CURATOR)
    system = Principal(id="system", kind=PrincipalKind.SYSTEM, roles=("director",), scopes=("*",))
    with pytest.raises(PermissionDenied):
        view_for(POLICY, system)


def test_the_role_argument_narrows_like_the_header() -> None:
    with pytest.raises(PermissionDenied) as caught:
        view_for(POLICY, STAFF, role="director")
    assert caught.value.field == "role"
    assert view_for(POLICY, DIRECTOR, role="manager").reader.roles == ("manager",)
    assert view_for(POLICY, MANAGER).role == "manager"


def test_the_narrowed_reader_never_keeps_curator_or_admin_roles() -> None:
    powerful = asker(
        "director", roles=("director", "curator", "admin"), labels=("*",), scopes=("*",)
    )
    for got in (
        view_for(POLICY, powerful),
        view_for(POLICY, powerful, role="staff"),
        view(powerful, "director", X_User_Namespaces="public,internal"),
    ):
        assert got.reader.roles in (("director",), ("staff",))
        assert not access.is_curator(got.reader)
    # with a passport, the namespaces are the header's even when the key holds every label
    assert view(powerful, "director", X_User_Namespaces="internal").reader.labels == ("internal",)
