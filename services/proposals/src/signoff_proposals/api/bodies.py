"""The response bodies of the reading routes, as the OpenAPI document describes them.

The routes build their bodies from the contracts' own views (``ProposalView``,
``PausePointView``, ``AuditEntry``); these models only name the shapes around them — a page,
a proposal with its trail — so a generated client is typed. They are declared with
``signoff_runtime.openapi.ok``, documentation only: what a route sends is unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import AuditEntry, PausePointView, ProposalView

from signoff_proposals.policies.domain import Rule


class ProposalWithAudit(ProposalView):
    """``GET /v1/proposals/{id}``: the proposal and its append-only audit trail."""

    audit: list[AuditEntry]


class ProposalPage(BaseModel):
    items: list[ProposalView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class PausePointPage(BaseModel):
    items: list[PausePointView]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class ReconciliationAttempt(BaseModel):
    attempt_id: str
    state: Literal["checking", "resolved"]
    checks: int
    last_result: str
    last_checked_at: AwareDatetime
    next_check_at: AwareDatetime | None
    escalated: bool


class ReconciliationPage(BaseModel):
    """The uncertain attempt and every check the reconciler made of it."""

    proposal_id: str
    status: ProposalStatus
    outcome: OperationOutcome | None
    attempt: ReconciliationAttempt | None
    state: Literal["awaiting_first_check", "none", "checking", "resolved"]
    checks: list[dict[str, Any]] = Field(description="Every check made, oldest first.")


class PolicyShown(BaseModel):
    """An operation kind's approval policy in force (no rules: the default)."""

    operation_kind: str
    version: int | None
    rules: list[Rule]
    summary: list[str] = Field(description="One line per rule.")
    facts: dict[str, str] = Field(description="The preview facts a rule may test, by type.")
    set_by: str | None
    set_at: str | None


class PolicyPage(BaseModel):
    items: list[PolicyShown]
    next_cursor: str | None


class PolicyWithHistory(PolicyShown):
    history: list[PolicyShown] = Field(description="Every version, newest first.")
