"""Asking the proposals service for a proposal (shared by the endpoint and the assistants).

The agent does not make contracts. It sends a *validated proposal request* — the operation kind
and version, the model-facing ``Request`` it has schema-checked (so the model hears field errors
at once), the resource, the conversation — and who it speaks for (``OnBehalf``): the person's
bearer token, held in memory for their turn or request only, or, for a turn an event started,
the resolved pause point whose answer started it. The proposals service authenticates the
person, runs the operation's ``resolve`` and stores the ``Arguments`` and ``Preview`` of that one
call; the reply is the stored proposal, whose preview is rendered here in the person's locale,
or a typed refusal, raised as ``Rejected`` (the model may correct the request) or ``NotStored``
(it may not: a quota, a role, a rate, a credential).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation, Directory, Locale, Rejected
from signoff_contracts.v1 import ProposalRequestReply
from signoff_contracts.v2 import ProposalRequested
from signoff_runtime.registry import Operations
from signoff_runtime.rpc import Requester, Unanswered
from signoff_runtime.settings import AmqpSettings, AuthSettings
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class OnBehalf:
    """Whom a request to the proposals service speaks for, in a form that service checks:
    a person's bearer token, or the resolved pause point that started an event's turn."""

    token: str | None = None
    resumed_from: str | None = None

    def fields(self) -> dict[str, str | None]:
        return {"token": self.token, "resumed_from": self.resumed_from}


class ProposalsUnavailable(Exception):
    """No reply in time: the proposal may or may not have been stored."""

    def __init__(self, proposal_id: str) -> None:
        super().__init__(proposal_id)
        self.proposal_id = proposal_id


class NotStored(Rejected):
    """The proposals service refused to store the proposal for a reason the request cannot fix
    (a quota, a role, a rate, a credential): asking the model to correct it would not help.
    ``refusal`` names the check (``ProposalRequestReply.refusal``)."""

    def __init__(self, refusal: str, code: str, **params: Any) -> None:
        super().__init__(code, **params)
        self.refusal = refusal


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
        on_behalf: OnBehalf,
        resource_id: str,
        request: BaseModel,
        conversation_id: str | None = None,
        *,
        locale: Locale = "en",
        proposal_id: str | None = None,
    ) -> dict[str, Any]:
        """Ask for the proposal; return the stored view with its rendering in ``locale``."""
        if on_behalf.token is None and on_behalf.resumed_from is None:
            raise NotStored("unauthenticated", "unauthenticated")
        # a given id (an idempotency key's) is stored once: the proposals service answers a
        # second request for it with the proposal it already holds
        proposal_id = proposal_id or new_id("prp")
        message = ProposalRequested(
            proposal_id=proposal_id,
            correlation_id=proposal_id,
            source="agent",
            operation_kind=op.kind,
            contract_version=op.version,
            resource_id=resource_id,
            conversation_id=conversation_id,
            request=request.model_dump(mode="json"),
            **on_behalf.fields(),
        )
        reply = await self._request(message)
        if not reply.accepted or reply.proposal is None:
            reason = reply.reason
            code, params = (reason.code, reason.params) if reason else ("not_stored", {})
            if reply.refusal in ("rejected", "invalid"):
                raise Rejected(code, **params)
            raise NotStored(reply.refusal or "not_stored", code, **params)
        log.info("proposal.proposed", proposal_id=proposal_id, kind=op.kind)
        view = reply.proposal
        rendered = op.render_preview(op.parse_preview(view.preview), locale)
        return {
            "proposal": view.model_dump(mode="json"),
            "rendered_preview": rendered.model_dump(mode="json"),
        }

    async def _request(self, message: ProposalRequested) -> ProposalRequestReply:
        try:
            return await self.requester.ask(
                message,
                ProposalRequestReply,
                self.topology,
                "proposals.requests",
                self.amqp.request_timeout_s,
            )
        except Unanswered as exc:
            raise ProposalsUnavailable(message.proposal_id) from exc
