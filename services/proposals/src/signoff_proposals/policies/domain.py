"""What an approval policy says, and what it asks of one proposal — pure and synchronous.

A policy belongs to an organization and an operation kind. It is data, never code: an ordered
list of rules, each with an optional condition on one of the facts the operation declares
(``Operation.policy_facts``: typed fields of its frozen preview). The first rule whose condition
holds gives the proposal's ``Requirement`` — how many distinct people must approve, which roles
count, whether the proposer may be one of them; when none holds (or the organization has no
policy for the kind) the default applies: one approver, any role the operation's ``authorize``
accepts, the proposer included — signoff's behaviour before policies existed.

    {"rules": [{"when": {"fact": "amount_cents", "op": ">", "value": 10000},
                "approvals": 2, "roles": ["manager"], "proposer_may_approve": false}]}

A policy naming a fact its operation does not declare, or comparing a fact with a value of
another type, is refused when it is saved (``problems``). A condition on a fact a stored preview
cannot supply any more holds: an unreadable fact never makes a proposal need fewer approvals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.operations import FactValue

Comparison = Literal[">", ">=", "<", "<=", "==", "!="]
_ORDERING: frozenset[str] = frozenset({">", ">=", "<", "<="})
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
MAX_APPROVALS = 10

#: why an approval does not count (the ``forbidden`` reply's reason code)
PROPOSER_MAY_NOT_APPROVE = "proposer_may_not_approve"
ROLE_NOT_COUNTED = "role_not_counted"


class Condition(BaseModel):
    """``fact op value``: e.g. ``amount_cents > 10000`` (amounts are in minor units)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fact: str = Field(min_length=1, max_length=64)
    op: Comparison
    value: bool | int | float | str = Field(union_mode="left_to_right")

    def holds(self, facts: Mapping[str, FactValue]) -> bool:
        if self.fact not in facts:
            return True
        try:
            return _COMPARE[self.op](facts[self.fact], self.value)
        except TypeError:
            return True

    def __str__(self) -> str:
        return f"{self.fact} {self.op} {self.value!r}"


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    when: Condition | None = None
    approvals: int = Field(default=1, ge=1, le=MAX_APPROVALS)
    roles: list[str] | None = Field(default=None, min_length=1, max_length=20)
    proposer_may_approve: bool = True


class Policy(BaseModel):
    """An organization's rules for one operation kind; no rules: the default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: list[Rule] = Field(default_factory=list, max_length=20)


@dataclass(frozen=True, slots=True)
class Requirement:
    """What one proposal needs, frozen into it when it is stored."""

    required: int = 1
    roles: tuple[str, ...] | None = None
    proposer_may_approve: bool = True
    policy_version: int | None = None


DEFAULT = Requirement()


def requirement(
    policy: Policy | None, version: int | None, facts: Mapping[str, FactValue]
) -> Requirement:
    """The first rule of ``policy`` whose condition holds for ``facts``; else the default."""
    for rule in policy.rules if policy is not None else ():
        if rule.when is None or rule.when.holds(facts):
            return Requirement(
                required=rule.approvals,
                roles=tuple(rule.roles) if rule.roles is not None else None,
                proposer_may_approve=rule.proposer_may_approve,
                policy_version=version,
            )
    return Requirement(policy_version=version if policy is not None else None)


def problems(policy: Policy, fact_types: Mapping[str, type]) -> list[str]:
    """Why ``policy`` may not be saved for an operation declaring ``fact_types``: every
    condition must name a declared fact and compare it with a value of its type."""
    found = []
    for number, rule in enumerate(policy.rules, start=1):
        if rule.when is None:
            continue
        fact, value = rule.when.fact, rule.when.value
        if fact not in fact_types:
            declared = ", ".join(sorted(fact_types)) or "none"
            found.append(
                f"rule {number}: `{fact}` is not a fact this operation declares ({declared})"
            )
            continue
        if not _fits(fact_types[fact], value):
            found.append(f"rule {number}: `{fact}` is a {fact_types[fact].__name__}, not {value!r}")
        elif rule.when.op in _ORDERING and fact_types[fact] in (bool, str):
            found.append(f"rule {number}: `{fact}` can only be compared with == or !=")
    return found


def _fits(kind: type, value: FactValue) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind in (int, float):
        return isinstance(value, int | float)
    return isinstance(value, kind)


def refusal(requirement: Requirement, *, role: str, is_proposer: bool) -> str | None:
    """Why this person's approval may not count under ``requirement`` (a reason code), if so.
    The operation's ``authorize`` has already accepted them: a policy only narrows."""
    if is_proposer and not requirement.proposer_may_approve:
        return PROPOSER_MAY_NOT_APPROVE
    if requirement.roles is not None and role not in requirement.roles:
        return ROLE_NOT_COUNTED
    return None


def describe(policy: Policy) -> list[str]:
    """One line per rule, for the CLI: ``amount_cents > 10000: 2 approvals (manager), not the
    proposer``."""
    lines = []
    for rule in policy.rules:
        head = str(rule.when) if rule.when is not None else "always"
        who = f" ({', '.join(rule.roles)})" if rule.roles else ""
        tail = "" if rule.proposer_may_approve else ", not the proposer"
        plural = "s" if rule.approvals > 1 else ""
        lines.append(f"{head}: {rule.approvals} approval{plural}{who}{tail}")
    return lines or ["default: 1 approval"]
