"""Proposal intake (agent → proposals) and what the proposals service says about a proposal."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from signoff_contracts.ids import ProposalId
from signoff_contracts.outcomes import OperationOutcome
from signoff_contracts.reasons import Reason
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1.envelope import Envelope


class ProposalRequested(Envelope):
    """Store this resolved proposal (request-reply). Idempotent by ``proposal_id``.

    The agent has already run the operation's ``resolve``: ``arguments`` and ``preview`` are the
    frozen contract, ``request`` is what the model (or machine client) asked for, kept so a
    revision can start from it.
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


class ProposalRequestReply(Envelope):
    """The reply to ``ProposalRequested``: the stored proposal, or why it was refused."""

    type: Literal["proposal.request_reply"] = "proposal.request_reply"
    accepted: bool
    proposal: ProposalView | None = None
    reason: Reason | None = None


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
