"""Version 2 of the messages whose shape broke: the agent's requests to the proposals service,
and the approval reply (a result for approvals that accumulate under a policy).

Only the messages that changed are here; every other message is still version 1. A reader
tells the versions apart by the envelope's ``version``.
"""

from signoff_contracts.v1.envelope import Envelope
from signoff_contracts.v2.approvals import ApprovalCount, ApprovalReply, ApprovalResult
from signoff_contracts.v2.requests import PausePointRequested, ProposalRequested

#: every message type of this version, by its ``type`` tag (schemas are exported from here)
MESSAGES: dict[str, type[Envelope]] = {
    model.model_fields["type"].default: model
    for model in (ProposalRequested, PausePointRequested, ApprovalReply)
}

__all__ = [
    "MESSAGES",
    "ApprovalCount",
    "ApprovalReply",
    "ApprovalResult",
    "PausePointRequested",
    "ProposalRequested",
]
