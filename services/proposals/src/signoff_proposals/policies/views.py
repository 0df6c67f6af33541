"""How a proposal row shows its frozen requirement and its approvals (``ProposalView``)."""

from __future__ import annotations

from typing import Any

from signoff_contracts.v1 import ApprovalMark, ApprovalRequirement


def requirement_of(row: Any) -> ApprovalRequirement | None:
    required = getattr(row, "approvals_required", None)
    if required is None:
        return None
    return ApprovalRequirement(
        required=required,
        roles=row.approver_roles,
        proposer_may_approve=row.proposer_may_approve,
        policy_version=row.policy_version,
    )


def marks_of(row: Any) -> list[ApprovalMark]:
    return [ApprovalMark.model_validate(mark) for mark in getattr(row, "approvals", None) or ()]


def approvers_of(row: Any) -> list[str] | None:
    """The contract's ``approvers``: everyone who approved, when more than one did."""
    marks = marks_of(row)
    return [mark.user_id for mark in marks] if len(marks) > 1 else None
