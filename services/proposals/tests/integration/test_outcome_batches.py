"""Outcomes recorded a batch at a time (``signoff_runtime.batching``) by the running service.

Which transaction wrote a row is its ``xmin``: the inbox rows, the moved proposals and their audit
rows of one batch share one. To know which reports arrive together, a test holds the lock of a
"gate" proposal: the gate's report blocks its batch in the database, the reports sent meanwhile
wait behind it (``signoff_consumer_batch_waiting``), and releasing the lock lets them through as
one batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import NeedsReconciliation, Succeeded, TerminalFailure
from signoff_contracts.v1 import OutcomeReported
from signoff_proposals.metrics import OUTCOMES_IGNORED
from signoff_runtime.metrics import BATCH_SIZE, BATCH_WAITING, BATCHES_SPLIT, MESSAGES_CONSUMED
from signoff_runtime.testing import wait_until
from sqlalchemy import text

pytestmark = pytest.mark.integration
QUEUE = "proposals.outcomes"


async def _claimed(service) -> tuple[str, str]:
    org = new_id("org")
    pid = await service.pending(org)
    assert (await service.approve_http(pid, await service.approver(org))).status_code == 200
    return pid, (await service.row(pid)).contract_id


def _report(claimed: tuple[str, str], outcome, **kw) -> OutcomeReported:
    pid, contract_id = claimed
    return OutcomeReported(
        proposal_id=pid,
        contract_id=contract_id,
        operation_kind="points.grant",
        outcome=outcome,
        correlation_id=pid,
        **kw,
    )


def _ok(claimed: tuple[str, str]) -> OutcomeReported:
    return _report(claimed, Succeeded(result={"balance": 1}))


def _sizes() -> tuple[float, float]:
    """(batches, reports) the outcome consumer has recorded so far."""
    found = {s.name: s.value for s in next(iter(BATCH_SIZE.labels(queue=QUEUE).collect())).samples}
    return found["signoff_consumer_batch_size_count"], found["signoff_consumer_batch_size_sum"]


async def _lock_waiters(service) -> list[int]:
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
        return [row.pid for row in rows]


@contextlib.asynccontextmanager
async def _gate(service, gate: tuple[str, str]) -> AsyncIterator[None]:
    """Hold the gate proposal's row lock; its report's batch blocks on it until the block ends."""
    async with service.engine.connect() as conn:
        held = await conn.begin()
        await conn.execute(
            text("SELECT 1 FROM proposals.proposals WHERE id = :i FOR UPDATE"), {"i": gate[0]}
        )
        try:
            await service.report(_ok(gate))
            await wait_until(lambda: _lock_waiters(service), what="the gate's batch to block")
            yield
        finally:
            await held.rollback()


async def _waiting(count: int) -> None:
    async def probe() -> bool:
        return BATCH_WAITING.labels(queue=QUEUE)._value.get() == count

    await wait_until(probe, what=f"{count} reports waiting for the gate's batch")


async def _statuses(service, expected: dict[str, str]) -> None:
    async def probe() -> bool:
        found = {p: (await service.row(p)).status for p in expected}
        return found == expected

    await wait_until(probe, what=f"statuses {expected}")


async def _writers(service, table: str, column: str, keys: list[str], where: str = "") -> list[str]:
    """The transactions (``xmin``) that wrote ``table``'s rows whose ``column`` is in ``keys``."""
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text(
                f"SELECT xmin::text AS tx FROM proposals.{table} "
                f"WHERE {column} = ANY(:keys) {where}"
            ),
            {"keys": keys},
        )
        return [row.tx for row in rows]


async def test_a_lone_report_is_recorded_at_once_in_a_batch_of_one(service):
    claimed = await _claimed(service)
    batches, reports = _sizes()
    await service.report(_ok(claimed))
    await _statuses(service, {claimed[0]: "succeeded"})
    assert _sizes() == (batches + 1, reports + 1)  # nothing else was waiting: flushed by itself


