"""The reconciler against real PostgreSQL and RabbitMQ: one check per attempt, asked until it
answers, the answer reported once through the outbox."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import aio_pika
import pytest
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import OutcomeReported, ReconciliationRequired
from signoff_reconciler import repository
from signoff_reconciler.app import create_app
from signoff_reconciler.checks import Checker
from signoff_reconciler.settings import ReconcilerGroup, ReconcilerSettings
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations
from signoff_runtime.settings import broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette

pytestmark = pytest.mark.integration


def required(attempt_id: str | None = None, version: int = 1) -> ReconciliationRequired:
    proposal_id = new_id("prp")
    return ReconciliationRequired(
        source="executor",
        correlation_id=proposal_id,
        proposal_id=proposal_id,
        contract_id=new_id("ctr"),
        organization_id="org_test",
        operation_kind="ledger.transfer",
        contract_version=version,
        attempt_id=attempt_id or new_id("att"),
    )


async def publish(amqp_url: str, topology: Topology, body: bytes, message_id: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(topology.name("outcomes"), ensure=False)
        await exchange.publish(
            aio_pika.Message(
                body,
                message_id=message_id,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                user_id=broker_user(amqp_url),
            ),
            routing_key=ROUTING_KEYS["reconciler.required"],
            mandatory=True,
        )


@asynccontextmanager
async def running(settings: ReconcilerSettings, operations: Operations) -> AsyncIterator[Starlette]:
    app = create_app(settings, operations)
    async with app.router.lifespan_context(app):
        yield app


async def check_of(engine: AsyncEngine, attempt_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM reconciler.checks WHERE attempt_id = :a"), {"a": attempt_id}
            )
        ).first()


async def reported(engine: AsyncEngine, proposal_id: str) -> list[OutcomeReported]:
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT body FROM reconciler.outbox WHERE correlation_id = :p "
                    "AND message_type = 'execution.outcome'"
                ),
                {"p": proposal_id},
            )
        ).all()
    return [OutcomeReported.model_validate_json(bytes(r.body)) for r in rows]


async def test_asks_until_the_provider_answers_then_reports_once(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
    transfer: Any,
) -> None:
    message = required()
    success = Succeeded(result={"amount": 5})
    transfer.script[message.attempt_id] = [None, RuntimeError("provider down"), None, success]
    async with running(settings, operations):
        body = message.model_dump_json().encode()
        await publish(amqp_url, topology, body, message.message_id)
        await publish(amqp_url, topology, body, message.message_id)  # redelivered
        # the copy comes once the check is open, so the check names the original as its cause
        await wait_until(lambda: check_of(engine, message.attempt_id), what="the open check")
        again = message.model_copy(update={"message_id": new_id("msg")})  # re-published
        await publish(amqp_url, topology, again.model_dump_json().encode(), again.message_id)
        outcomes = await wait_until(
            lambda: reported(engine, message.proposal_id), what="the reconciled outcome"
        )
        delivered = await wait_until(
            lambda: _drain(amqp_url, topology.name("proposals.outcomes")), what="publication"
        )

    [outcome] = outcomes
    assert outcome.reported_by == "reconciler" and outcome.outcome == success
    assert outcome.contract_id == message.contract_id
    assert outcome.causation_id == message.message_id
    assert [m.message_id for m in delivered] == [outcome.message_id]
    check = await check_of(engine, message.attempt_id)
    assert check.status == "resolved" and check.checks == 4
    assert check.outcome == success.model_dump(mode="json")
    assert transfer.asked[message.attempt_id] == 4  # one check row, however many requests


async def test_unsupported_operation_and_garbage_are_dead_lettered(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
) -> None:
    v9 = required(version=9)
    async with running(settings, operations):
        await publish(amqp_url, topology, v9.model_dump_json().encode(), v9.message_id)
        await publish(amqp_url, topology, b"[]", "msg_garbage")
        taken: list[Any] = []

        async def dead() -> bool:
            taken.extend(await _drain(amqp_url, topology.dlq("reconciler.required")))
            return len(taken) >= 2

        await wait_until(dead, what="two dead letters")

    assert sorted(m.headers["x-signoff-reason"] for m in taken) == [
        "invalid_message",
        "unsupported_version",
    ]
    assert await check_of(engine, v9.attempt_id) is None


async def test_backoff_is_exponential_and_capped_on_the_database_clock(
    engine: AsyncEngine,
    topology: Topology,
    operations: Operations,
) -> None:
    message = required()
    async with engine.begin() as conn:
        assert await repository.record(conn, message)
    group = ReconcilerGroup(base_backoff_s=10, max_backoff_s=25)
    async with _checker(engine, topology, operations, group) as checker:
        gaps = []
        for _ in range(3):
            assert await checker.pass_once() >= 1
            gaps.append(await _gap(engine, message.attempt_id))
            await _make_due(engine, message.attempt_id)
    assert gaps == [10.0, 20.0, 25.0]


async def test_competing_checkers_ask_about_each_attempt_once_per_pass(
    engine: AsyncEngine,
    topology: Topology,
    operations: Operations,
    transfer: Any,
) -> None:
    messages = [required() for _ in range(20)]
    for m in messages:
        transfer.script[m.attempt_id] = [RevisionRequired(reason=Reason(code="never_applied"))]
    async with engine.begin() as conn:
        for m in messages:
            await repository.record(conn, m)
    group = ReconcilerGroup(batch=7)
    async with (
        _checker(engine, topology, operations, group) as a,
        _checker(engine, topology, operations, group) as b,
    ):
        while sum(await asyncio.gather(a.pass_once(), b.pass_once())):
            pass

    assert {m.attempt_id: transfer.asked[m.attempt_id] for m in messages} == {
        m.attempt_id: 1 for m in messages
    }
    for m in messages:
        assert (await check_of(engine, m.attempt_id)).status == "resolved"
        assert len(await reported(engine, m.proposal_id)) == 1


@asynccontextmanager
async def _checker(
    engine: AsyncEngine, topology: Topology, operations: Operations, group: ReconcilerGroup
) -> AsyncIterator[Checker]:
    async with AsyncExitStack() as stack:
        providers = Providers()
        await providers.open(stack, operations)
        yield Checker(
            engine=engine,
            topology=topology,
            operations=operations,
            providers=providers,
            settings=group,
        )


async def _gap(engine: AsyncEngine, attempt_id: str) -> float:
    async with engine.connect() as conn:
        gap = (
            await conn.execute(
                text(
                    "SELECT extract(epoch FROM next_check_at - last_checked_at) "
                    "FROM reconciler.checks WHERE attempt_id = :a"
                ),
                {"a": attempt_id},
            )
        ).scalar_one()
    return round(float(gap), 3)


async def _make_due(engine: AsyncEngine, attempt_id: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE reconciler.checks SET next_check_at = now() WHERE attempt_id = :a"),
            {"a": attempt_id},
        )


async def _drain(amqp_url: str, queue: str) -> list[Any]:
    connection = await aio_pika.connect(amqp_url)
    taken = []
    async with connection:
        channel = await connection.channel()
        q = await channel.get_queue(queue, ensure=False)
        while (msg := await q.get(no_ack=True, fail=False)) is not None:
            taken.append(msg)
    return taken
