"""Recording what became of execution contracts (``OutcomeReported``), a batch at a time.

Idempotent twice over: the inbox row (by ``message_id``, same transaction) drops a redelivered
report, and the conditional UPDATE only moves a proposal that is still executing (or awaiting
reconciliation) under the reported contract — a late or repeated report for a finished proposal
changes nothing and is only logged. The moves themselves are ``transitions.transition_each`` from
the locked rows' statuses (their audit rows and ``proposal.outcome`` events in one more
statement). The stored outcome is the one every later reader sees. An operator's manual
resolution (``reported_by="operator"``) is audited under the operator's name with their note —
also when it arrives too late to move anything.

``record_all`` takes the reports the consumer's batch holds (``signoff_runtime.batching``), all
in the caller's transaction: one statement for their inbox rows and the locks of their proposals
(in id order), one UPDATE, one statement of audit rows and events — three for one report or
thirty. Reports in a batch apply in their order, each seeing the status the one before left
(``needs_reconciliation`` then ``succeeded`` both move); a copy of a report already in the batch
is a duplicate. A report for a proposal this service does not know fails the whole batch
(``unknown_proposal``): the consumer then records each report alone, and dead-letters that one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import structlog
from signoff_contracts.status import ProposalStatus
from signoff_contracts.v1 import OutcomeReported
from signoff_runtime.consumer import PermanentError
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.repository import AuditEntry
from signoff_proposals.lifecycle.transitions import Move, transition_each
from signoff_proposals.metrics import OUTCOMES_IGNORED

log = structlog.get_logger(__name__)


async def record(ctx: Context, msg: OutcomeReported) -> bool:
    """Apply ``msg`` in a transaction of its own; ``True`` if the proposal moved."""
    async with unit_of_work(ctx.engine) as tx:
        [moved] = await record_all(ctx, tx, [msg])
    return moved


async def record_all(ctx: Context, tx: UnitOfWork, msgs: Sequence[OutcomeReported]) -> list[bool]:
    """Apply ``msgs`` in order on ``tx``; for each, ``True`` if it moved its proposal."""
    fresh, rows = await repo.lock_delivered(
        tx.conn, [m.message_id for m in msgs], [m.proposal_id for m in msgs]
    )
    status = {pid: ProposalStatus(row["status"]) for pid, row in rows.items()}
    #: what each report writes, in rounds: a proposal's k-th write goes in round k, so its
    #: trail keeps the reports' order (one round unless a batch has two reports of one proposal)
    rounds: list[list[Move | AuditEntry]] = []
    writes: dict[str, int] = {}
    moved: list[bool] = []
    for msg in msgs:
        row = rows.get(msg.proposal_id)
        if row is None:
            raise PermanentError("unknown_proposal", f"proposal_id={msg.proposal_id}")
        if msg.message_id not in fresh:
            moved.append(_ignored(tx, "duplicate", msg))
            continue
        fresh.discard(msg.message_id)  # a second copy in this batch is a duplicate too
        current = status[msg.proposal_id]
        if row["contract_id"] != msg.contract_id:
            moved.append(_ignored(tx, "other_contract", msg, current))
            continue
        write = _write(msg, current)
        if write is None:
            moved.append(_ignored(tx, "not_in_progress", msg, current))
            continue
        turn = writes.get(msg.proposal_id, 0)
        writes[msg.proposal_id] = turn + 1
        if turn == len(rounds):
            rounds.append([])
        rounds[turn].append(write)
        if isinstance(write, Move):
            status[msg.proposal_id] = write.target
            tx.after_commit(partial(_logged, msg.proposal_id, write.target))
        else:
            _ignored(tx, "not_in_progress", msg, current)
        moved.append(isinstance(write, Move))
    for round_ in rounds:
        audits = [w for w in round_ if isinstance(w, AuditEntry)]
        if audits:
            await tx.conn.execute(repo.audit_insert(audits))
        moves = [w for w in round_ if isinstance(w, Move)]
        if moves:
            done = await transition_each(ctx, tx, moves)
            assert None not in done, "the rows are locked and in a source status"
    return moved


def _write(msg: OutcomeReported, current: ProposalStatus) -> Move | AuditEntry | None:
    """What ``msg`` writes on a proposal in ``current``: its move, or — an operator's verdict
    that moves nothing is evidence all the same — its audit row; ``None``: nothing."""
    target = domain.status_for_outcome(msg.outcome)
    if current in domain.outcome_sources(target):
        return Move(
            msg.proposal_id,
            source=current,
            target=target,
            actor=_actor(msg),
            values={"outcome": msg.outcome.model_dump(mode="json"), "outcome_at": repo.DB_CLOCK},
            detail=_detail(msg),
            causation_id=msg.message_id,
        )
    if msg.reported_by == "operator":
        detail = {**_detail(msg), "status": current.value}
        return AuditEntry(msg.proposal_id, _actor(msg), "operator_outcome_ignored", detail=detail)
    return None


def _logged(proposal_id: str, status: ProposalStatus) -> None:
    log.info("proposal.outcome", proposal_id=proposal_id, status=status.value)


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


def _ignored(
    tx: UnitOfWork, why: str, msg: OutcomeReported, status: ProposalStatus | None = None
) -> bool:
    """Count and log, once committed, a report that moves nothing; ``False``."""

    def counted() -> None:
        OUTCOMES_IGNORED.labels(why=why).inc()
        log.info(
            "outcome.ignored",
            why=why,
            proposal_id=msg.proposal_id,
            message_id=msg.message_id,
            outcome=msg.outcome.type,
            status=None if status is None else status.value,
        )

    tx.after_commit(counted)
    return False
