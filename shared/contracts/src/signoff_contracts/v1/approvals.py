"""Approval commands (web frontends → proposals, request-reply) and their typed replies.

Every command carries the person's own signed token: the proposals service re-checks who they
are, their organization and their role on each command, so a forged or replayed message on the
broker can do no more than that person could over HTTP. ``command_id`` makes a replay return the
stored reply instead of acting twice.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from signoff_contracts.ids import PausePointId, ProposalId
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import Reason
from signoff_contracts.v1.envelope import Envelope
from signoff_contracts.v1.pause_points import PausePointView
from signoff_contracts.v1.proposals import ProposalView


class _Command(Envelope):
    token: str = Field(repr=False, max_length=4096, description="The person's bearer token.")


class ApproveProposal(_Command):
    type: Literal["approval.approve"] = "approval.approve"
    proposal_id: ProposalId


class DeclineProposal(_Command):
    type: Literal["approval.decline"] = "approval.decline"
    proposal_id: ProposalId
    reason: str | None = Field(default=None, max_length=500)


class WithdrawProposal(_Command):
    """The proposer (or a manager) takes a pending proposal back: it becomes ``withdrawn``."""

    type: Literal["approval.withdraw"] = "approval.withdraw"
    proposal_id: ProposalId
    reason: str | None = Field(default=None, max_length=500)


class ReviseProposal(_Command):
    type: Literal["approval.revise"] = "approval.revise"
    proposal_id: ProposalId
    request: dict[str, Any]


class ResolvePausePoint(_Command):
    type: Literal["approval.resolve"] = "approval.resolve"
    pause_point_id: PausePointId
    action: Literal["approve", "decline", "option", "data"]
    option: str | None = Field(default=None, max_length=200)
    data: dict[str, Any] | None = None
    reply: str | None = Field(default=None, max_length=2000)
    #: the person's edit of the pause point's ``payload`` (the payload override)
    payload: dict[str, Any] | None = None


ApprovalCommand = Annotated[
    ApproveProposal | DeclineProposal | ReviseProposal | ResolvePausePoint | WithdrawProposal,
    Field(discriminator="type"),
]
approval_command_adapter: TypeAdapter[ApprovalCommand] = TypeAdapter(ApprovalCommand)

ApprovalResult = Literal[
    "claimed",
    "declined",
    "withdrawn",
    "revised",
    "resolved",
    "already_completed",
    "not_approvable",
    "forbidden",
    "not_found",
    "unauthenticated",
    "invalid",
    "rate_limited",
]


class ApprovalReply(Envelope):
    """The typed answer to every approval command — a rejection included."""

    type: Literal["approval.reply"] = "approval.reply"
    result: ApprovalResult
    http_status: int = Field(description="The status the HTTP API answers for the same result.")
    proposal: ProposalView | None = None
    pause_point: PausePointView | None = None
    outcome: OperationOutcome | None = None
    reason: Reason | None = None