async def test_reports_that_arrive_together_are_recorded_in_one_transaction_once_each(service):
    gate, *claimed = [await _claimed(service) for _ in range(5)]
    first = _ok(claimed[0])
    reports = [
        first,
        first,  # a redelivered copy in the same batch: recorded once
        _ok(claimed[1]),
        _report(claimed[2], TerminalFailure(correlation_id="cor_x")),
        # two reports of one proposal in one batch apply in order
        _report(claimed[3], NeedsReconciliation(status_path=f"/v1/proposals/{claimed[3][0]}")),
        _report(claimed[3], Succeeded(result={}), reported_by="reconciler"),
        # an operator's verdict too late to move anything: audited after the move before it
        _report(
            claimed[0],
            TerminalFailure(correlation_id="cor_y"),
            reported_by="operator",
            operator="ops",
            note="checked by hand",
        ),
    ]
    duplicates = OUTCOMES_IGNORED.labels(why="duplicate")._value.get()
    async with _gate(service, gate):
        for report in reports:
            await service.report(report)
        await _waiting(len(reports))
        batches, recorded = _sizes()
    pids = [pid for pid, _ in claimed]
    await _statuses(
        service,
        {gate[0]: "succeeded", pids[0]: "succeeded", pids[1]: "succeeded", pids[3]: "succeeded"}
        | {pids[2]: "failed"},
    )

    assert _sizes() == (batches + 1, recorded + len(reports))
    inbox = await _writers(service, "inbox", "message_id", [r.message_id for r in reports])
    moved = await _writers(service, "proposals", "id", pids)
    audited = await _writers(service, "audit", "proposal_id", pids, "AND action = 'outcome'")
    assert len(inbox) == 6 and len(moved) == 4 and len(audited) == 5
    assert len(set(inbox + moved + audited)) == 1  # one transaction wrote them all

    assert OUTCOMES_IGNORED.labels(why="duplicate")._value.get() == duplicates + 1
    trail = [a.action for a in await service.audit(pids[0])]
    assert trail[-2:] == ["outcome", "operator_outcome_ignored"]
    events = [r.routing_key for r in await service.outbox(pids[0], "proposal.event")]
    assert events.count("proposal.outcome") == 1
    moves = [
        (a.from_status, a.to_status) for a in await service.audit(pids[3]) if a.action == "outcome"
    ]
    assert moves == [("executing", "needs_reconciliation"), ("needs_reconciliation", "succeeded")]


async def test_an_unknown_proposal_in_a_batch_is_dead_lettered_and_its_neighbours_recorded(
    service, amqp_url
):
    gate, *claimed = [await _claimed(service) for _ in range(4)]
    stray = _report((new_id("prp"), "ctr_01stray"), Succeeded(result={}))
    reports = [_ok(claimed[0]), _ok(claimed[1]), stray, _ok(claimed[2])]
    split = BATCHES_SPLIT.labels(queue=QUEUE)._value.get()
    async with _gate(service, gate):
        for report in reports:
            await service.report(report)
        await _waiting(len(reports))
    await _statuses(service, {pid: "succeeded" for pid, _ in [gate, *claimed]})

    [dead] = await drain_queue(amqp_url, service.topology.dlq(QUEUE))
    assert (dead.message_id, dead.headers["x-signoff-reason"]) == (
        stray.message_id,
        "unknown_proposal",
    )
    assert BATCHES_SPLIT.labels(queue=QUEUE)._value.get() == split + 1
    neighbours = [r.message_id for r in reports if r is not stray]
    inbox = await _writers(service, "inbox", "message_id", [*neighbours, stray.message_id])
    assert len(inbox) == 3 and len(set(inbox)) == 3  # each alone; the stray left nothing


async def test_a_lost_connection_requeues_the_report_and_it_is_recorded_once(service):
    gate = await _claimed(service)
    retried = MESSAGES_CONSUMED.labels(queue=QUEUE, result="retried")
    before = retried._value.get()
    async with _gate(service, gate):
        # the batch's connection is cut, then the report's own: requeued, not dead-lettered
        async def requeued() -> bool:
            async with service.engine.connect() as conn:
                for pid in await _lock_waiters(service):
                    await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            return retried._value.get() > before

        await wait_until(requeued, what="the report to be requeued")
    await _statuses(service, {gate[0]: "succeeded"})
    assert [a.action for a in await service.audit(gate[0])].count("outcome") == 1
