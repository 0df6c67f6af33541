"""What the client returns: the contracts' own models, and two shapes of its own."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.operations import RenderedPreview
from signoff_contracts.v1 import ApprovalReply, AuditEntry, ProposalView

__all__ = ["ApprovalReply", "Operation", "Proposal", "ProposalView", "Proposed"]


class Operation(BaseModel):
    """An operation the caller may propose (``GET /v1/operations``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: str
    version: int
    section: str
    resource: str
    effect: Literal["local", "external"]
    title: dict[str, str]
    description: dict[str, str]
    #: the strict JSON Schema of the operation's ``Request``
    request_schema: dict[str, Any]


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
