"""Version 1 of every message signoff sends.

A published version changes only by adding optional fields; anything else is a ``v2`` package
beside this one. ``tests/contract`` compares each schema with its committed snapshot.
"""

from signoff_contracts.v1.approvals import (
    ApprovalCommand,
    ApprovalReply,
    ApprovalResult,
    ApproveProposal,
    DeclineProposal,
    ResolvePausePoint,
    ReviseProposal,
    WithdrawProposal,
    approval_command_adapter,
)
from signoff_contracts.v1.envelope import Envelope
from signoff_contracts.v1.execution import (
    ExecutionContract,
    OutcomeReported,
    ReconciliationChecked,
    ReconciliationRequired,
)
from signoff_contracts.v1.pause_points import (
    AnswerableBy,
    PausePointKind,
    PausePointRequested,
    PausePointRequestReply,
    PausePointResolved,
    PausePointView,
)
from signoff_contracts.v1.proposals import (
    ApprovalMark,
    ApprovalRequirement,
    AuditEntry,
    ProposalEvent,
    ProposalRequested,
    ProposalRequestReply,
    ProposalView,
)
from signoff_contracts.v1.revisions import ResolveReply, ResolveRequested

#: every message type of this version, by its ``type`` tag (schemas are exported from here)
MESSAGES: dict[str, type[Envelope]] = {
    model.model_fields["type"].default: model
    for model in (
        ProposalRequested,
        ProposalRequestReply,
        ApproveProposal,
        DeclineProposal,
        ReviseProposal,
        ResolvePausePoint,
        WithdrawProposal,
        ApprovalReply,
        ExecutionContract,
        OutcomeReported,
        ReconciliationRequired,
        ReconciliationChecked,
        ProposalEvent,
        PausePointRequested,
        PausePointRequestReply,
        PausePointResolved,
        ResolveRequested,
        ResolveReply,
    )
}

__all__ = [
    "MESSAGES",
    "AnswerableBy",
    "ApprovalCommand",
    "ApprovalMark",
    "ApprovalReply",
    "ApprovalRequirement",
    "ApprovalResult",
    "ApproveProposal",
    "AuditEntry",
    "DeclineProposal",
    "Envelope",
    "ExecutionContract",
    "OutcomeReported",
    "PausePointKind",
    "PausePointRequestReply",
    "PausePointRequested",
    "PausePointResolved",
    "PausePointView",
    "ProposalEvent",
    "ProposalRequestReply",
    "ProposalRequested",
    "ProposalView",
    "ReconciliationChecked",
    "ReconciliationRequired",
    "ResolvePausePoint",
    "ResolveReply",
    "ResolveRequested",
    "ReviseProposal",
    "WithdrawProposal",
    "approval_command_adapter",
]
