"""Notifications: signed webhooks, retries and the dead state, a restart, Slack blocks, e-mail.

Everything real: the service in-process on the test's PostgreSQL and RabbitMQ, a webhook
receiver on a local socket that verifies each signature, and ``aiosmtpd`` as the mail server.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import aio_pika
import httpx
import pytest
import pytest_asyncio
from faststream.rabbit import RabbitBroker
from notify_receivers import Mail, Mailbox, Receiver
from proposals_testkit import Harness, forget_unsent_outbox
from proposals_toy import build, context
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ProposalEvent, ReconciliationChecked
from signoff_proposals.app import create_app
from signoff_proposals.notifications import bindings, enqueue, signing
from signoff_proposals.notifications.settings import NotifyGroup
from signoff_proposals.notifications.tables import subscriptions
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import broker_user
from signoff_runtime.testing import never, wait_until
from signoff_runtime.testing.processes import free_port
from signoff_runtime.testing.statements import statements
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import delete, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

pytestmark = pytest.mark.integration

WEB = "http://web.test"
ATTEMPTS = 3


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox(free_port()) as box:
        yield box


@pytest.fixture
def settings(settings: ProposalsSettings, mailbox: Mailbox) -> ProposalsSettings:
    notify = NotifyGroup(
        web_url=WEB,
        smtp_port=mailbox.controller.port,
        interval_s=0.05,
        backoff_base_s=0.1,
        max_attempts=ATTEMPTS,
        send_timeout_s=2.0,
        # the test operation's proposals live an hour: the reminder is due two seconds in
        reminder_before_s=3600 - 2,
    )
    return settings.model_copy(update={"notify": notify})


@pytest_asyncio.fixture(loop_scope="session")
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    yield found
    await found.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def subscribe(
    service: Harness, org: str, url: str, *, events: list[str], fmt: str = "signoff"
) -> dict[str, Any]:
    manager = await service.approver(org, "manager")
    made = await service.http.post(
        "/v1/webhooks", json={"url": url, "format": fmt, "events": events}, headers=bearer(manager)
    )
    assert made.status_code == 201, made.text
    return dict(made.json())


async def deliveries(service: Harness, org: str) -> list[Any]:
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT * FROM proposals.notification_deliveries "
                "WHERE organization_id = :o ORDER BY id"
            ),
            {"o": org},
        )
        return list(rows)


async def test_a_receiver_verifies_each_signed_event_and_only_managers_subscribe(
    service: Harness, receiver: Receiver
) -> None:
    org = new_id("org")
    await receiver.start()
    made = await subscribe(service, org, f"{receiver.url}/hook", events=["created", "decided"])
    receiver.secret = made["secret"]
    assert made["secret"].startswith("whsec_")

    pid = await service.pending(org)
    manager = await service.approver(org, "manager")
    declined = await service.http.post(f"/v1/proposals/{pid}/decline", headers=bearer(manager))
    assert declined.status_code == 200, declined.text

    await wait_until(lambda: _count(receiver, 2), what="two deliveries")
    created, decided = sorted(receiver.got, key=lambda r: r.json()["status"] != "pending")
    assert all(r.verified for r in receiver.got)
    assert created.json()["type"] == "proposal.created"
    assert created.json()["title"] == "Credit €5.00 to Ada's Bakery"
    assert created.json()["url"] == f"{WEB}/proposals/{pid}"
    assert decided.headers["signoff-event"] == "proposal.decided"
    # the receiver's check fails for a tampered body, a wrong secret and an old timestamp
    header = created.headers["signoff-signature"]
    assert not signing.verify(made["secret"], header, created.body + b" ", _now(header))
    assert not signing.verify("whsec_other", header, created.body, _now(header))
    assert not signing.verify(made["secret"], header, created.body, _now(header) + 301)

    # the secret is shown once; a viewer may not subscribe; another organization sees nothing
    listed = await service.http.get("/v1/webhooks", headers=bearer(manager))
    assert [w["id"] for w in listed.json()["items"]] == [made["id"]]
    assert "secret" not in listed.json()["items"][0]
    viewer = service.token(await service.member(org, "viewer"), org)
    refused = await service.http.post(
        "/v1/webhooks", json={"url": receiver.url, "events": ["created"]}, headers=bearer(viewer)
    )
    assert refused.status_code == 403
    stranger_org = new_id("org")
    stranger = await service.approver(stranger_org, "manager")
    hidden = await service.http.get(f"/v1/webhooks/{made['id']}", headers=bearer(stranger))
    assert hidden.status_code == 404


async def test_a_failing_endpoint_is_retried_then_dead_and_never_delays_a_decision(
    service: Harness, receiver: Receiver
) -> None:
    org = new_id("org")
    receiver.status = 500
    await receiver.start()
    made = await subscribe(service, org, receiver.url, events=["created", "decided"])

    pid = await service.pending(org)
    dead = await wait_until(
        lambda: _with_status(service, org, "dead"), timeout=20, what="a dead delivery"
    )
    assert dead[0].attempts == ATTEMPTS and dead[0].last_error == "HTTP 500"
    assert len([r for r in receiver.got if r.json()["type"] == "proposal.created"]) == ATTEMPTS

    # the decision answers at once whatever the endpoint does (it is not in its path at all)
    manager = await service.approver(org, "manager")
    declined = await service.http.post(f"/v1/proposals/{pid}/decline", headers=bearer(manager))
    assert declined.status_code == 200
    log = await service.http.get(f"/v1/webhooks/{made['id']}/deliveries", headers=bearer(manager))
    assert "dead" in [d["status"] for d in log.json()["items"]]
    metrics = (await service.http.get("/metrics")).text
    assert 'signoff_notifications_failed_total{channel="webhook",dead="true"}' in metrics

    # once the endpoint is fixed, a manager sends the dead one again: it arrives, signed
    receiver.status, receiver.secret = 200, made["secret"]
    dead_id = next(
        d["id"] for d in log.json()["items"] if (d["status"], d["event"]) == ("dead", "created")
    )
    again = await service.http.post(
        f"/v1/webhooks/{made['id']}/deliveries/{dead_id}/retry", headers=bearer(manager)
    )
    assert again.status_code == 200 and again.json()["status"] == "pending", again.text
    await wait_until(lambda: _verified(receiver), what="the retried delivery")
    twice = await service.http.post(
        f"/v1/webhooks/{made['id']}/deliveries/{dead_id}/retry", headers=bearer(manager)
    )
    assert twice.status_code == 404  # no longer dead


async def test_slack_format_carries_the_preview_lines_and_the_card_link(
    service: Harness, receiver: Receiver
) -> None:
    org = new_id("org")
    await receiver.start()
    made = await subscribe(service, org, receiver.url, events=["created"], fmt="slack")
    receiver.secret = made["secret"]
    pid = await service.pending(org, account_id=await service.account(org, "Alice's Café"))

    got = (await wait_until(lambda: _count(receiver, 1), what="the slack message"))[0]
    assert got.verified
    body = got.json()
    assert body["text"] == "Waiting for approval: Credit €5.00 to Alice's Café"
    fields = next(b for b in body["blocks"] if "fields" in b)["fields"]
    assert fields == [
        {"type": "mrkdwn", "text": "*Plan*\nbasic"},
        {"type": "mrkdwn", "text": "*Occasion*\nGoodwill gesture"},
    ]
    button = next(b for b in body["blocks"] if b["type"] == "actions")["elements"][0]
    assert button["url"] == f"{WEB}/proposals/{pid}"


async def test_an_escalation_is_posted_once_per_attempt(
    service: Harness, receiver: Receiver
) -> None:
    org = new_id("org")
    await receiver.start()
    made = await subscribe(service, org, receiver.url, events=["escalated"])
    receiver.secret = made["secret"]
    pid = await service.pending(org)
    for number in (1, 2):  # every check past the bound says "escalated": one notice
        check = ReconciliationChecked(
            proposal_id=pid,
            attempt_id="att_1",
            check=number,
            result="pending",
            escalated=True,
            correlation_id=pid,
            source="reconciler",
        )
        await service.broker.publish(
            check.model_dump_json().encode(),
            exchange=service.topology.name("outcomes"),
            routing_key=ROUTING_KEYS["proposals.reconciliation"],
            persist=True,
            message_id=check.message_id,
            user_id=service.user_id,
        )
    got = (await wait_until(lambda: _count(receiver, 1), what="the escalation"))[0]
    assert got.verified and got.json()["type"] == "proposal.escalated"
    assert got.json()["proposal_id"] == pid
    await never(lambda: _count(receiver, 2), within=1.0, what="a second escalation notice")


async def test_nothing_is_lost_across_a_restart_of_the_notifier(
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
    receiver: Receiver,
) -> None:
    org = new_id("org")
    await forget_unsent_outbox(engine)
    patient = settings.notify.model_copy(update={"max_attempts": 20, "backoff_base_s": 0.5})
    settings = settings.model_copy(update={"notify": patient})
    # the receiver is down (its socket does not listen) while the first process runs
    async with _running(settings, engine, amqp, topology) as first:
        made = await subscribe(first, org, receiver.url, events=["created"])
        receiver.secret = made["secret"]
        await first.pending(org)
        await wait_until(lambda: _with_status(first, org, "pending", tried=True))
    # the first process is gone; the receiver comes up; a new process delivers what was left
    await receiver.start()
    async with _running(settings, engine, amqp, topology) as second:
        await wait_until(lambda: _count(receiver, 1), timeout=20, what="the delivery")
        await wait_until(lambda: _with_status(second, org, "sent"), what="a sent row")
    assert [r.verified for r in receiver.got] == [True]


async def test_email_reaches_the_approvers_who_want_it_with_a_link_and_a_reminder(
    service: Harness, mailbox: Mailbox
) -> None:
    org = new_id("org")
    admin = await service.member(org, "admin")
    manager = await service.member(org, "manager")
    await service.member(org, "viewer")
    muted = await service.member(org, "manager")
    off = await service.http.put(
        "/v1/notifications/preferences",
        json={"email": False},
        headers=bearer(service.token(muted, org)),
    )
    assert off.json() == {"email": False}
    mine = await service.http.get(
        "/v1/notifications/preferences", headers=bearer(service.token(muted, org))
    )
    assert mine.json() == {"email": False}
    proposer = await service.member(org, "admin")

    pid = await service.pending(org, token=service.token(proposer, org))
    wanted = {f"{u}@example.test" for u in (admin, manager, proposer)}
    await wait_until(lambda: _mails(mailbox, pid, 2 * len(wanted)), timeout=20, what="mails")

    mails = [m for m in mailbox.mails if pid in _text(m)]
    assert sorted(r for m in mails for r in m.recipients) == sorted([*wanted, *wanted])
    notices = [m for m in mails if "Waiting for approval" in m.message["Subject"]]
    assert {m.recipients[0] for m in notices} == wanted
    link = re.search(r"https?://\S+", _text(notices[0]))
    assert link is not None and link.group(0) == f"{WEB}/proposals/{pid}"


async def _mails(mailbox: Mailbox, pid: str, n: int) -> bool:
    return len([m for m in mailbox.mails if pid in _text(m)]) >= n


def _text(mail: Mail) -> str:
    body = mail.message.get_payload(decode=True)
    return body.decode() if isinstance(body, bytes) else ""


async def _verified(receiver: Receiver) -> bool:
    return any(r.verified and r.json()["type"] == "proposal.created" for r in receiver.got)


async def _count(receiver: Receiver, n: int) -> list[Any] | None:
    return receiver.got if len(receiver.got) >= n else None


async def _with_status(
    service: Harness, org: str, status: str, *, tried: bool = False
) -> list[Any] | None:
    rows = [r for r in await deliveries(service, org) if r.status == status]
    return [r for r in rows if r.last_error] or None if tried else rows or None


def _now(header: str) -> int:
    return int(header.split(",")[0].removeprefix("t="))


@asynccontextmanager
async def _running(
    settings: ProposalsSettings, engine: AsyncEngine, amqp: RabbitBroker, topology: Topology
) -> AsyncIterator[Harness]:
    operations, directory = build()
    app = create_app(settings, operations, directory)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://proposals"
        ) as http:
            yield Harness(
                engine, amqp, topology, http, settings.auth, broker_user(settings.amqp.url)
            )


async def test_an_event_delivered_again_adds_no_row_and_one_nobody_wants_writes_nothing(
    service: Harness, settings: ProposalsSettings, engine: AsyncEngine, topology: Topology
) -> None:
    """The deliveries' ``dedup_key`` is what keeps a redelivered event from notifying twice (no
    inbox row is written per event any more); an event nobody subscribes to writes nothing."""
    org, quiet = new_id("org"), new_id("org")
    await subscribe(service, org, "http://127.0.0.1:9/hook", events=["created"])
    pid = await service.pending(org)
    await wait_until(lambda: _rows(service, org), what="the created event's delivery rows")
    made = [(r.id, r.dedup_key) for r in await deliveries(service, org)]
    assert [key.count(":") for _, key in made].count(1) == 1  # one webhook row: event:subscription
    ctx = context(settings, engine, topology)
    created = await _event_body(engine, pid, "proposal.created")
    for _ in range(2):  # the same event again, twice
        await enqueue.on_events(ctx, [SimpleNamespace(body=created)])  # type: ignore[list-item]
    assert [(r.id, r.dedup_key) for r in await deliveries(service, org)] == made

    other = await service.pending(quiet)  # its events reach the consumer on their own too
    unwanted = await _event_body(engine, other, "proposal.created")
    await enqueue.on_events(ctx, [SimpleNamespace(body=unwanted)])  # type: ignore[list-item]
    assert [r for r in await deliveries(service, quiet) if r.channel == "webhook"] == []
    message_id = ProposalEvent.model_validate_json(unwanted).message_id
    async with engine.connect() as conn:
        marks = await conn.scalar(
            text("SELECT count(*) FROM proposals.inbox WHERE message_id LIKE :m"),
            {"m": f"%{message_id}%"},
        )
    assert marks == 0


async def test_events_handled_together_write_what_each_would_alone_after_one_query(
    service: Harness, settings: ProposalsSettings, engine: AsyncEngine, topology: Topology
) -> None:
    """A batch of events from several organizations: one SELECT of all their webhooks, a row
    per (event, webhook that wants it), none for an organization nobody subscribed for, an event
    twice in one batch adds its rows once, and each organization's people (for e-mail) are read
    once, however many of its events the batch holds."""
    busy, single, quiet = new_id("org"), new_id("org"), new_id("org")
    hooks = {
        busy: [
            await subscribe(service, busy, f"http://127.0.0.1:9/{n}", events=["created"])
            for n in ("a", "b")
        ],
        single: [await subscribe(service, single, "http://127.0.0.1:9/c", events=["created"])],
    }
    await subscribe(service, single, "http://127.0.0.1:9/d", events=["decided"])  # not created
    bodies = {}
    for org in (busy, single, quiet):
        pid = await service.pending(org)
        # a copy under a message id of its own (the live consumer handles the original)
        event = json.loads(await _event_body(engine, pid, "proposal.created"))
        event["message_id"] = new_id("msg")
        bodies[org] = (event["message_id"], json.dumps(event).encode())
    own = create_async_engine(engine.url)  # the statements counted are this call's alone
    ctx = context(settings, own, topology)
    batch = [bodies[busy][1], bodies[single][1], bodies[quiet][1], bodies[busy][1]]
    try:
        with statements(own) as (core, hot):
            await enqueue.on_events(ctx, [SimpleNamespace(body=b) for b in batch])  # type: ignore[misc]
    finally:
        await own.dispose()
    asked = [sql for sql in core + hot if "webhook_subscriptions" in sql]
    muted = [sql for sql in core + hot if "notification_preferences" in sql]

    assert len(asked) == 1, asked
    assert settings.notify.email_enabled and len(muted) == 3, muted  # three organizations
    for org in (busy, single, quiet):
        message_id = bodies[org][0]
        made = sorted(
            r.dedup_key
            for r in await deliveries(service, org)
            if r.channel == "webhook" and r.dedup_key.startswith(f"{message_id}:")
        )
        assert made == sorted(f"{message_id}:{h['id']}" for h in hooks.get(org, [])), org


async def _rows(service: Harness, org: str) -> bool:
    return any(r.channel == "webhook" for r in await deliveries(service, org))


async def _event_body(engine: AsyncEngine, proposal_id: str, routing_key: str) -> bytes:
    async with engine.connect() as conn:
        body = await conn.scalar(
            text(
                "SELECT body FROM proposals.outbox WHERE correlation_id = :p "
                "AND routing_key = :t ORDER BY id LIMIT 1"
            ),
            {"p": proposal_id, "t": routing_key},
        )
    assert body is not None, f"no {routing_key} event for {proposal_id}"
    return bytes(body)


@asynccontextmanager
async def _own_queues(settings: ProposalsSettings, engine: AsyncEngine) -> AsyncIterator[Any]:
    """A topology of the test's own that no consumer reads (the service reads the module's), as
    an earlier version left it: the notifier's queue bound to every event, ``proposal.#``, and
    to nothing else."""
    topo = Topology(f"t{new_id('q')[-8:].lower()}", delivery_limit=3)
    connection = await aio_pika.connect(settings.amqp.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await topo.declare(channel)
        queue = await channel.get_queue(topo.name(bindings.QUEUE), ensure=False)
        await queue.bind(topo.name("events"), routing_key=bindings.EVERYTHING)
        await queue.unbind(topo.name("events"), routing_key=bindings.ALWAYS)
        events = await channel.get_exchange(topo.name("events"), ensure=False)

        async def heard(kind: str) -> bool:
            """Whether an event of ``kind`` published now reaches the notifier's queue (routing
            happens before the confirm, so the queue holds it by then or never will)."""
            body = kind.encode()
            await events.publish(aio_pika.Message(body), routing_key=f"proposal.{kind}")
            got = []
            while (message := await queue.get(no_ack=True, fail=False)) is not None:
                got.append(message.body)
            return body in got

        try:
            yield SimpleNamespace(ctx=context(settings, engine, topo), heard=heard)
        finally:
            await topo.delete(channel)


async def _webhook_row(conn: Any, events: list[str]) -> str:
    """A subscription stored as the route stores one, without the route's binds."""
    made = new_id("whk")
    row = {"id": made, "organization_id": new_id("org"), "url": "http://127.0.0.1:9/hook"}
    await conn.execute(
        insert(subscriptions).values(
            **row, format="signoff", events=events, secret="s", description="", created_by="u"
        )
    )
    return made


