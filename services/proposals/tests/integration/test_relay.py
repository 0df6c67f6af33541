"""The outbox relay on the proposals outbox: never loses a contract, never hides a bad route."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import aio_pika
import asyncpg
import pytest
from proposals_testkit import KIND, SECTION, drain_queue, forget_unsent_outbox
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_proposals.tables import outbox
from signoff_runtime.outbox import Outgoing, enqueue
from signoff_runtime.relay import BROKER_FAULT_S, OutboxRelay
from signoff_runtime.signing import sign
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import text

pytestmark = pytest.mark.integration


class KilledBeforeMarking(OutboxRelay):
    """A relay that dies after the broker confirmed its publishes, before marking them sent."""

    async def _mark(self, conn, sent, failed):
        raise RuntimeError("killed between publish-confirm and mark-sent")


def _contract(settings) -> ExecutionContract:
    pid = new_id("prp")
    now = datetime.now(UTC)
    return sign(
        ExecutionContract(
            correlation_id=pid,
            contract_id=new_id("ctr"),
            proposal_id=pid,
            organization_id="org_1",
            section=SECTION,
            resource_id="acc_1",
            operation_kind=KIND,
            contract_version=1,
            arguments={
                "account_id": "acc_1",
                "occasion": "goodwill",
                "plan": "basic",
                "amount_cents": 500,
            },
            approved_by="usr_2",
            approved_at=now,
            execute_by=now + timedelta(minutes=5),
        ),
        settings.contracts,
    )


async def _enqueue(engine, topology, message, routing_key: str) -> None:
    async with engine.begin() as conn:
        await enqueue(conn, outbox, [Outgoing(message, topology.name("contracts"), routing_key)])


async def _row(engine, message_id: str):
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM proposals.outbox WHERE message_id = :m"), {"m": message_id}
            )
        ).one()


async def _sent_by(task: asyncio.Task[None], engine, message_id: str, what: str) -> None:
    """Wait until the row of ``message_id`` is marked sent by the relay running as ``task``
    (failing at once if the relay died)."""

    async def sent():
        if task.done():
            raise AssertionError(f"the relay died: {task.exception()!r}")
        return (await _row(engine, message_id)).sent_at

    await wait_until(sent, what=what)


@contextlib.asynccontextmanager
async def _running(relay: OutboxRelay):
    task = asyncio.create_task(relay.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_relay_killed_after_the_confirm_publishes_again_and_loses_nothing(
    engine, amqp_url, topology, settings
):
    await forget_unsent_outbox(engine)
    contract = _contract(settings)
    await _enqueue(engine, topology, contract, ROUTING_KEYS["executor.contracts"])

    with pytest.raises(RuntimeError, match="killed"):
        await asyncio.wait_for(KilledBeforeMarking(engine, outbox, amqp_url, topology).run(), 15)
    assert (await _row(engine, contract.message_id)).sent_at is None

    async with _running(OutboxRelay(engine, outbox, amqp_url, topology, poll_s=0.1)):

        async def sent():
            return (await _row(engine, contract.message_id)).sent_at is not None

        await wait_until(sent, what="the row to be marked sent")

    copies = await drain_queue(amqp_url, topology.name("executor.contracts"), at_least=2)
    assert len(copies) == 2  # delivered twice — at least once, never zero
    assert {m.message_id for m in copies} == {contract.message_id}
    assert all(ExecutionContract.model_validate_json(m.body) == contract for m in copies)


async def test_a_publish_nobody_is_bound_to_raises_and_stays_in_the_outbox(
    engine, amqp_url, topology, settings
):
    await forget_unsent_outbox(engine)
    contract = _contract(settings)
    await _enqueue(engine, topology, contract, "nobody.listens.here")

    async with _running(OutboxRelay(engine, outbox, amqp_url, topology, poll_s=0.1)):

        async def failed():
            return (await _row(engine, contract.message_id)).last_error

        error = await wait_until(failed, what="the publish to fail")

    row = await _row(engine, contract.message_id)
    assert row.sent_at is None and row.attempts >= 1
    assert "NO_ROUTE" in error, error
    async with engine.connect() as conn:
        later = (
            await conn.execute(
                text("SELECT available_at > now() FROM proposals.outbox WHERE message_id = :m"),
                {"m": contract.message_id},
            )
        ).scalar_one()
    assert later  # backed off, not spinning


async def test_rows_naming_a_missing_exchange_back_off_alone_and_the_relay_lives_on(
    engine, amqp_url, topology, settings
):
    """Rows naming a missing exchange back off without being published: the broker would close
    the channel (failing every publish beside them) and then the connection. The good row beside
    them is sent without a back-off, on the connection the relay had from the start."""
    await forget_unsent_outbox(engine)
    bad = [_contract(settings) for _ in range(4)]
    good = _contract(settings)
    ids = [c.message_id for c in bad]
    relay = OutboxRelay(engine, outbox, amqp_url, topology, poll_s=0.1)

    async with _running(relay) as task:

        async def connected():
            return relay._connection if relay._channel is not None else None

        first = await wait_until(connected, what="the relay's connection")
        async with engine.begin() as conn:
            # two missing exchanges, the good row between them (one round takes all five)
            await enqueue(
                conn,
                outbox,
                [
                    Outgoing(c, f"missing-{new_id('x')}-{n % 2}.events", "nowhere")
                    for n, c in enumerate(bad[:2])
                ]
                + [Outgoing(good, topology.name("contracts"), ROUTING_KEYS["executor.contracts"])]
                + [Outgoing(c, f"missing-{new_id('x')}.events", "nowhere") for c in bad[2:]],
            )

        async def settled():
            if task.done():
                raise AssertionError(f"the relay died: {task.exception()!r}")
            async with engine.connect() as conn:
                backed_off = (
                    await conn.execute(
                        text(
                            "SELECT count(*) FROM proposals.outbox WHERE message_id = ANY(:m) "
                            "AND sent_at IS NULL AND attempts >= 1 AND available_at > now() "
                            "AND last_error LIKE '%NOT_FOUND%'"
                        ),
                        {"m": ids},
                    )
                ).scalar_one()
            return backed_off == len(bad) and (await _row(engine, good.message_id)).sent_at

        await wait_until(settled, what="the bad rows backed off and the good row sent")
        assert not task.done()
        assert relay._connection is first  # never closed by the broker, nor opened again
        assert first is not None and not first.is_closed

    row = await _row(engine, good.message_id)
    assert row.last_error is None, row.last_error  # never backed off for the bad rows' fault
    assert row.attempts == 1  # published once: never cut short by the bad rows' channel
    copies = await drain_queue(amqp_url, topology.name("executor.contracts"))
    assert good.message_id in {m.message_id for m in copies}


class MarkingFailsOnce(OutboxRelay):
    """A relay whose first marking meets a database connection asyncpg no longer follows (seen
    once in a service: ``back_off`` raised this on every restart and nothing was published)."""

    failures = 0

    async def _mark(self, conn, sent, failed):
        if not self.failures:
            self.failures += 1
            raise asyncpg.InternalClientError("got result for unknown protocol state 3")
        await super()._mark(conn, sent, failed)


class KilledUntilMended(OutboxRelay):
    """A relay that raises (a bug) when it marks rows, until ``mended``."""

    mended = False

    async def _mark(self, conn, sent, failed):
        if not self.mended:
            raise RuntimeError("killed before marking")
        await super()._mark(conn, sent, failed)


async def test_a_broken_relay_connection_is_opened_again_and_a_restart_starts_afresh(
    engine, amqp_url, topology, settings
):
    await forget_unsent_outbox(engine)
    contract = _contract(settings)
    await _enqueue(engine, topology, contract, ROUTING_KEYS["executor.contracts"])
    relay = MarkingFailsOnce(engine, outbox, amqp_url, topology, poll_s=0.1)

    async with _running(relay) as task:
        await _sent_by(task, engine, contract.message_id, "the row sent on a new connection")
    assert relay.failures == 1
    await drain_queue(amqp_url, topology.name("executor.contracts"))

    # a run that raised (a bug) leaves nothing behind that the service's restart raises again
    killed = KilledUntilMended(engine, outbox, amqp_url, topology, poll_s=0.1)
    second = _contract(settings)
    await _enqueue(engine, topology, second, ROUTING_KEYS["executor.contracts"])
    with pytest.raises(RuntimeError, match="killed"):
        await asyncio.wait_for(killed.run(), 15)
    killed.mended = True  # the fault is gone: the restart (same object, as a service's) publishes
    async with _running(killed) as task:
        await _sent_by(task, engine, second.message_id, "the restarted relay to send the row")
    await drain_queue(amqp_url, topology.name("executor.contracts"), at_least=2)


async def test_a_row_the_broker_nacks_again_and_again_goes_out_within_seconds_of_recovery(
    engine, amqp_url, topology, settings
):
    """A nack is the broker's passing trouble (a quorum queue electing a leader, a full queue),
    not the row's: however often a row was refused, it waits at most ``BROKER_FAULT_S`` before
    the next publish. (One exponential back-off for every failure made rows nacked through a
    node's restart wait a minute after the broker recovered.)"""
    await forget_unsent_outbox(engine)
    exchange, queue = f"nack-{new_id('x')}", f"nack-{new_id('q')}"
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        ex = await channel.declare_exchange(exchange, "direct", auto_delete=True)
        full = await channel.declare_queue(
            queue, auto_delete=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
        )
        await full.bind(ex, "full")
        await ex.publish(aio_pika.Message(b"{}"), routing_key="full")  # the queue is full now
        contract = _contract(settings)
        async with engine.begin() as conn:
            await enqueue(conn, outbox, [Outgoing(contract, exchange, "full")])
            # a long history of refusals: the old back-off would wait a minute now
            await conn.execute(
                text("UPDATE proposals.outbox SET attempts = 9 WHERE message_id = :m"),
                {"m": contract.message_id},
            )

        async with _running(OutboxRelay(engine, outbox, amqp_url, topology, poll_s=0.1)):

            async def nacked():
                row = await _row(engine, contract.message_id)
                return row.attempts >= 11 and row

            row = await wait_until(nacked, timeout=20, what="two nacks of the row")
            assert "Nack" in row.last_error, row.last_error
            async with engine.connect() as conn:
                wait_s = (
                    await conn.execute(
                        text(
                            "SELECT extract(epoch FROM available_at - now()) FROM proposals.outbox "
                            "WHERE message_id = :m"
                        ),
                        {"m": contract.message_id},
                    )
                ).scalar_one()
            assert wait_s <= BROKER_FAULT_S, wait_s  # backed off briefly, not for a minute

            await full.purge()  # the broker recovers: the row goes out at its next try

            async def sent():
                return (await _row(engine, contract.message_id)).sent_at

            await wait_until(sent, timeout=3 * BROKER_FAULT_S, what="the row sent after recovery")
        copies = [m async for m in _drained(full)]
        # auto-delete goes with a queue's last consumer, and this one never had one
        await full.delete(if_unused=False, if_empty=False)
        await ex.delete()
        assert contract.message_id in {m.message_id for m in copies}


async def _drained(
    queue: aio_pika.abc.AbstractQueue,
) -> AsyncIterator[aio_pika.abc.AbstractMessage]:
    while (message := await queue.get(no_ack=True, fail=False)) is not None:
        yield message


async def test_a_fact_nobody_reads_yet_is_sent_not_kept(engine, amqp_url, topology, settings):
    """A fact (``events``) whose routing key no queue is bound to has no reader yet: published
    without ``mandatory``, confirmed and marked sent, not left failing in the outbox."""
    await forget_unsent_outbox(engine)
    fact = _contract(settings)
    async with engine.begin() as conn:
        await enqueue(conn, outbox, [Outgoing(fact, topology.name("events"), "proposal.unread")])

    async with _running(OutboxRelay(engine, outbox, amqp_url, topology, poll_s=0.1)):

        async def sent():
            return (await _row(engine, fact.message_id)).sent_at is not None

        await wait_until(sent, what="the fact to be marked sent")

    row = await _row(engine, fact.message_id)
    assert row.last_error is None and row.attempts == 1, (row.last_error, row.attempts)
