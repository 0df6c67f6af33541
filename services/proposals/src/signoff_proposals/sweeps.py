"""The service's background sweeps: expiry, and stuck executions.

**Expiry.** Pending proposals past ``expires_at`` are marked ``expired`` (audit + event) in bounded
batches taken with ``FOR UPDATE SKIP LOCKED``, so several replicas share the work; pending pause
points past theirs are marked ``expired`` the same way. The sweep is
for the record and the live views only: the claim itself refuses a lapsed proposal
(``expires_at > statement_timestamp()``), so nothing can be approved late while the sweep lags.

**Stuck executions.** An ``executing`` proposal with no outcome ``stuck_after_s`` after its claim
— and whose previous contract copy has left the outbox — gets the SAME contract (same
``contract_id``, same signed content, a new ``message_id``) enqueued again, audited
``republished``; the next look waits twice as long (capped at ``stuck_backoff_max_s``). The
executor deduplicates by ``contract_id``, so a copy of a contract it already ran changes nothing.
By then ``execute_by`` has usually passed: an executor that never started the contract answers
``RevisionRequired(approval_stale)``, which ends the proposal safely instead of running an
approval that has gone stale. A contract that was lost therefore surfaces as a typed outcome
rather than as a proposal executing forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from signoff_contracts.status import ProposalStatus

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.lifecycle.domain import SYSTEM_ACTOR
from signoff_proposals.lifecycle.outbox import announce, contract_for, send_contract
from signoff_proposals.metrics import CONTRACTS_REPUBLISHED
from signoff_proposals.pause_points import lifecycle as pause_points

log = structlog.get_logger(__name__)
Loop = Callable[[], Awaitable[None]]


async def expire_once(ctx: Context) -> int:
    async with repo.unit_of_work(ctx.engine) as tx:
        rows = await repo.expire_due(tx, ctx.settings.proposals.expiry_batch)
        for row in rows:
            await repo.write_audit(
                tx,
                row.id,
                actor=SYSTEM_ACTOR,
                action="expired",
                from_status=ProposalStatus.PENDING,
                to_status=ProposalStatus.EXPIRED,
                detail={"noticed_by": "sweep"},
            )
            await announce(ctx, tx, "expired", row)
        paused = await pause_points.expire_due(ctx, tx.conn, ctx.settings.proposals.expiry_batch)
    if rows:
        log.info("proposals.expired", count=len(rows))
    return max(len(rows), paused)


async def republish_once(ctx: Context) -> int:
    group = ctx.settings.proposals
    async with repo.unit_of_work(ctx.engine) as tx:
        rows = await repo.take_stuck(
            tx, group.stuck_batch, group.stuck_after_s, group.stuck_backoff_max_s
        )
        for row in rows:
            contract = contract_for(ctx, row)
            await send_contract(ctx, tx, contract)
            await repo.write_audit(
                tx,
                row.id,
                actor=SYSTEM_ACTOR,
                action="republished",
                detail={
                    "contract_id": row.contract_id,
                    "message_id": contract.message_id,
                    "copy": row.republish_count,
                },
            )
    for row in rows:
        CONTRACTS_REPUBLISHED.labels(kind=row.operation_kind).inc()
        log.warning(
            "proposal.contract_republished",
            proposal_id=row.id,
            contract_id=row.contract_id,
            copy=row.republish_count,
        )
    return len(rows)


def every(name: str, interval_s: float, batch: int, once: Callable[[], Awaitable[int]]) -> Loop:
    """A loop running ``once`` every ``interval_s`` — at once again while batches come back full.

    A failed round (database restarting, say) is logged and retried next interval; the loop
    itself never ends on its own.
    """

    async def loop() -> None:
        while True:
            try:
                done = await once()
            except Exception as exc:
                log.warning("sweep.failed", sweep=name, error=type(exc).__name__)
                done = 0
            if done < batch:
                await asyncio.sleep(interval_s)

    loop.__name__ = name
    return loop
