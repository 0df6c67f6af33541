"""Approval commands decided a batch at a time (``signoff_runtime.savepoints``) by the running
service (``SIGNOFF_PROPOSALS__APPROVAL_BATCH_SIZE`` 32): each in its own savepoint of one
transaction, replies after the commit.

To know which commands arrive together, a test holds the lock of a "gate" proposal: the gate's
approval blocks its batch in the database, the commands sent meanwhile wait behind it
(``signoff_consumer_batch_waiting``), and releasing the lock lets them through as one batch.
Which transaction stored a command's inbox row is told by its ``received_at`` (``now()``, the
transaction's start; a row's ``xmin`` would name its savepoint). A command that must fail
unexpectedly is made to by a trigger that refuses any UPDATE of its proposal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ApproveProposal
from signoff_contracts.v2 import ApprovalReply
from signoff_proposals.metrics import APPROVAL_COMMANDS
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.metrics import BATCH_SIZE, BATCH_WAITING, BATCHES_SPLIT
from signoff_runtime.rpc import Requester
from signoff_runtime.testing import wait_until
from sqlalchemy import text

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(settings: ProposalsSettings) -> ProposalsSettings:
    batched = settings.proposals.model_copy(update={"approval_batch_size": 32})
    return settings.model_copy(update={"proposals": batched})


QUEUE = "proposals.approvals"
#: sends a command and waits for its reply (many at once: FastStream's own ``request`` would
#: hold one lock per broker for each round trip)
Ask = Callable[[ApproveProposal], Coroutine[Any, Any, ApprovalReply]]


def _sizes() -> tuple[float, float]:
    """(batches, commands) the approvals consumer has decided so far."""
    found = {s.name: s.value for s in next(iter(BATCH_SIZE.labels(queue=QUEUE).collect())).samples}
    return found["signoff_consumer_batch_size_count"], found["signoff_consumer_batch_size_sum"]


def _answered(result: str) -> float:
    return APPROVAL_COMMANDS.labels(channel="amqp", command="approve", result=result)._value.get()


async def _lock_waiters(service) -> bool:
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
        return bool(rows.all())


@contextlib.asynccontextmanager
async def _gate(
    service, command: ApproveProposal, ask: Ask
) -> AsyncIterator[asyncio.Task[ApprovalReply]]:
    """Hold the gate proposal's row lock; its approval's batch blocks on it until the block
    ends. Yields the gate's pending reply."""
    async with service.engine.connect() as conn:
        held = await conn.begin()
        await conn.execute(
            text("SELECT 1 FROM proposals.proposals WHERE id = :i FOR UPDATE"),
            {"i": command.proposal_id},
        )
        try:
            gate = asyncio.create_task(ask(command))
            await wait_until(lambda: _lock_waiters(service), what="the gate's batch to block")
            yield gate
        finally:
            await held.rollback()


@contextlib.asynccontextmanager
async def _poisoned(service, proposal_id: str) -> AsyncIterator[None]:
    """Any UPDATE of ``proposal_id`` fails (a database error the decision does not expect)."""
    name = f"test_poison_{new_id('t')[-10:].lower()}"
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                f"CREATE FUNCTION proposals.{name}() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'a poisoned approval'; END $$"
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER {name} BEFORE UPDATE ON proposals.proposals FOR EACH ROW "
                f"WHEN (OLD.id = '{proposal_id}') EXECUTE FUNCTION proposals.{name}()"
            )
        )
    try:
        yield
    finally:
        async with service.engine.begin() as conn:
            await conn.execute(text(f"DROP TRIGGER {name} ON proposals.proposals"))
            await conn.execute(text(f"DROP FUNCTION proposals.{name}()"))


async def _received(service, message_ids: list[str]) -> dict[str, object]:
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT message_id, received_at FROM proposals.inbox WHERE message_id = ANY(:ids)"
            ),
            {"ids": message_ids},
        )
        return {row.message_id: row.received_at for row in rows}


