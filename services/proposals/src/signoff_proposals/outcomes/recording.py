"""Recording what became of an execution contract (``OutcomeReported``).

Idempotent twice over: the inbox row (by ``message_id``, same transaction) drops a redelivered
report, and the conditional UPDATE only moves a proposal that is still executing (or awaiting
reconciliation) under the reported contract — a late or repeated report for a finished proposal
changes nothing and is only logged. The move itself is ``transitions.transition`` from the locked
row's status (its audit row and ``proposal.outcome`` in one more statement). The stored outcome is
the one every later reader sees. An operator's manual resolution (``reported_by="operator"``) is
audited under the operator's name with their note — also when it arrives too late to move anything.
"""

from __future__ import annotations

from typing import Any

import structlog
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import OutcomeReported
from signoff_runtime.consumer import PermanentError
from signoff_runtime.unit_of_work import unit_of_work

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.transitions import transition
from signoff_proposals.metrics import OUTCOMES_IGNORED

log = structlog.get_logger(__name__)


async def record(ctx: Context, msg: OutcomeReported) -> bool:
    """Apply ``msg``; ``True`` if the proposal moved."""
    async with unit_of_work(ctx.engine) as tx:
        first, current = await repo.lock_delivered(tx.conn, msg.message_id, msg.proposal_id)
        if current is None:
            raise PermanentError("unknown_proposal", f"proposal_id={msg.proposal_id}")
        if not first:
            return _ignored("duplicate", msg)
        if current.contract_id != msg.contract_id:
            return _ignored("other_contract", msg, current.status)
        target = domain.status_for_outcome(msg.outcome)
        sources = domain.outcome_sources(target)
        if ProposalStatus(current.status) not in sources:
            if msg.reported_by == "operator":  # the verdict is evidence even if it moves nothing
                await repo.write_audit(
                    tx,
                    msg.proposal_id,
                    actor=_actor(msg),
                    action="operator_outcome_ignored",
                    detail={**_detail(msg), "status": current.status},
                )
            return _ignored("not_in_progress", msg, current.status)
        moved = await transition(
            ctx,
            tx,
            msg.proposal_id,
            source=ProposalStatus(current.status),
            target=target,
            actor=_actor(msg),
            values={"outcome": msg.outcome.model_dump(mode="json"), "outcome_at": repo.DB_CLOCK},
            detail=_detail(msg),
            causation_id=msg.message_id,
        )
        assert moved is not None, "the row is locked and was in a source status"
    log.info("proposal.outcome", proposal_id=msg.proposal_id, status=target.value)
    return True


def _actor(msg: OutcomeReported) -> str:
    """``operator:<name>`` for an operator's manual resolution, else ``system:<service>``."""
    if msg.reported_by == "operator":
        return f"operator:{msg.operator or 'unknown'}"
    return f"system:{msg.reported_by}"


def _detail(msg: OutcomeReported) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "outcome": msg.outcome.type,
        "contract_id": msg.contract_id,
        "message_id": msg.message_id,
    }
    if msg.reported_by == "operator":
        detail.update(reported_by="operator", operator=msg.operator, note=msg.note)
    return detail


def _ignored(why: str, msg: OutcomeReported, status: str | None = None) -> bool:
    OUTCOMES_IGNORED.labels(why=why).inc()
    log.info(
        "outcome.ignored",
        why=why,
        proposal_id=msg.proposal_id,
        message_id=msg.message_id,
        outcome=msg.outcome.type,
        status=status,
    )
    return False