async def _unsubscribed(engine: AsyncEngine, hook: str, ctx: Any) -> None:
    """The subscription gone, as the route deletes one: the row, then a settle."""
    async with engine.begin() as conn:
        await conn.execute(delete(subscriptions).where(subscriptions.c.id == hook))
    await bindings.settle(ctx)


async def test_the_notifier_hears_a_kind_only_while_a_webhook_wants_it(
    settings: ProposalsSettings, engine: AsyncEngine, toy_schema: None
) -> None:
    """``settle`` binds the notifier's queue to ``created`` and to what the subscriptions want,
    and unbinds the rest, the earlier versions' ``proposal.#`` included. (This module's other
    tests subscribe to ``created``, ``decided`` and ``escalated``: the kinds probed are others.)"""
    async with _own_queues(settings, engine) as own:
        assert await own.heard("expired")  # as an earlier version bound it: everything
        async with engine.begin() as conn:
            hook = await _webhook_row(conn, ["outcome", "escalated"])
        await bindings.settle(own.ctx)
        assert await own.heard("created")  # e-mail notices, whoever subscribes
        assert await own.heard("outcome")
        assert not await own.heard("expired")  # nobody wants it, and ``proposal.#`` is gone
        assert not await own.heard("executing")

        await _unsubscribed(engine, hook, own.ctx)
        assert not await own.heard("outcome")
        assert await own.heard("created")


