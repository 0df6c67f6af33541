"""What the client returns: the contracts' own models, and two shapes of its own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.catalogue import OperationInfo as Operation
from signoff_contracts.operations import RenderedPreview
from signoff_contracts.v1 import AuditEntry, ProposalView
from signoff_contracts.v2 import ApprovalReply

__all__ = ["ApprovalReply", "Operation", "Proposal", "ProposalView", "Proposed"]


class Proposed(BaseModel):
    """A stored proposal (``POST /v1/operations/{kind}/propose``) and its fixed preview."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    proposal: ProposalView
    rendered_preview: RenderedPreview | None = None


class Proposal(ProposalView):
    """A proposal with its audit trail (``GET /v1/proposals/{id}``)."""

    audit: list[AuditEntry] = Field(default_factory=list)

    @property
    def decided(self) -> bool:
        """Past ``pending``: a person (or the clock) decided."""
        return self.status.value != "pending"

    @property
    def finished(self) -> bool:
        """Terminal: nothing more will happen to it."""
        return self.status.is_terminal
