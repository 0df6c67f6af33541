"""The dead-letter archive against real RabbitMQ and PostgreSQL: every letter archived once with
its reason — the consumer's or RabbitMQ's own (at-least-once dead-lettering at the delivery
limit) — and replayed to its queue only, once, recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aio_pika
import pytest
from signoff_contracts.ids import new_id
from signoff_reconciler.app import create_app
from signoff_reconciler.cli import _letter_json, dlq_app
from signoff_reconciler.dead_letters import handlers, replay, repository
from signoff_reconciler.dead_letters.replay import ReplayRefused
from signoff_reconciler.redaction import JWT, REDACTED
from signoff_reconciler.settings import ReconcilerSettings
from signoff_runtime.registry import Operations
from signoff_runtime.senders import Senders
from signoff_runtime.settings import AuthSettings, broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from typer.testing import CliRunner

pytestmark = pytest.mark.integration


@asynccontextmanager
async def archiving(
    settings: ReconcilerSettings, operations: Operations
) -> AsyncIterator[Starlette]:
    group = settings.reconciler.model_copy(update={"archive_dead_letters": True})
    app = create_app(settings.model_copy(update={"reconciler": group}), operations)
    async with app.router.lifespan_context(app):
        yield app


async def publish(
    amqp_url: str, exchange: str, routing_key: str, body: bytes, **props: Any
) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange, ensure=False)
        await target.publish(
            aio_pika.Message(
                body,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                **{"user_id": broker_user(amqp_url), **props},
            ),
            routing_key=routing_key,
            mandatory=True,
        )


async def refuse_until_dead_lettered(amqp_url: str, queue: str, limit: int) -> int:
    """A consumer that fails every delivery (nack + requeue) until the message is gone; how
    often it was delivered (RabbitMQ 3.10 counts each nack toward ``x-delivery-limit``)."""
    deliveries = 0
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        source = await channel.get_queue(queue, ensure=False)

        async def refused() -> bool:
            nonlocal deliveries
            message = await source.get(fail=False)
            if message is None:
                return deliveries > limit
            deliveries += 1
            await message.nack(requeue=True)
            return False

        await wait_until(refused, what="the broker to dead-letter it")
    return deliveries


async def archived(engine: AsyncEngine, queue: str, message_id: str) -> list[Any]:
    return [
        letter
        for letter in await repository.listing(engine, queue=queue, replayed=True, limit=1000)
        if letter.message_id == message_id
    ]


async def test_letters_are_archived_once_with_the_consumers_or_the_brokers_reason(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
) -> None:
    garbage_id, refused_id = new_id("msg"), new_id("msg")
    async with archiving(settings, operations):
        await publish(
            amqp_url,
            topology.name("outcomes"),
            ROUTING_KEYS["reconciler.required"],
            b"not json",
            message_id=garbage_id,
        )
        await publish(
            amqp_url,
            topology.name("outcomes"),
            ROUTING_KEYS["proposals.outcomes"],  # nobody consumes it here but the test
            b'{"hello": 1}',
            message_id=refused_id,
            correlation_id="prp_x",
            type="execution.outcome",
            content_type="application/json",
        )
        deliveries = await refuse_until_dead_lettered(
            amqp_url, topology.name("proposals.outcomes"), topology.delivery_limit
        )
        [garbage] = await wait_until(
            lambda: archived(engine, "reconciler.required", garbage_id), what="the garbage"
        )
        [refused] = await wait_until(
            lambda: archived(engine, "proposals.outcomes", refused_id), what="the refused one"
        )
        # at-least-once dead-lettering may repeat a letter: it is archived once
        copy = aio_pika.Message(b'{"hello": 1}', message_id=refused_id)
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            dlx = await channel.get_exchange(topology.name("dlx"), ensure=False)
            await dlx.publish(copy, routing_key=topology.name("proposals.outcomes"))
        await wait_until(
            lambda: _dlq_empty(amqp_url, topology.dlq("proposals.outcomes")), what="drained"
        )

    assert (garbage.reason, garbage.deliveries, garbage.body) == ("invalid_message", 1, b"not json")
    assert deliveries == topology.delivery_limit + 1
    assert (refused.reason, refused.deliveries) == ("delivery_limit", deliveries)
    assert (refused.correlation_id, refused.message_type) == ("prp_x", "execution.outcome")
    assert refused.headers["x-first-death-queue"] == topology.name("proposals.outcomes")
    assert len(await archived(engine, "proposals.outcomes", refused_id)) == 1


async def _dlq_empty(amqp_url: str, queue: str) -> bool:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return declared.declaration_result.message_count == 0


async def test_a_letter_is_replayed_to_its_own_queue_once_and_recorded(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
) -> None:
    message_id = new_id("msg")
    async with archiving(settings, operations):
        await publish(
            amqp_url,
            topology.name("dlx"),
            topology.name("proposals.outcomes"),
            b'{"fixed": true}',
            message_id=message_id,
            type="execution.outcome",
            headers={"x-signoff-reason": "unknown_proposal", "x-signoff-deliveries": 1},
        )
        [letter] = await wait_until(
            lambda: archived(engine, "proposals.outcomes", message_id), what="archived"
        )

    replayed = await replay.replay(
        engine, amqp_url, topology, letter.id, operator="alice", note="proposal restored"
    )
    with pytest.raises(ReplayRefused, match="already_replayed"):
        await replay.replay(engine, amqp_url, topology, letter.id, operator="bob")
    with pytest.raises(ReplayRefused, match="not_found"):
        await replay.replay(engine, amqp_url, topology, 10**12, operator="bob")

    assert (replayed.replayed_by, replayed.replay_note) == ("alice", "proposal restored")
    assert replayed.replayed_at is not None
    assert [x.id for x in await repository.listing(engine, queue="proposals.outcomes")].count(
        letter.id
    ) == 0  # the default listing shows letters still waiting for a replay
    back = await _take_all(amqp_url, topology.name("proposals.outcomes"))
    assert [(m.body, m.message_id, m.type) for m in back] == [
        (b'{"fixed": true}', message_id, "execution.outcome")
    ]
    headers = {k: v for k, v in back[0].headers.items() if k != "x-delivery-count"}
    # the old reason does not travel on; the original sender does, vouched for by the replayer
    assert headers == {"x-signoff-replay-of": letter.id, "x-signoff-sender": broker_user(amqp_url)}
    assert back[0].user_id == broker_user(amqp_url)
    assert back[0].delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    other = await _take_all(amqp_url, topology.name("reconciler.required"))
    assert other == []  # same exchange, other binding: not fanned out


async def test_a_replay_refused_again_before_its_replay_commits_is_archived_again(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The consumer may refuse a replay again, and the archive see it, before the replay's
    transaction commits (a slow operator's process on a loaded machine): the new letter is
    archived, not taken for an at-least-once duplicate of the one being replayed and acked
    away. Here that archive runs right after the publish, inside the replay's transaction."""
    message_id = new_id("msg")
    async with archiving(settings, operations):
        await publish(
            amqp_url,
            topology.name("dlx"),
            topology.name("agent.events"),
            b'{"type": "proposal.event"}',
            message_id=message_id,
            headers={"x-signoff-reason": "invalid_message", "x-signoff-deliveries": 1},
        )
        [letter] = await wait_until(
            lambda: archived(engine, "agent.events", message_id), what="archived"
        )

    senders = Senders.from_amqp(settings.amqp)
    published = replay._publish
    archiving_again: list[asyncio.Task[bool]] = []

    async def published_then_refused_again(*args: Any) -> None:
        await published(*args)
        [copy] = await _take_all(amqp_url, topology.name("agent.events"))
        again = asyncio.create_task(
            handlers.archive(engine, topology, "agent.events", copy, senders)
        )
        archiving_again.append(again)
        # until the archive is done, or waits for this transaction (then it is the commit's turn)
        await wait_until(
            lambda: _done_or_waiting_for_a_lock(again, engine), what="the archive to decide"
        )

    monkeypatch.setattr(replay, "_publish", published_then_refused_again)
    await replay.replay(engine, amqp_url, topology, letter.id, operator="alice")

    [again] = archiving_again
    assert await again, "the refused replay was taken for a duplicate and dropped"
    rows = await archived(engine, "agent.events", message_id)
    assert [(r.id == letter.id, r.replayed_by) for r in rows] == [(True, "alice"), (False, None)]
    assert rows[1].headers["x-signoff-replay-of"] == letter.id


