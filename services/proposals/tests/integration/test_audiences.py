"""Approving needs a proposals-audience token; the person's agent token (which the agent holds
while it works for them) approves nothing, over HTTP or AMQP. With the negative control
``SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE`` (tests only) the same agent token approves: the check is
what stops it.
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
from signoff_proposals.app import create_app
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import UnsafeSettings
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


@pytest.fixture
async def running(
    request: pytest.FixtureRequest,
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
) -> AsyncIterator[Harness]:
    # built, not copied: the settings' validation is what hands the switch to token checks
    fields: dict[str, Any] = {name: getattr(settings, name) for name in type(settings).model_fields}
    switched = ProposalsSettings(
        **{**fields, "auth": settings.auth.model_copy(), "unsafe": UnsafeSettings(**request.param)}
    )
    await forget_unsent_outbox(engine)
    app = create_app(switched, *build())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            yield Harness(engine, amqp, topology, http, switched.auth)


@pytest.mark.parametrize("running", [{}], ids=["safe"], indirect=True)
async def test_an_agent_token_approves_nothing(running: Harness) -> None:
    org = new_id("org")
    admin = await running.member(org, "admin")
    by_http, by_amqp = await running.pending(org), await running.pending(org)
    agent_token = running.token(admin, org, audience=AGENT_AUDIENCE)

    assert (await running.approve_http(by_http, agent_token)).status_code == 401
    reply = await running.approve_amqp(by_amqp, agent_token)
    assert (reply.result, reply.http_status) == ("unauthenticated", 401)
    for pid in (by_http, by_amqp):
        assert (await running.row(pid)).status == "pending"
        assert await running.contracts(pid) == []
    # the same person's proposals token does
    proposals_token = running.token(admin, org, audience=PROPOSALS_AUDIENCE)
    assert (await running.approve_http(by_http, proposals_token)).status_code == 200
    assert (await running.approve_amqp(by_amqp, proposals_token)).result == "claimed"


@pytest.mark.parametrize(
    "running", [{"accept_any_audience": True}], ids=["accept_any_audience"], indirect=True
)
async def test_the_negative_control_lets_an_agent_token_approve(running: Harness) -> None:
    org = new_id("org")
    admin = await running.member(org, "admin")
    pid = await running.pending(org)
    agent_token = running.token(admin, org, audience=AGENT_AUDIENCE)

    reply = await running.approve_amqp(pid, agent_token)

    assert reply.result == "claimed"
    assert (await running.row(pid)).status == "executing"
