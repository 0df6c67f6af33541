"""Pause points as the second seed has them: who may answer, the edited payload, the turn.

By default only the person whose conversation asked may see and answer a pause point (the
seed's owner-only rule): to a colleague it is as unknown as another organization's, in the list,
by id and when resolving. A pause point the assistant declared ``team``-answerable is answered by
any member whose role may do more than look. The person may edit the payload before answering:
the edit is stored in the resolution and announced with it, and refused where it does not fit.
The turn that asked is stored and shown. ``SIGNOFF_UNSAFE__ANYONE_ANSWERS_PAUSE_POINTS`` turns the
owner-only rule off for resolving.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from faststream.rabbit import RabbitBroker
from proposals_testkit import Harness, forget_unsent_outbox
from proposals_toy import build
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import PausePointRequestReply, PausePointResolved, ResolvePausePoint
from signoff_proposals.app import create_app
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import UnsafeSettings
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration

FORM = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "seats": {"type": "integer", "minimum": 1}},
    "required": ["email"],
}


async def ask(service: Harness, org: str, **fields: Any) -> tuple[str, str]:
    """A pending pause point asked in a new person's conversation: its id, and that person."""
    owner = await service.member(org, "manager")
    pause_point_id = new_id("pp")
    body = {
        "type": "pause_point.requested",
        "version": 2,
        "token": service.token(owner, org),
        "pause_point_id": pause_point_id,
        "correlation_id": pause_point_id,
        "conversation_id": new_id("cnv"),
        "title": "Send the spring newsletter?",
        "description": "**412** recipients; cannot be unsent.",
        "payload": {"draft_id": "d_1", "subject": "Spring"},
        "turn_id": "trn_asking",
        **fields,
    }
    raw = await service.request(
        "commands", ROUTING_KEYS["proposals.pause-points"], json.dumps(body).encode()
    )
    reply = PausePointRequestReply.model_validate_json(raw)
    assert reply.accepted and reply.pause_point is not None, reply
    return reply.pause_point.id, owner


async def row_of(service: Harness, pause_point_id: str) -> Any:
    async with service.engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM proposals.pause_points WHERE id = :i"), {"i": pause_point_id}
            )
        ).first()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def resolve(service: Harness, pause_point_id: str, token: str, **body: Any) -> Any:
    return await service.http.post(
        f"/v1/pause-points/{pause_point_id}/resolve", headers=bearer(token), json=body
    )


async def listed(service: Harness, token: str) -> list[str]:
    page = await service.http.get("/v1/pause-points", headers=bearer(token))
    assert page.status_code == 200, page.text
    return [item["id"] for item in page.json()["items"]]


async def test_by_default_only_the_person_whose_conversation_asked_sees_and_answers(service):
    org = new_id("org")
    ppid, owner = await ask(service, org)
    colleague = service.token(await service.member(org, "manager"), org)
    own = service.token(owner, org)

    shown = await service.http.get(f"/v1/pause-points/{ppid}", headers=bearer(colleague))
    over_http = await resolve(service, ppid, colleague, action="approve")
    over_amqp = await service.command(
        ResolvePausePoint(token=colleague, pause_point_id=ppid, action="approve")
    )

    assert ppid not in await listed(service, colleague)  # the inbox: only what one may answer
    assert shown.status_code == 404 and over_http.status_code == 404, over_http.text
    assert (over_amqp.result, over_amqp.http_status) == ("not_found", 404)
    assert (await row_of(service, ppid)).status == "pending"
    assert await service.outbox(ppid) == []

    assert ppid in await listed(service, own)
    view = (await service.http.get(f"/v1/pause-points/{ppid}", headers=bearer(own))).json()
    assert (view["answerable_by"], view["turn_id"]) == ("owner", "trn_asking")
    answered = await resolve(service, ppid, own, action="approve")
    assert answered.status_code == 200, answered.text
    row = await row_of(service, ppid)
    assert (row.status, row.resolved_by, row.turn_id) == ("resolved", owner, "trn_asking")


async def test_a_team_answerable_pause_point_is_in_every_deciders_inbox(service):
    org = new_id("org")
    ppid, _ = await ask(service, org, answerable_by="team")
    colleague = await service.member(org, "manager")
    viewer = service.token(await service.member(org, "viewer"), org)
    token = service.token(colleague, org)

    assert ppid in await listed(service, token)
    refused = await resolve(service, ppid, viewer, action="approve")  # a viewer only looks
    answered = await resolve(service, ppid, token, action="approve")

    assert refused.status_code == 403
    assert answered.status_code == 200, answered.text
    assert (await row_of(service, ppid)).resolved_by == colleague


async def test_an_edited_payload_travels_in_the_resolution_and_is_checked(service):
    org = new_id("org")
    ppid, owner = await ask(service, org)
    token = service.token(owner, org)
    edited = {"draft_id": "d_1", "subject": "Spring (final)"}

    declined_with_edit = await resolve(service, ppid, token, action="decline", payload=edited)
    assert declined_with_edit.status_code == 422
    assert declined_with_edit.json()["reason"]["code"] == "unexpected_payload"
    answered = await resolve(service, ppid, token, action="approve", payload=edited)

    assert answered.status_code == 200, answered.text
    assert answered.json()["pause_point"]["resolution"]["payload"] == edited
    row = await row_of(service, ppid)
    assert row.resolution == {"action": "approve", "payload": edited}
    assert row.payload == {"draft_id": "d_1", "subject": "Spring"}  # what was asked stays
    [event] = await service.outbox(ppid)
    announced = PausePointResolved.model_validate_json(bytes(event.body)).pause_point
    assert announced.resolution == {"action": "approve", "payload": edited}


async def test_an_edited_payload_must_fill_in_the_pause_points_schema(service):
    org = new_id("org")
    ppid, owner = await ask(
        service, org, kind="data_entry", form_schema=FORM, payload={"email": "a@b.c"}
    )
    token = service.token(owner, org)
    data = {"email": "a@b.c", "seats": 2}

    refused = await service.command(
        ResolvePausePoint(
            token=token, pause_point_id=ppid, action="data", data=data, payload={"seats": 0}
        )
    )
    fits = await resolve(
        service, ppid, token, action="data", data=data, payload={"email": "x@y.z", "seats": 3}
    )

    assert (refused.result, refused.reason.code) == ("invalid", "invalid_data")
    assert fits.status_code == 200, fits.text
    assert (await row_of(service, ppid)).resolution["payload"] == {"email": "x@y.z", "seats": 3}


@pytest.fixture
async def unsafe_service(
    settings: ProposalsSettings,
    engine: AsyncEngine,
    toy_schema: None,
    amqp: RabbitBroker,
    topology: Topology,
) -> AsyncIterator[Harness]:
    unsafe = UnsafeSettings(anyone_answers_pause_points=True)
    switched = settings.model_copy(update={"unsafe": unsafe})
    await forget_unsent_outbox(engine)
    app = create_app(switched, *build())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://proposals") as http:
            yield Harness(engine, amqp, topology, http, switched.auth)


async def test_negative_control_anyone_answers_pause_points_lets_a_colleague_answer(
    unsafe_service: Harness,
) -> None:
    service = unsafe_service
    org = new_id("org")
    ppid, _ = await ask(service, org)
    colleague = service.token(await service.member(org, "manager"), org)

    answered = await resolve(service, ppid, colleague, action="approve")

    assert answered.status_code == 200, answered.text
