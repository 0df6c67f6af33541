"""Turning a parsed request into a stored proposal (shared by the endpoint and the assistants)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation, Directory, Membership, Rejected, Scope
from signoff_contracts.v1 import ProposalRequested, ProposalRequestReply
from signoff_runtime.registry import Operations
from signoff_runtime.rpc import Requester, RequestFailed
from signoff_runtime.settings import AmqpSettings, AuthSettings
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)


class ProposalsUnavailable(Exception):
    """No reply in time: the proposal may or may not have been stored."""

    def __init__(self, proposal_id: str) -> None:
        super().__init__(proposal_id)
        self.proposal_id = proposal_id


class NotStored(Rejected):
    """The proposals service refused to store a resolved proposal (a quota, a limit): the
    request itself was fine, so asking the model to correct it would not help."""


@dataclass
class Proposer:
    engine: AsyncEngine
    requester: Requester
    topology: Topology
    operations: Operations
    directory: Directory
    auth: AuthSettings
    amqp: AmqpSettings

    async def propose(
        self,
        op: AnyOperation,
        member: Membership,
        resource_id: str,
        request: Any,
        conversation_id: str | None = None,
        *,
        proposal_id: str | None = None,
    ) -> dict[str, Any]:
        """Resolve, store by request-reply, and return the stored view with its rendering.

        The database connection is given back before the request to the proposals service:
        holding it across that round trip let a burst of proposals drain the pool."""
        scope = Scope(
            organization_id=member.organization_id, section=op.section, resource_id=resource_id
        )
        async with self.engine.connect() as conn:
            resolved = await op.resolve(request, scope, conn)
        # a given id (an idempotency key's) is stored once: the proposals service answers a
        # second request for it with the proposal it already holds
        proposal_id = proposal_id or new_id("prp")
        message = ProposalRequested(
            proposal_id=proposal_id,
            correlation_id=proposal_id,
            source="agent",
            organization_id=member.organization_id,
            requested_by=member.user_id,
            conversation_id=conversation_id,
            section=op.section,
            resource_id=resource_id,
            operation_kind=op.kind,
            contract_version=op.version,
            request=request.model_dump(mode="json"),
            arguments=resolved.arguments.model_dump(mode="json"),
            preview=resolved.preview.model_dump(mode="json"),
        )
        reply = await self._request(message)
        if not reply.accepted or reply.proposal is None:
            reason = reply.reason
            raise NotStored(
                reason.code if reason else "not_stored", **(reason.params if reason else {})
            )
        log.info("proposal.proposed", proposal_id=proposal_id, kind=op.kind)
        rendered = op.render_preview(resolved.preview, member.locale)
        return {
            "proposal": reply.proposal.model_dump(mode="json"),
            "rendered_preview": rendered.model_dump(mode="json"),
        }

    async def _request(self, message: ProposalRequested) -> ProposalRequestReply:
        try:
            response = await self.requester.request(
                message.model_dump_json().encode(),
                exchange=self.topology.name("commands"),
                routing_key=ROUTING_KEYS["proposals.requests"],
                message_id=message.message_id,
                # the answer is matched by this: unique per request (two requests may carry one
                # proposal id — a retry under an idempotency key), as the message id is
                correlation_id=message.message_id,
                message_type=message.type,
                timeout=self.amqp.request_timeout_s,
            )
        except (TimeoutError, RequestFailed) as exc:
            raise ProposalsUnavailable(message.proposal_id) from exc
        return ProposalRequestReply.model_validate_json(response.body)