async def test_a_batch_commits_together_refuses_one_redoes_one_alone_and_doubles_nothing(
    service, amqp_url
):
    org = new_id("org")
    token = await service.approver(org)
    gate_pid, poison_pid, refused_pid, left_pid, *pids = [
        await service.pending(org) for _ in range(6)
    ]
    viewer = service.token(await service.member(org, "viewer"), org)
    leaver = await service.member(org)  # a token that outlives its membership
    left_token = service.token(leaver, org)
    await service.remove_member(org, leaver)

    ok = [ApproveProposal(token=token, proposal_id=pid) for pid in pids]
    poison = ApproveProposal(token=token, proposal_id=poison_pid)
    refused = ApproveProposal(token=viewer, proposal_id=refused_pid)
    left = ApproveProposal(token=left_token, proposal_id=left_pid)
    commands = [ok[0], ok[0], refused, poison, left, ok[1]]  # ok[0] twice: a redelivered copy
    split = BATCHES_SPLIT.labels(queue=QUEUE)._value.get()
    claimed, forbidden = _answered("claimed"), _answered("forbidden")

    async with Requester(amqp_url, app_id="test") as requester:

        async def ask(command: ApproveProposal) -> ApprovalReply:
            return await requester.ask(command, ApprovalReply, service.topology, QUEUE, 30.0)

        first, copy, no, failed, gone, second, batches, decided = await _through_the_gate(
            service, ask, ApproveProposal(token=token, proposal_id=gate_pid), poison, commands
        )

    assert (first.result, second.result) == ("claimed", "claimed")
    assert copy == first  # the very reply, from the inbox row its first copy wrote in the batch
    assert (no.result, no.http_status, no.proposal) == ("forbidden", 403, None)
    assert (gone.result, gone.http_status) == ("forbidden", 403)  # membership re-checked
    assert (failed.result, failed.reason.code) == ("invalid", "handler_failed")
    [dead] = await drain_queue(amqp_url, service.topology.dlq(QUEUE))
    assert (dead.message_id, dead.headers["x-signoff-reason"]) == (
        poison.message_id,
        "handler_failed",
    )

    # one batch decided the commands (the poisoned one then alone, on each of its deliveries)
    assert _sizes()[0] - batches >= 1 and _sizes()[1] - decided >= len(commands)
    assert BATCHES_SPLIT.labels(queue=QUEUE)._value.get() == split
    batch = [ok[0], refused, left, ok[1]]
    received = await _received(service, [c.message_id for c in [*batch, poison]])
    assert set(received) == {c.message_id for c in batch}  # the poisoned one left nothing
    assert len(set(received.values())) == 1  # one transaction stored them all

    for pid in pids:  # nothing lost or doubled
        assert len(await service.contracts(pid)) == 1
        assert [a.action for a in await service.audit(pid)] == ["created", "claimed"]
    assert (await service.row(poison_pid)).status == "pending"
    assert await service.contracts(poison_pid) == []
    assert [(a.action, a.detail["why"]) for a in (await service.audit(refused_pid))[1:]] == [
        ("approve_forbidden", "role")
    ]
    assert [(a.action, a.detail["why"]) for a in (await service.audit(left_pid))[1:]] == [
        ("approve_forbidden", "not_a_member")
    ]
    # the same metrics as one at a time: the gate, both copies of ok[0], and ok[1]
    assert (_answered("claimed") - claimed, _answered("forbidden") - forbidden) == (4, 2)


async def _through_the_gate(
    service, ask: Ask, gate_command: ApproveProposal, poison: ApproveProposal, commands
) -> list[Any]:
    """Send ``commands`` while the gate holds, so they form one batch; their replies, then the
    (batches, commands) decided before the gate opened."""
    async with _poisoned(service, poison.proposal_id):
        async with _gate(service, gate_command, ask) as gate:
            replies = [asyncio.create_task(ask(c)) for c in commands]

            async def all_waiting() -> bool:
                return BATCH_WAITING.labels(queue=QUEUE)._value.get() == len(commands)

            await wait_until(all_waiting, what=f"{len(commands)} commands behind the gate")
            sizes = _sizes()
        assert (await gate).result == "claimed"
        return [*await asyncio.gather(*replies), *sizes]
