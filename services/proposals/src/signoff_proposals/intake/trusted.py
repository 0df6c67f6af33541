"""The negative control of the trust boundary: storing a contract the agent made (tests only).

With ``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT`` (refused outside ``SIGNOFF_ENV=test``) a v1
``ProposalRequested`` is stored as the service stored it before it made contracts itself: the
agent's ``arguments`` and ``preview`` (each merely parsed, so two different stories both pass),
its organization and its person, no token, no role, no ``resolve``. It exists so the insider
suite can show the attack — a harmless preview over harmful arguments — succeeding with the
protection off. Without the switch a v1 request never reaches this module.
"""

from __future__ import annotations

import structlog
from pydantic import ValidationError
from signoff_contracts.v1 import ProposalRequested, ProposalRequestReply
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.unit_of_work import unit_of_work

from signoff_proposals.context import Context
from signoff_proposals.intake import store as intake
from signoff_proposals.intake.resolving import Refused
from signoff_proposals.lifecycle import repository as repo

log = structlog.get_logger(__name__)


async def store(ctx: Context, msg: ProposalRequested) -> ProposalRequestReply:
    assert ctx.settings.unsafe.trust_agent_contract, "a negative control, switched off"
    log.warning("proposal.trusting_agent_contract", proposal_id=msg.proposal_id)
    try:
        op = ctx.operations.get(msg.operation_kind, msg.contract_version)
        op.parse_arguments(msg.arguments)
        op.parse_preview(msg.preview)
        new = repo.NewProposal(
            proposal_id=msg.proposal_id,
            organization_id=msg.organization_id,
            requested_by=msg.requested_by,
            conversation_id=msg.conversation_id,
            section=msg.section,
            resource_id=msg.resource_id,
            operation_kind=msg.operation_kind,
            contract_version=msg.contract_version,
            request=msg.request,
            arguments=msg.arguments,
            preview=msg.preview,
        )
        async with unit_of_work(ctx.engine) as tx:
            row = await intake.insert(
                ctx, tx, new, causation_id=msg.message_id, detail={"via": "unsafe_trusted"}
            )
    except (UnknownOperation, ValidationError):
        return intake.invalid_request(msg.proposal_id)
    except Refused as exc:
        return intake.refused(msg.proposal_id, msg.message_id, exc.refusal, exc.reason)
    return intake.accepted(msg.proposal_id, msg.message_id, row)
