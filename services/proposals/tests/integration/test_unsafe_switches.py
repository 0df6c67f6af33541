"""The proposals service's negative controls really turn their protection off.

``SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS``: two approvals racing for one proposal (or an approval
racing a decline) both win. The race is made certain, not hoped for: a test transaction holds the
proposal's row lock until both commands wait on it (``pg_stat_activity`` says so); both have
already read the proposal as pending. The safe claim lets exactly one through.

``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``: the contract of an approval is published directly
after the commit and never written to the outbox, so a process that dies in between leaves
nothing behind to send it.

``SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT``: a v1 request — a harmless preview over harmful
arguments, an organization and a person of the agent's making — is stored as sent, and the
approved contract runs the arguments nobody was shown. Safe: refused, nothing stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import httpx
import pytest
from faststream.rabbit import RabbitBroker
from proposals_testkit import KIND, SECTION, Harness, drain_queue, forget_unsent_outbox
from proposals_toy import build
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import Envelope, ExecutionContract
from signoff_proposals.app import create_app
from signoff_proposals.context import Context
from signoff_proposals.decisions import decide
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import UnsafeSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


@dataclasses.dataclass
class Running:
    harness: Harness
    context: Context


@pytest.fixture
async def running(
    request: pytest.FixtureRequest,
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
) -> AsyncIterator[Running]:
    """The service in-process with the switches the test is parametrized with."""
    switched = settings.model_copy(update={"unsafe": UnsafeSettings(**request.param)})
    await forget_unsent_outbox(engine)
    app = create_app(switched, *build())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            harness = Harness(engine, amqp, topology, http, switched.auth)
            yield Running(harness, app.state.context)


def _switches(**switches: bool) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "running", [{}, switches], ids=["safe", "+".join(switches)], indirect=True
    )


async def _waiting_on_the_row(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int(
            await conn.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND (query LIKE 'UPDATE proposals.proposals%' "
                    # an approval first locks the row for its quorum step (policies.quorum)
                    "OR query LIKE 'SELECT%FROM proposals.proposals%FOR UPDATE%')"
                )
            )
        )


async def _race(engine: AsyncEngine, pid: str, *commands: Awaitable[httpx.Response]) -> list[int]:
    """Start ``commands`` in order while the row is locked; release it once all of them wait."""
    async with engine.connect() as holder:
        transaction = await holder.begin()
        await holder.execute(
            text("SELECT 1 FROM proposals.proposals WHERE id = :i FOR UPDATE"), {"i": pid}
        )
        tasks = []
        for n, command in enumerate(commands, start=1):
            tasks.append(asyncio.ensure_future(command))

            async def queued(n: int = n) -> bool:
                return await _waiting_on_the_row(engine) >= n

            await wait_until(queued, what=f"{n} command(s) waiting on the row")
        await transaction.commit()
        return [(await task).status_code for task in tasks]


@_switches(claim_without_status=True)
async def test_two_racing_approvals(running: Running) -> None:
    service, unsafe = running.harness, running.context.settings.unsafe.claim_without_status
    org = new_id("org")
    pid = await service.pending(org)
    first, second = await service.approver(org), await service.approver(org)

    statuses = await _race(
        service.engine, pid, service.approve_http(pid, first), service.approve_http(pid, second)
    )

    claimed = [a for a in await service.audit(pid) if a.action == "claimed"]
    if unsafe:
        assert statuses == [200, 200] and len(claimed) == 2
        assert len({c.detail["contract_id"] for c in claimed}) == 2  # two contracts: twice run
    else:
        assert statuses == [200, 409] and len(claimed) == 1


@_switches(claim_without_status=True)
async def test_an_approval_racing_a_decline(running: Running) -> None:
    service, unsafe = running.harness, running.context.settings.unsafe.claim_without_status
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    decline = service.http.post(
        f"/v1/proposals/{pid}/decline", headers={"Authorization": f"Bearer {token}"}
    )

    statuses = await _race(service.engine, pid, decline, service.approve_http(pid, token))

    actions = [a.action for a in await service.audit(pid)]
    if unsafe:
        assert statuses == [200, 200] and actions[-2:] == ["declined", "claimed"]
        assert (await service.row(pid)).status == "executing"  # a declined proposal runs
    else:
        assert statuses == [200, 409] and "claimed" not in actions
        assert (await service.row(pid)).status == "declined"


class DiesAfterCommit(DirectPublisher):
    """The process is killed once the transaction committed, before it could publish."""

    def __init__(self) -> None:
        super().__init__("amqp://unused")
        self.lost: list[Envelope] = []

    async def publish(self, message: Envelope, **_: Any) -> None:
        self.lost.append(message)


@_switches(publish_without_outbox=True)
async def test_an_approvals_contract_and_the_outbox(running: Running, amqp_url: str) -> None:
    service, ctx = running.harness, running.context
    org = new_id("org")
    pid = await service.pending(org)
    unsafe = ctx.direct is not None

    resp = await service.approve_http(pid, await service.approver(org))

    assert resp.status_code == 200
    delivered = await drain_queue(amqp_url, service.topology.name("executor.contracts"))
    # this approval's contract, once: an older test's row the relay's poll found may come too,
    # and a copy (the poll and the hand-over racing) is the same message, dropped by its id
    mine = [
        m for m in delivered if ExecutionContract.model_validate_json(m.body).proposal_id == pid
    ]
    assert len({m.message_id for m in mine}) == 1, delivered
    assert (await service.contracts(pid) == []) is unsafe  # published without an outbox row

    # the process dies between the commit and the publish
    other = await service.pending(org)
    crash = DiesAfterCommit()
    dying = dataclasses.replace(ctx, direct=crash if unsafe else None)
    async with unit_of_work(ctx.engine) as tx:
        reply = await decide.approve(dying, tx, await service.approver(org), other)

    assert reply.result == "claimed" and (await service.row(other)).status == "executing"
    if unsafe:
        assert await service.contracts(other) == []  # nothing left to send it: lost
        assert "execution.contract" in [m.type for m in crash.lost]
    else:
        assert len(await service.contracts(other)) == 1  # the relay will send it


MALLORYS = {
    "account_id": "acc_mallory",
    "occasion": "outage",
    "plan": "pro",
    "amount_cents": 999_999,
}


def _agent_made(org: str, requested_by: str) -> dict[str, Any]:
    """What a taken-over agent sends in the v1 shape: shows Alice €5.00, runs €9,999.99 for
    Mallory."""
    return {
        "type": "proposal.requested",
        "version": 1,
        "proposal_id": new_id("prp"),
        "organization_id": org,
        "requested_by": requested_by,
        "section": SECTION,
        "resource_id": "acc_alice",
        "operation_kind": KIND,
        "contract_version": 1,
        "request": {"account_id": "acc_alice", "occasion": "goodwill"},
        "arguments": MALLORYS,
        "preview": {
            "account_name": "Alice's Café",
            "plan": "basic",
            "occasion": "goodwill",
            "amount_cents": 500,
        },
    }


@_switches(trust_agent_contract=True)
async def test_a_contract_the_agent_made(running: Running) -> None:
    service, unsafe = running.harness, running.context.settings.unsafe.trust_agent_contract
    org = new_id("org")
    forged = _agent_made(org, "usr_nobody")  # not even a member

    reply = await service.send(json.dumps(forged).encode())

    if not unsafe:
        assert not reply.accepted and reply.reason
        assert reply.reason.code == "unsupported_version"
        assert await service.row(forged["proposal_id"]) is None
        return
    assert reply.accepted and reply.proposal and reply.proposal.preview == forged["preview"]
    pid = forged["proposal_id"]
    approved = await service.approve_http(pid, await service.approver(org))
    assert approved.status_code == 200
    [contract] = await service.contracts(pid)
    # the person approved "€5.00 to Alice's Café"; the contract runs €9,999.99 for Mallory
    assert contract["arguments"] == MALLORYS


@_switches(skip_quorum=True)
async def test_a_two_person_proposal_and_its_quorum(running: Running) -> None:
    """Two managers must approve: with the quorum check off, the first approval alone claims."""
    service, unsafe = running.harness, running.context.settings.unsafe.skip_quorum
    org = new_id("org")
    saved = await service.set_policy(org, [{"approvals": 2}])
    assert saved.status_code == 200, saved.text
    pid = await service.pending(org)

    resp = await service.approve_http(pid, await service.approver(org))

    contracts = await service.contracts(pid)
    if unsafe:
        assert resp.json()["result"] == "claimed" and len(contracts) == 1  # one approval ran it
        assert ExecutionContract.model_validate(contracts[0]).approvers is None
    else:
        assert resp.json()["result"] == "approval_recorded" and contracts == []
