"""Revisions, version 1: the proposals service asked the agent to resolve an edited request.

No longer sent. The proposals service now runs an operation's ``resolve`` itself, for proposals
and revisions alike, in the transaction that supersedes the old proposal; the agent has no
``agent.resolve`` queue any more. The types stay, unchanged, because a published version never
loses a message (``tests/contract``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from signoff_contracts.ids import ProposalId
from signoff_contracts.reasons import Reason
from signoff_contracts.v1.envelope import Envelope


class ResolveRequested(Envelope):
    """Resolve ``request`` for the operation and scope of ``proposal_id`` (request-reply)."""

    type: Literal["revision.resolve_requested"] = "revision.resolve_requested"
    proposal_id: ProposalId = Field(description="The pending proposal being revised.")
    organization_id: str = Field(max_length=72)
    requested_by: str = Field(max_length=72, description="The person revising (from the token).")
    section: str = Field(max_length=64)
    resource_id: str = Field(max_length=128)
    operation_kind: str = Field(max_length=128)
    contract_version: int = Field(ge=1)
    request: dict[str, Any]


class ResolveReply(Envelope):
    """The resolved contract for a revision, or why the edited request cannot be proposed."""

    type: Literal["revision.resolve_reply"] = "revision.resolve_reply"
    accepted: bool
    contract_version: int | None = None
    request: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None
    preview: dict[str, Any] | None = None
    reason: Reason | None = None
