"""The reply to an approval command, version 2: approvals that accumulate.

An approval policy may need more than one person (two managers for a large refund), so an
approval can now be *recorded* without claiming the proposal: ``approval_recorded``, with the
counts. A new result value is a breaking change for readers of version 1 (they would reject it),
so the reply is a new version beside ``v1.ApprovalReply``; the commands are unchanged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import Reason
from signoff_contracts.v1.envelope import Envelope
from signoff_contracts.v1.pause_points import PausePointView
from signoff_contracts.v1.proposals import ProposalView

ApprovalResult = Literal[
    "claimed",
    "approval_recorded",
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


class ApprovalCount(BaseModel):
    """How far a proposal is from its quorum: ``recorded`` of ``required`` distinct people."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    recorded: int = Field(ge=0)
    required: int = Field(ge=1)


class ApprovalReply(Envelope):
    """The typed answer to every approval command — a rejection included.

    ``claimed``: this approval completed the quorum and the contract was made;
    ``approval_recorded``: it counted, and ``approvals`` says how many more are needed (a
    person's repeated approval is answered the same way and counts once).
    """

    type: Literal["approval.reply"] = "approval.reply"
    version: int = 2
    result: ApprovalResult
    http_status: int = Field(description="The status the HTTP API answers for the same result.")
    proposal: ProposalView | None = None
    pause_point: PausePointView | None = None
    outcome: OperationOutcome | None = None
    reason: Reason | None = None
    approvals: ApprovalCount | None = Field(
        default=None, description="With claimed and approval_recorded: the counts."
    )