async def _done_or_waiting_for_a_lock(task: asyncio.Task[bool], engine: AsyncEngine) -> bool:
    if task.done():
        return True
    async with engine.connect() as conn:
        waiting = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
    return bool(waiting)


async def _take_all(amqp_url: str, queue: str) -> list[Any]:
    taken = []
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        source = await channel.get_queue(queue, ensure=False)
        while (message := await source.get(no_ack=True, fail=False)) is not None:
            taken.append(message)
    return taken


async def test_an_archived_approval_command_keeps_no_bearer_token(
    engine: AsyncEngine,
    amqp_url: str,
    topology: Topology,
    settings: ReconcilerSettings,
    operations: Operations,
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = issue_token(AuthSettings(), "usr_someone", "org_someone")
    assert JWT.fullmatch(token), "the pattern must recognise the tokens signoff issues"
    message_id = new_id("msg")
    body = json.dumps(
        {"type": "approval.approve", "token": token, "proposal_id": "prp_x", "note": f"t={token}"}
    ).encode()
    async with archiving(settings, operations):
        await publish(
            amqp_url,
            topology.name("dlx"),
            topology.name("proposals.approvals"),
            body,
            message_id=message_id,
            type="approval.approve",
            headers={"x-signoff-reason": "invalid_message", "x-signoff-detail": f"bad {token}"},
        )
        [letter] = await wait_until(
            lambda: archived(engine, "proposals.approvals", message_id), what="archived"
        )

    assert token not in letter.body.decode() and token not in json.dumps(letter.headers)
    assert json.loads(letter.body)["token"] == REDACTED
    assert json.loads(letter.body)["proposal_id"] == "prp_x"  # the rest is kept for operators
    assert letter.detail is not None and token not in letter.detail
    for variable, value in settings_env.items():
        monkeypatch.setenv(variable, value)
    # the command line runs its own event loop: off this one
    shown = await asyncio.to_thread(CliRunner().invoke, dlq_app, ["show", str(letter.id)])
    assert shown.exit_code == 0, shown.output
    assert token not in shown.output and json.loads(shown.output)["id"] == letter.id
    listed = await asyncio.to_thread(
        CliRunner().invoke, dlq_app, ["list", "--json", "--queue", "proposals.approvals"]
    )
    assert listed.exit_code == 0 and token not in listed.output


def test_printing_redacts_a_letter_archived_before_redaction_existed() -> None:
    token = issue_token(AuthSettings(), "usr_someone", "org_someone")
    old = repository.DeadLetter(
        id=1,
        queue="proposals.approvals",
        reason="invalid_message",
        detail=token,
        deliveries=1,
        message_id="msg_1",
        message_type="approval.approve",
        correlation_id=None,
        content_type="application/json",
        body=json.dumps({"token": token}).encode(),
        headers={"authorization": f"Bearer {token}"},
        dead_at=datetime.now(UTC),
        replayed_at=None,
        replayed_by=None,
        replay_note=None,
    )
    assert token not in json.dumps(_letter_json(old))
