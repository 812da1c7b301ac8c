"""The policy file: defaults, matching, and clear errors for typos."""

from __future__ import annotations

import pytest

from cairn.errors import PolicyError
from cairn.governance.policy import (
    DEFAULT_POLICY_YAML,
    ProposalFacts,
    evaluate,
    load_policy,
    parse_policy,
)
from cairn.model import Origin, Verdict


def facts(**overrides: object) -> ProposalFacts:
    base: dict[str, object] = {
        "op": "create",
        "kind": "belief",
        "origin": Origin.AGENT,
        "roles": ("agent",),
        "principal": "bot",
        "scope": "acme/app",
        "draft": False,
        "metadata": {},
    }
    base.update(overrides)
    return ProposalFacts.model_validate(base)


def test_default_policy_parses_and_decides() -> None:
    policy = parse_policy(DEFAULT_POLICY_YAML)
    assert evaluate(policy, facts(kind="episode"))[:2] == (Verdict.APPROVE, "episodes-are-history")
    assert evaluate(policy, facts())[:2] == (Verdict.QUEUE, "beliefs-need-review")
    assert evaluate(policy, facts(kind="fact"))[:2] == (Verdict.QUEUE, "default")
    assert evaluate(policy, facts(roles=("curator",)))[0] is Verdict.APPROVE
    low = facts(kind="decision", metadata={"impact": "low"})
    assert evaluate(policy, low)[1] == "low-impact-decisions"
    critical = facts(kind="decision", metadata={"impact": "critical"})
    assert evaluate(policy, critical)[1] == "high-impact-decisions"


def test_first_matching_rule_wins_and_globs_match_scopes() -> None:
    policy = parse_policy(
        """
        rules:
          - {name: sandbox, match: {scope: "play/*"}, decision: approve}
          - {name: no-beliefs, match: {kind: belief}, decision: reject, reason: not here}
        default: reject
        """
    )
    assert evaluate(policy, facts(scope="play/x"))[:2] == (Verdict.APPROVE, "sandbox")
    assert evaluate(policy, facts(scope="acme/x")) == (Verdict.REJECT, "no-beliefs", "not here")
    assert evaluate(policy, facts(kind="fact"))[:2] == (Verdict.REJECT, "default")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("rules:\n  - {name: a, match: {knd: belief}, decision: approve}", "rules.0.match.knd"),
        ("rules:\n  - {name: a, match: {kind: beleif}, decision: approve}", "rules[0].match.kind"),
        ("rules:\n  - {name: a, decision: aprove}", "rules.0.decision"),
        ("rules:\n  - {name: a, match: {op: crate}, decision: approve}", "rules.0.match.op"),
        ("defualt: queue", "defualt"),
        ("retention: {draft_days: -1}", "retention.draft_days"),
        ("rules: [ {name: a", "not valid YAML"),
        ("retention: {draft_days: 2001-13-45}", "not valid YAML"),
        ("- just\n- a list", "top level"),
    ],
)
def test_typos_are_refused_naming_the_field(text: str, where: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text)
    assert where in info.value.message


def test_declared_kinds_are_known(tmp_path: object) -> None:
    policy = parse_policy(
        "kinds: [runbook]\nrules:\n  - {name: r, match: {kind: runbook}, decision: approve}"
    )
    assert "runbook" in policy.all_kinds


def test_missing_policy_file_is_a_clear_error(tmp_path: object) -> None:
    from pathlib import Path

    with pytest.raises(PolicyError, match="cairn init"):
        load_policy(Path(str(tmp_path)) / "policy.yaml")


def test_facts_the_rules_cannot_tell_apart_share_a_key() -> None:
    """A batch asks the policy once per ``facts_key``: the key must change with every fact
    a rule can look at, and only with those."""
    policy = parse_policy(DEFAULT_POLICY_YAML)
    base = facts(kind="decision", metadata={"impact": "low", "team": "ops"})
    changed = {
        "op": "update", "kind": "fact", "origin": Origin.HUMAN, "roles": ("curator",),
        "principal": "someone", "scope": "acme/other", "draft": True, "relation": "SUPPORTS",
        "metadata": {"impact": "high", "team": "ops"},
    }  # fmt: skip
    assert set(changed) == set(ProposalFacts.model_fields), "every fact is tried"
    for name, value in changed.items():
        other = base.model_copy(update={name: value})
        assert policy.facts_key(other) != policy.facts_key(base), name
    # metadata no rule names, and an absent key against a null one, cannot change a ruling
    same = base.model_copy(update={"metadata": {"impact": "low", "team": "dev"}})
    assert policy.facts_key(same) == policy.facts_key(base)
    # values a rule compares alike share a key; lists and objects are keys too
    listed = facts(kind="decision", metadata={"impact": ["low"]})
    assert policy.facts_key(listed) != policy.facts_key(facts(kind="decision", metadata={}))
    assert policy.facts_key(listed) == policy.facts_key(
        facts(kind="decision", metadata={"impact": ["low"]})
    )
    assert evaluate(policy, listed)[1] != evaluate(policy, base)[1]
