"""The service's background sweeps: expiry, and stuck executions.

**Expiry.** Pending proposals past ``expires_at`` are marked ``expired`` (audit + event) in bounded
batches taken with ``FOR UPDATE SKIP LOCKED``, so several replicas share the work — by
``transitions.expire``, the same code a decision uses when it finds a proposal lapsed; pending
pause points past theirs are marked ``expired`` the same way. The sweep is for the record and the
live views only: the claim itself refuses a lapsed proposal
(``expires_at > statement_timestamp()``), so nothing can be approved late while the sweep lags.

**Stuck executions.** An ``executing`` proposal with no outcome ``stuck_after_s`` after its claim —
and whose previous contract copy has left the outbox — gets the SAME contract (same ``contract_id``,
same signed content, a new ``message_id``) enqueued again, audited ``republished`` (one statement
for the batch's audit rows and copies); the next look waits twice as long (capped at
``stuck_backoff_max_s``). The executor deduplicates by ``contract_id``, so a copy of a contract it
already ran changes nothing. By then ``execute_by`` has usually passed: an executor that never
started the contract answers ``RevisionRequired(approval_stale)``, which ends the proposal safely
instead of running an approval that has gone stale. A contract that was lost therefore surfaces as a
typed outcome rather than as a proposal executing forever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from signoff_contracts.status import ProposalStatus
from signoff_runtime.unit_of_work import UnitOfWork, unit_of_work
from sqlalchemy import Row, exists, func, select, update

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import outbox
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import SYSTEM_ACTOR
from signoff_proposals.lifecycle.repository import AuditEntry
from signoff_proposals.lifecycle.transitions import expire
from signoff_proposals.metrics import CONTRACTS_REPUBLISHED, SWEEP_SECONDS
from signoff_proposals.pause_points import lifecycle as pause_points
from signoff_proposals.tables import outbox as outbox_table
from signoff_proposals.tables import proposals

log = structlog.get_logger(__name__)
Loop = Callable[[], Awaitable[None]]


async def expire_once(ctx: Context) -> int:
    batch = ctx.settings.proposals.expiry_batch
    async with unit_of_work(ctx.engine) as tx:
        rows = await expire(ctx, tx, noticed_by="sweep", batch=batch)
        paused = await pause_points.expire(ctx, tx, batch=batch)
    if rows:
        log.info("proposals.expired", count=len(rows))
    return max(len(rows), paused)


async def republish_once(ctx: Context) -> int:
    group = ctx.settings.proposals
    async with unit_of_work(ctx.engine) as tx:
        rows = await take_stuck(
            tx, group.stuck_batch, group.stuck_after_s, group.stuck_backoff_max_s
        )
        copies = [outbox.contract(ctx, row) for row in rows]
        audit = [
            AuditEntry(
                row.id,
                SYSTEM_ACTOR,
                "republished",
                detail={
                    "contract_id": row.contract_id,
                    "message_id": signed.message_id,
                    "copy": row.republish_count,
                },
            )
            for row, (signed, _) in zip(rows, copies, strict=True)
        ]
        if rows:
            await outbox.enqueue(ctx, tx, [message for _, message in copies], audit=audit)
    for row in rows:
        CONTRACTS_REPUBLISHED.labels(kind=row.operation_kind).inc()
        log.warning(
            "proposal.contract_republished",
            proposal_id=row.id,
            contract_id=row.contract_id,
            copy=row.republish_count,
        )
    return len(rows)


async def take_stuck(
    tx: UnitOfWork, batch: int, after_s: float, max_backoff_s: float
) -> Sequence[Row[Any]]:
    """Executing proposals quiet past their bound whose last contract copy has been sent.

    Each taken row's next look is pushed out ``after_s * 2^count`` (capped): a per-row back-off,
    so an executor that is down for an hour gets a handful of copies, not thousands. The status
    stays ``executing``: this is not a transition.
    """
    executing = ProposalStatus.EXECUTING.value
    copy_waiting = exists().where(
        outbox_table.c.sent_at.is_(None),
        outbox_table.c.correlation_id == proposals.c.id,
        outbox_table.c.message_type == "execution.contract",
    )
    due = (
        select(proposals.c.id)
        .where(proposals.c.status == executing, proposals.c.republish_after <= repo.DB_CLOCK)
        .where(~copy_waiting)
        .order_by(proposals.c.republish_after)
        .limit(batch)
        .with_for_update(of=proposals, skip_locked=True)
        .cte("due")
    )
    backoff = func.least(max_backoff_s, after_s * func.power(2, proposals.c.republish_count + 1))
    stmt = (
        update(proposals)
        .where(proposals.c.id == due.c.id, proposals.c.status == executing)
        .values(
            republish_count=proposals.c.republish_count + 1,
            republish_after=repo.DB_CLOCK + func.make_interval(0, 0, 0, 0, 0, 0, backoff),
        )
        .returning(*proposals.c, repo.origin_trace())
    )
    return (await tx.conn.execute(stmt)).all()


def every(name: str, interval_s: float, batch: int, once: Callable[[], Awaitable[int]]) -> Loop:
    """A loop running ``once`` every ``interval_s`` — at once again while batches come back full.

    A failed round (database restarting, say) is logged and retried next interval; the loop
    itself never ends on its own. A round that changed something is timed (``SWEEP_SECONDS``).
    """

    async def loop() -> None:
        while True:
            started = time.perf_counter()
            try:
                done = await once()
            except Exception as exc:
                log.warning("sweep.failed", sweep=name, error=type(exc).__name__)
                done = 0
            if done:
                SWEEP_SECONDS.labels(sweep=name).observe(time.perf_counter() - started)
            if done < batch:
                await asyncio.sleep(interval_s)

    loop.__name__ = name
    return loop
