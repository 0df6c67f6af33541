"""Withdrawing: the proposer (or a manager) takes a pending proposal back — HTTP and AMQP.

A withdrawal is written like a decline (``decided_by``, the reason, one audit row, the
``proposal.decided`` event the agent answers in the conversation) and follows the DESIGN table
afterwards. Anyone else in the organization is refused (audited), another organization's
proposal is not found. ``SIGNOFF_UNSAFE__WITHDRAW_ANYONES`` turns the proposer-or-manager
check off, so a viewer's withdrawal goes through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from faststream.rabbit import RabbitBroker
from proposals_testkit import Harness, forget_unsent_outbox
from proposals_toy import build
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import WithdrawProposal
from signoff_proposals.app import create_app
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import UnsafeSettings
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _proposed(service: Harness, org: str) -> tuple[str, str, str]:
    """A pending proposal, its proposer's id and token."""
    proposer = await service.member(org, "admin")
    token = service.token(proposer, org)
    return await service.pending(org, token=token), proposer, token


async def test_the_proposer_withdraws_over_http_and_the_table_holds_afterwards(service):
    org = new_id("org")
    pid, proposer, token = await _proposed(service, org)

    too_long = await service.http.post(
        f"/v1/proposals/{pid}/withdraw", headers=_bearer(token), json={"reason": "x" * 501}
    )
    assert too_long.status_code == 422, too_long.text
    resp = await service.http.post(
        f"/v1/proposals/{pid}/withdraw", headers=_bearer(token), json={"reason": "wrong order"}
    )
    approve = await service.approve_http(pid, await service.approver(org))
    again = await service.http.post(f"/v1/proposals/{pid}/withdraw", headers=_bearer(token))

    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["result"], body["proposal"]["status"]) == ("withdrawn", "withdrawn")
    row = await service.row(pid)
    assert (row.status, row.decided_by, row.decline_reason) == (
        "withdrawn",
        proposer,
        "wrong order",
    )
    assert approve.status_code == 409 and approve.json()["reason"]["code"] == "withdrawn"
    assert again.status_code == 409 and again.json()["reason"]["code"] == "withdrawn"
    audit = await service.audit(pid)
    assert [(a.action, a.from_status, a.to_status) for a in audit] == [
        ("created", None, "pending"),
        ("withdrawn", "pending", "withdrawn"),
    ]
    assert audit[1].actor == proposer
    assert audit[1].detail == {"as": "proposer", "reason": "wrong order"}
    assert [r.routing_key for r in await service.outbox(pid, "proposal.event")] == [
        "proposal.created",
        "proposal.decided",
    ]
    assert await service.contracts(pid) == []


async def test_a_proposer_whose_role_no_longer_decides_may_still_withdraw(service):
    org = new_id("org")
    pid, proposer, token = await _proposed(service, org)
    await service.member(org, "viewer", proposer)  # demoted after proposing

    reply = await service.command(WithdrawProposal(token=token, proposal_id=pid))

    assert (reply.result, reply.http_status) == ("withdrawn", 200)
    assert (await service.row(pid)).status == "withdrawn"


async def test_a_manager_withdraws_someone_elses_proposal_over_amqp(service):
    org = new_id("org")
    pid, _, _ = await _proposed(service, org)
    manager = await service.member(org, "manager")

    command = WithdrawProposal(
        token=service.token(manager, org), proposal_id=pid, reason="duplicate"
    )
    reply = await service.command(command)
    replay = await service.command(command)

    assert (reply.result, reply.proposal.status, reply.proposal.decline_reason) == (
        "withdrawn",
        "withdrawn",
        "duplicate",
    )
    assert replay == reply
    audit = await service.audit(pid)
    assert [a.action for a in audit] == ["created", "withdrawn"]
    assert audit[1].actor == manager and audit[1].detail["as"] == "manager"


async def test_another_member_is_forbidden_and_another_organization_sees_nothing(service):
    org = new_id("org")
    pid, _, _ = await _proposed(service, org)
    viewer = await service.member(org, "viewer")
    stranger_org = new_id("org")
    stranger = await service.member(stranger_org, "manager")

    refused = await service.http.post(
        f"/v1/proposals/{pid}/withdraw", headers=_bearer(service.token(viewer, org))
    )
    foreign = await service.command(
        WithdrawProposal(token=service.token(stranger, stranger_org), proposal_id=pid)
    )
    anonymous = await service.http.post(f"/v1/proposals/{pid}/withdraw")

    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert (foreign.result, foreign.http_status, foreign.proposal) == ("not_found", 404, None)
    assert anonymous.status_code == 401
    assert (await service.row(pid)).status == "pending"
    audit = await service.audit(pid)
    assert [a.action for a in audit] == ["created", "withdraw_forbidden"]
    assert audit[1].actor == viewer


@pytest.fixture
async def unsafe_service(
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
) -> AsyncIterator[Harness]:
    switched = settings.model_copy(update={"unsafe": UnsafeSettings(withdraw_anyones=True)})
    await forget_unsent_outbox(engine)
    app = create_app(switched, *build())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            yield Harness(engine, amqp, topology, http, switched.auth)


async def test_negative_control_withdraw_anyones_lets_a_viewer_withdraw(
    unsafe_service: Any,
) -> None:
    service = unsafe_service
    org = new_id("org")
    pid, _, _ = await _proposed(service, org)
    viewer = await service.member(org, "viewer")

    resp = await service.http.post(
        f"/v1/proposals/{pid}/withdraw", headers=_bearer(service.token(viewer, org))
    )

    assert resp.status_code == 200 and resp.json()["result"] == "withdrawn"