async def test_a_creation_under_way_keeps_its_binding_through_a_settle(
    settings: ProposalsSettings, engine: AsyncEngine, toy_schema: None
) -> None:
    """A settle that begins while a subscription is being created (bound, not yet committed)
    waits for its commit, so it cannot read the subscription as absent and unbind its kind."""
    async with _own_queues(settings, engine) as own:
        async with engine.begin() as conn:
            await bindings.bind(own.ctx, conn, ["superseded"])
            settling = asyncio.create_task(bindings.settle(own.ctx))

            async def settled() -> bool:
                return settling.done()

            await never(settled, within=0.5, what="a settle during the creation")
            hook = await _webhook_row(conn, ["superseded"])
        await asyncio.wait_for(settling, 10)
        assert await own.heard("superseded")

        await _unsubscribed(engine, hook, own.ctx)
        assert not await own.heard("superseded")


async def test_a_broker_out_of_reach_fails_a_binding_and_leaves_a_start_retrying(
    settings: ProposalsSettings, engine: AsyncEngine, toy_schema: None
) -> None:
    """What the creation of a webhook answers ``503`` for (nothing is bound, nothing stored),
    and what a start does then: it serves, and settles the bindings later."""
    away = settings.model_copy(
        update={
            "amqp": settings.amqp.model_copy(update={"url": f"amqp://127.0.0.1:{free_port()}/"})
        }
    )
    ctx = context(away, engine, Topology("nowhere"))
    async with engine.connect() as conn:
        with pytest.raises(bindings.BROKER_FAILURES):
            await bindings.bind(ctx, conn, ["outcome"])
    # a start meets the same: it serves anyway, and tries again in the background
    retrying = await bindings.settled_or_retrying(ctx)
    assert retrying is not None and not retrying.done()
    retrying.cancel()
    await asyncio.gather(retrying, return_exceptions=True)
    async with _own_queues(settings, engine) as own:
        assert await bindings.settled_or_retrying(own.ctx) is None
        assert not await own.heard("expired")  # settled: the earlier ``proposal.#`` is gone
