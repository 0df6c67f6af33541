"""What a policy asks of one proposal, and which policies may be saved (pure)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_proposals.policies import domain
from signoff_proposals.policies.domain import Policy, Requirement

OVER_100 = {"fact": "amount_cents", "op": ">", "value": 10_000}
FACTS = {"amount_cents": int, "currency": str}


def _policy(*rules: dict[str, object]) -> Policy:
    return Policy.model_validate({"rules": list(rules)})


def test_the_first_rule_whose_condition_holds_decides_else_the_default() -> None:
    policy = _policy(
        {"when": OVER_100, "approvals": 2, "roles": ["manager"], "proposer_may_approve": False},
        {"approvals": 1, "roles": ["manager"]},
    )
    big = domain.requirement(policy, 3, {"amount_cents": 15_000})
    assert big == Requirement(2, ("manager",), False, 3)
    small = domain.requirement(policy, 3, {"amount_cents": 3_500})
    assert small == Requirement(1, ("manager",), True, 3)
    only_big = _policy({"when": OVER_100, "approvals": 2})
    assert domain.requirement(only_big, 4, {"amount_cents": 3_500}) == Requirement(policy_version=4)
    assert domain.requirement(None, None, {}) == domain.DEFAULT


def test_a_fact_the_preview_cannot_supply_makes_its_condition_hold() -> None:
    policy = _policy({"when": OVER_100, "approvals": 2})
    assert domain.requirement(policy, 1, {}).required == 2


def test_a_policy_may_test_only_declared_facts_with_values_of_their_type() -> None:
    assert domain.problems(_policy({"when": OVER_100, "approvals": 2}), FACTS) == []
    undeclared = _policy({"when": {"fact": "audience_count", "op": ">", "value": 500}})
    assert "audience_count" in domain.problems(undeclared, FACTS)[0]
    wrong_type = _policy({"when": {"fact": "amount_cents", "op": ">", "value": "lots"}})
    assert domain.problems(wrong_type, FACTS)
    ordered_text = _policy({"when": {"fact": "currency", "op": ">", "value": "CAD"}})
    assert "==" in domain.problems(ordered_text, FACTS)[0]
    assert (
        domain.problems(_policy({"when": {"fact": "currency", "op": "==", "value": "CAD"}}), FACTS)
        == []
    )


@pytest.mark.parametrize(
    "rule",
    [
        {"approvals": 0},
        {"approvals": 11},
        {"roles": []},
        {"when": {"fact": "x", "op": "~", "value": 1}},
        {"code": "x"},
    ],
)
def test_malformed_rules_are_refused_by_their_shape(rule: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        _policy(rule)


def test_who_may_not_count() -> None:
    need = Requirement(2, ("manager",), False, 1)
    assert domain.refusal(need, role="manager", is_proposer=True) == "proposer_may_not_approve"
    assert domain.refusal(need, role="admin", is_proposer=False) == "role_not_counted"
    assert domain.refusal(need, role="manager", is_proposer=False) is None
    assert domain.refusal(domain.DEFAULT, role="anyone", is_proposer=True) is None
