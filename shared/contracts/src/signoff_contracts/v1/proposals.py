"""Proposal intake (agent → proposals) and what the proposals service says about a proposal."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from signoff_contracts.ids import ProposalId
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1.envelope import Envelope

#: which check refused a proposal request (see ``ProposalRequestReply``)
Refusal = Literal[
    "rejected", "invalid", "unauthenticated", "forbidden", "rate_limited", "not_stored"
]


class ProposalRequested(Envelope):
    """Version 1: a proposal the *agent* resolved. Superseded by ``v2.ProposalRequested``.

    The agent ran the operation's ``resolve`` and sent ``arguments`` and ``preview`` as two
    separate values, with an organization and a person of its own making: nothing tied what a
    person was shown to what would run. The proposals service now refuses this shape (reason
    ``unsupported_version``) and builds every contract itself from a v2 request; the type stays
    here, unchanged, because a published version never loses a message.
    """

    type: Literal["proposal.requested"] = "proposal.requested"
    proposal_id: ProposalId
    organization_id: str = Field(max_length=72)
    requested_by: str = Field(max_length=72)
    conversation_id: str | None = Field(default=None, max_length=72)
    section: str = Field(max_length=64)
    resource_id: str = Field(max_length=128)
    operation_kind: str = Field(max_length=128)
    contract_version: int = Field(ge=1)
    request: dict[str, Any]
    arguments: dict[str, Any]
    preview: dict[str, Any]
    supersedes: ProposalId | None = Field(
        default=None, description="A pending proposal this one replaces (a revision)."
    )


class ApprovalMark(BaseModel):
    """One person's approval of a proposal, as recorded (who, with which role, when)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    user_id: str
    role: str
    at: AwareDatetime


class ApprovalRequirement(BaseModel):
    """What a proposal needs before it runs: the approval policy in force when it was stored,
    frozen into it (a policy changed later never changes what a shown card needs)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    required: int = Field(ge=1, description="How many distinct people must approve.")
    roles: list[str] | None = Field(
        default=None, description="Only these roles count; None: whoever the operation allows."
    )
    proposer_may_approve: bool = True
    policy_version: int | None = Field(
        default=None, description="The organization's policy version; None: the default."
    )


class ProposalView(BaseModel):
    """A proposal as clients see it: the preview, never the raw arguments."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: ProposalId
    organization_id: str
    requested_by: str
    conversation_id: str | None = None
    section: str
    resource_id: str
    operation_kind: str
    contract_version: int
    preview: dict[str, Any]
    status: ProposalStatus
    created_at: AwareDatetime
    expires_at: AwareDatetime
    decided_by: str | None = None
    decided_at: AwareDatetime | None = None
    decline_reason: str | None = None
    superseded_by: ProposalId | None = None
    outcome: OperationOutcome | None = None
    #: what the proposer asked (the operation's ``Request``, ids of the organization's own
    #: records), so an edit starts from it; ``None`` from writers that predate it
    request: dict[str, Any] | None = None
    #: the approvals recorded so far, oldest first (empty from writers that predate policies)
    approvals: list[ApprovalMark] = Field(default_factory=list)
    #: the approval policy frozen into the proposal; ``None`` from writers that predate it
    requirement: ApprovalRequirement | None = None


class ProposalRequestReply(Envelope):
    """The reply to ``ProposalRequested``: the stored proposal, or why it was refused.

    ``refusal`` says which check refused it, so the agent answers the way it did when it ran
    ``resolve`` itself: ``rejected`` (the operation's ``resolve`` refused the request: the
    model may correct it; HTTP 422 with the reason's code), ``invalid`` (the request does not
    fit the operation: 422), ``unauthenticated`` (401), ``forbidden`` (not a member, or a role
    that may not propose: 403), ``rate_limited`` (429; ``reason.params.retry_after_s``),
    ``not_stored`` (a quota or a conflict: 422). Absent from older writers: read as
    ``not_stored``.
    """

    type: Literal["proposal.request_reply"] = "proposal.request_reply"
    accepted: bool
    proposal: ProposalView | None = None
    reason: Reason | None = None
    refusal: Refusal | None = None


class AuditEntry(BaseModel):
    """One append-only audit event of a proposal."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    at: AwareDatetime
    actor: str = Field(description="A user id, or `system:<service>` for automatic steps.")
    action: str
    from_status: ProposalStatus | None = None
    to_status: ProposalStatus | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class ProposalEvent(Envelope):
    """Something happened to a proposal (topic ``proposal.<event>``). A fact, never a command."""

    type: Literal["proposal.event"] = "proposal.event"
    event: Literal["created", "decided", "executing", "outcome", "superseded", "expired"]
    proposal: ProposalView
