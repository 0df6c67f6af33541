"""Execution contracts (proposals → executor) and what becomes of them.

A contract is signed: an Ed25519 signature over ``signing_payload()`` with a key only the
proposals service holds; executors hold the public keys, looked up by ``key_id``. It is dated:
``execute_by`` is set from the database clock at claim, and an executor runs no contract after
it.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import AwareDatetime, Field

from signoff_contracts.ids import ContractId, ProposalId
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.v1.envelope import Envelope

_SIGNED_FIELDS = (
    "contract_id",
    "proposal_id",
    "organization_id",
    "section",
    "resource_id",
    "operation_kind",
    "contract_version",
    "arguments",
    "approved_by",
    "approved_at",
    "execute_by",
)
#: signed when present; absent (``None``) when one person approved, so such a contract's signed
#: bytes are what they were before approval policies existed
_SIGNED_WHEN_SET = ("approvers",)


class ExecutionContract(Envelope):
    """Run exactly this, once, before ``execute_by``."""

    type: Literal["execution.contract"] = "execution.contract"
    contract_id: ContractId
    proposal_id: ProposalId
    organization_id: str = Field(max_length=72)
    section: str = Field(max_length=64)
    resource_id: str = Field(max_length=128)
    operation_kind: str = Field(max_length=128)
    contract_version: int = Field(ge=1)
    arguments: dict[str, Any]
    approved_by: str = Field(max_length=72)
    approved_at: AwareDatetime
    execute_by: AwareDatetime
    approvers: list[str] | None = Field(
        default=None,
        max_length=32,
        description="Every person whose approval made the quorum (approved_by included), "
        "oldest first, when the approval policy needed more than one; the executor re-checks "
        "each of them. None: approved_by alone.",
    )
    signature: str = Field(default="", max_length=128)
    key_id: str | None = Field(
        default=None,
        max_length=64,
        description="Which of the proposals service's signing keys signed it (key rotation).",
    )

    def signing_payload(self) -> bytes:
        """Canonical bytes the signature covers: sorted keys, no whitespace, UTC times."""
        signed = {*_SIGNED_FIELDS, *(f for f in _SIGNED_WHEN_SET if getattr(self, f) is not None)}
        data = self.model_dump(mode="json", include=signed)
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    def all_approvers(self) -> list[str]:
        """Everyone whose approval this contract carries (``approved_by`` at least)."""
        return list(self.approvers) if self.approvers else [self.approved_by]


class OutcomeReported(Envelope):
    """What became of a contract (executor or reconciler → proposals)."""

    type: Literal["execution.outcome"] = "execution.outcome"
    proposal_id: ProposalId
    contract_id: ContractId
    operation_kind: str
    outcome: OperationOutcome
    reported_by: Literal["executor", "reconciler", "operator"] = "executor"
    operator: str | None = Field(
        default=None, max_length=128, description="Who resolved it by hand (operator outcomes)."
    )
    note: str | None = Field(default=None, max_length=1000, description="The operator's note.")


class ReconciliationChecked(Envelope):
    """One check of an uncertain attempt (reconciler → proposals), for its status page."""

    type: Literal["execution.reconciliation_checked"] = "execution.reconciliation_checked"
    proposal_id: ProposalId
    attempt_id: str = Field(max_length=128)
    check: int = Field(ge=1, description="1 for the first check of this attempt, and so on.")
    result: Literal["pending", "applied", "not_applied", "error", "manual"]
    detail: str | None = Field(default=None, max_length=500, description="Safe, no payloads.")
    next_check_at: AwareDatetime | None = None
    escalated: bool = Field(
        default=False,
        description="True on the check that found the attempt still inconclusive past the "
        "reconciler's escalation bound: operators are alerted and checking goes on, slower. "
        "Uncertainty is never settled by a clock.",
    )


class ReconciliationRequired(Envelope):
    """An external effect's result is unknown: only the reconciler may act on it."""

    type: Literal["execution.reconciliation_required"] = "execution.reconciliation_required"
    proposal_id: ProposalId
    contract_id: ContractId
    organization_id: str
    operation_kind: str
    contract_version: int = Field(ge=1)
    attempt_id: str = Field(max_length=128, description="The domain's attempt record.")
