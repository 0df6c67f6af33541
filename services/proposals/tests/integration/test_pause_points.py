"""Pause points: stored over request-reply, resolved over HTTP and AMQP — and nothing executed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import PausePointRequestReply, PausePointResolved, ResolvePausePoint
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import text

pytestmark = pytest.mark.integration

FORM = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "Reply-to address", "maxLength": 120},
        "seats": {"type": "integer", "minimum": 1, "maximum": 40},
        "tier": {"type": "string", "enum": ["bronze", "silver", "gold"]},
        "newsletter": {"type": "boolean"},
    },
    "required": ["email", "seats"],
}
KINDS: dict[str, dict[str, Any]] = {
    "approval": {},
    "choice": {"options": ["Tuesday", "Thursday", "Saturday"]},
    "data_entry": {"form_schema": FORM},
}


def pause_request(org: str, kind: str = "approval", **overrides: Any) -> dict[str, Any]:
    """A v2 request by ``usr_agent`` of ``org`` (``ask`` makes them a member). The organization
    and person fields are the v1 shape's: a v2 reader ignores them, the token decides. It is
    team-answerable, so the organization's other members answer it here; the owner-only rule
    has its own tests (``test_pause_point_answerers``)."""
    pause_point_id = new_id("pp")
    body: dict[str, Any] = {
        "type": "pause_point.requested",
        "version": 2,
        "token": issue_token(AuthSettings(), "usr_agent", org),
        "pause_point_id": pause_point_id,
        "correlation_id": pause_point_id,
        "organization_id": org,
        "requested_by": "usr_agent",
        "conversation_id": new_id("cnv"),
        "title": "Send the spring newsletter?",
        "description": "**412** recipients; cannot be unsent.",
        "kind": kind,
        "payload": {"draft_id": "d_1"},
        "answerable_by": "team",
        **KINDS[kind],
    }
    body.update(overrides)
    return body


async def ask(service, body: dict[str, Any]) -> PausePointRequestReply:
    await service.member(body["organization_id"], "manager", body["requested_by"])
    raw = await service.request(
        "commands", ROUTING_KEYS["proposals.pause-points"], json.dumps(body).encode()
    )
    return PausePointRequestReply.model_validate_json(raw)


async def paused(service, org: str, kind: str = "approval", **overrides: Any) -> str:
    reply = await ask(service, pause_request(org, kind, **overrides))
    assert reply.accepted and reply.pause_point is not None, reply
    return reply.pause_point.id


async def pause_row(service, pause_point_id: str) -> Any:
    async with service.engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM proposals.pause_points WHERE id = :i"), {"i": pause_point_id}
            )
        ).first()


async def resolve_http(service, pause_point_id: str, token: str | None, **body: Any):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return await service.http.post(
        f"/v1/pause-points/{pause_point_id}/resolve", headers=headers, json=body
    )


async def outbox_mark(service) -> int:
    async with service.engine.connect() as conn:
        return (
            await conn.execute(text("SELECT coalesce(max(id), 0) FROM proposals.outbox"))
        ).scalar_one()


async def outbox_since(service, mark: int) -> list[str]:
    async with service.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT message_type FROM proposals.outbox WHERE id > :m ORDER BY id"),
            {"m": mark},
        )
        return [r.message_type for r in rows]


async def announced(service, amqp_url: str, ids: set[str]) -> list[tuple[str, Any]]:
    """The pause-point events about ``ids`` on ``agent.events``, waiting until each has come.

    The expiry sweep may announce other tests' leftovers meanwhile; those are passed over.
    """
    seen: list[tuple[str, Any]] = []

    async def all_there() -> bool:
        for m in await drain_queue(amqp_url, service.topology.name("agent.events")):
            if m.routing_key and m.routing_key.startswith("pause_point."):
                view = PausePointResolved.model_validate_json(m.body).pause_point
                if view.id in ids:
                    seen.append((m.routing_key, view))
        return {view.id for _, view in seen} == ids

    await wait_until(all_there, timeout=30, what=f"events about {sorted(ids)}")
    return seen


def problem(resp, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == code
    return body


async def test_a_pause_point_of_each_kind_is_stored_pending_once(service, settings):
    for kind in KINDS:
        body = pause_request(new_id("org"), kind)

        first = await ask(service, body)
        replay = await ask(service, body | {"title": "changed on the way"})

        assert first.accepted and first.pause_point is not None, kind
        assert replay.pause_point == first.pause_point  # deduplicated by pause_point_id
        row = await pause_row(service, body["pause_point_id"])
        assert (row.status, row.kind, row.title) == ("pending", kind, body["title"])
        assert row.options == body.get("options", [])
        assert row.form_schema == body.get("form_schema")
        ttl = (row.expires_at - row.created_at).total_seconds()
        assert ttl == settings.proposals.pause_point_ttl_s


NESTED_FORM = {
    "type": "object",
    "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}
CARD_FORM = {
    "type": "object",
    "properties": {"email": {"type": "string"}, "cardNumber": {"type": "string"}},
}
BAD_REQUESTS: list[tuple[dict[str, Any], str]] = [
    ({"title": "x" * 81}, "title_too_long"),
    ({"title": "   "}, "title_required"),
    ({"description": "y" * 8001}, "description_too_long"),
    ({"kind": "choice", "options": [f"option {i}" for i in range(9)]}, "too_many_options"),
    ({"kind": "choice", "options": ["a", "z" * 201]}, "option_too_long"),
    ({"kind": "choice", "options": ["same", "same"]}, "duplicate_options"),
    ({"kind": "vote"}, "unknown_kind"),
    ({"kind": "choice"}, "too_few_options"),
    ({"kind": "choice", "options": ["only one"]}, "too_few_options"),
    ({"options": ["yes", "no"]}, "unexpected_options"),
    ({"kind": "data_entry"}, "form_schema_required"),
    ({"form_schema": FORM}, "unexpected_form_schema"),
    ({"kind": "data_entry", "form_schema": NESTED_FORM}, "invalid_form_schema"),
    # sent straight to the proposals service (a tampered agent skips its own check)
    ({"kind": "data_entry", "form_schema": CARD_FORM}, "invalid_form_schema"),
    ({"payload": {"blob": "z" * 20_000}}, "payload_too_large"),
    ({"pause_point_id": "nope"}, "invalid_message"),
]


async def test_a_bad_pause_point_gets_a_typed_refusal_and_nothing_is_stored(service):
    for overrides, code in BAD_REQUESTS:
        body = pause_request(new_id("org")) | overrides

        reply = await ask(service, body)

        assert not reply.accepted and reply.pause_point is None, code
        assert reply.reason is not None and reply.reason.code == code, (code, reply.reason)
        assert await pause_row(service, body["pause_point_id"]) is None, code


async def test_an_unparseable_request_without_a_reply_address_is_dead_lettered(
    service, amqp, amqp_url
):
    await amqp.publish(
        json.dumps(pause_request(new_id("org"), title="x" * 81)).encode(),
        exchange=service.topology.name("commands"),
        routing_key=ROUTING_KEYS["proposals.pause-points"],
        persist=True,
        user_id=service.user_id,
    )
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.pause-points"))
    assert dead.headers["x-signoff-reason"] == "invalid_message"


GOOD_ANSWERS: list[tuple[str, dict[str, Any]]] = [
    ("approval", {"action": "approve"}),
    ("approval", {"action": "decline", "reply": "not now"}),
    ("choice", {"action": "option", "option": "Thursday"}),
    ("choice", {"action": "decline"}),
    ("data_entry", {"action": "data", "data": {"email": "a@b.c", "seats": 3}}),
    ("data_entry", {"action": "data", "data": {"email": "a@b.c", "seats": 40, "tier": "gold"}}),
    ("data_entry", {"action": "decline"}),
]


async def test_resolving_over_http_stores_the_answer_and_announces_it(service, amqp_url):
    org = new_id("org")
    user = await service.member(org, "manager")
    mark = await outbox_mark(service)
    resolved: dict[str, dict[str, Any]] = {}
    for kind, answer in GOOD_ANSWERS:
        ppid = await paused(service, org, kind)

        resp = await resolve_http(service, ppid, service.token(user, org), **answer)

        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["result"], body["pause_point"]["status"]) == ("resolved", "resolved")
        row = await pause_row(service, ppid)
        assert (row.status, row.resolution, row.resolved_by) == ("resolved", answer, user)
        assert row.resolved_at is not None
        assert [r.message_type for r in await service.outbox(ppid)] == ["pause_point.resolved"]
        resolved[ppid] = answer

    events = await announced(service, amqp_url, set(resolved))
    assert {key for key, _ in events} == {"pause_point.resolved"}
    assert {view.id: view.resolution for _, view in events} == resolved
    # resolving executes nothing: no contract (for anything) has entered the outbox since
    assert "execution.contract" not in await outbox_since(service, mark)


async def test_resolving_over_amqp_shares_the_code_path_and_replays_the_stored_reply(service):
    org = new_id("org")
    token = await service.approver(org)
    answers: dict[str, dict[str, Any]] = {
        "approval": {"action": "approve"},
        "choice": {"action": "option", "option": "Saturday"},
        "data_entry": {"action": "data", "data": {"email": "x@y.z", "seats": 1}},
    }
    for kind, answer in answers.items():
        ppid = await paused(service, org, kind)
        command = ResolvePausePoint(token=token, pause_point_id=ppid, reply="thanks", **answer)

        first = await service.command(command)
        replay = await service.command(command)

        assert (first.result, first.http_status) == ("resolved", 200), kind
        assert first.pause_point is not None
        assert first.pause_point.resolution == {**answer, "reply": "thanks"}
        assert replay == first
        assert len(await service.outbox(ppid)) == 1


def data(**fields: Any) -> dict[str, Any]:
    return {"action": "data", "data": fields}


MISFITS: list[tuple[str, dict[str, Any], str]] = [
    ("approval", {"action": "option", "option": "Tuesday"}, "action_not_allowed"),
    ("approval", {"action": "data", "data": {}}, "action_not_allowed"),
    ("approval", {"action": "approve", "option": "Tuesday"}, "unexpected_option"),
    ("choice", {"action": "approve"}, "action_not_allowed"),
    ("choice", {"action": "option"}, "option_required"),
    ("choice", {"action": "option", "option": "Sunday"}, "option_not_offered"),
    ("data_entry", {"action": "data"}, "data_required"),
    ("data_entry", {"action": "decline", "data": {"seats": 2}}, "unexpected_data"),
    ("data_entry", data(email="a@b.c"), "invalid_data"),
    ("data_entry", data(email="a@b.c", seats=41), "invalid_data"),
    ("data_entry", data(email="a@b.c", seats=True), "invalid_data"),
    ("data_entry", data(email="a@b.c", seats=2.5), "invalid_data"),
    ("data_entry", data(email="a" * 121, seats=2), "invalid_data"),
    ("data_entry", data(email="a@b.c", seats=2, tier="platinum"), "invalid_data"),
    ("data_entry", data(email="a@b.c", seats=2, extra=1), "invalid_data"),
]


async def test_an_answer_that_does_not_fit_the_kind_is_422_and_changes_nothing(service):
    org = new_id("org")
    token = await service.approver(org)
    for kind, answer, code in MISFITS:
        ppid = await paused(service, org, kind)

        body = problem(await resolve_http(service, ppid, token, **answer), 422, "invalid")
        amqp_reply = await service.command(
            ResolvePausePoint(token=token, pause_point_id=ppid, **answer)
        )

        assert body["reason"]["code"] == code, (answer, body)
        assert (amqp_reply.result, amqp_reply.http_status, amqp_reply.reason.code) == (
            "invalid",
            422,
            code,
        )
        row = await pause_row(service, ppid)
        assert (row.status, row.resolution, row.resolved_by) == ("pending", None, None)
        assert await service.outbox(ppid) == []


async def test_resolving_twice_answers_409_resolved_with_the_stored_resolution(service):
    org = new_id("org")
    ppid = await paused(service, org, "choice")
    first_user = await service.member(org)
    second = await service.approver(org)
    ok = await resolve_http(
        service, ppid, service.token(first_user, org), action="option", option="Tuesday"
    )
    assert ok.status_code == 200
    before = await pause_row(service, ppid)

    again = problem(
        await resolve_http(service, ppid, second, action="decline"), 409, "not_resolvable"
    )
    over_amqp = await service.command(
        ResolvePausePoint(token=second, pause_point_id=ppid, action="option", option="Saturday")
    )

    assert again["reason"]["code"] == "resolved"
    assert again["pause_point"]["resolution"] == {"action": "option", "option": "Tuesday"}
    assert (over_amqp.result, over_amqp.http_status, over_amqp.reason.code) == (
        "not_approvable",
        409,
        "resolved",
    )
    assert await pause_row(service, ppid) == before
    assert len(await service.outbox(ppid)) == 1


async def test_after_expiry_a_pause_point_cannot_be_resolved_even_before_the_sweep(service):
    org = new_id("org")
    ppid = await paused(service, org)
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE proposals.pause_points SET expires_at = now() - interval '1 second' "
                "WHERE id = :i"
            ),
            {"i": ppid},
        )

    body = problem(
        await resolve_http(service, ppid, await service.approver(org), action="approve"),
        409,
        "not_resolvable",
    )

    assert body["reason"]["code"] == "expired"
    row = await pause_row(service, ppid)
    assert (row.status, row.resolution, row.resolved_by) == ("expired", None, None)
    # noticing the expiry announces it (as the sweep would have); no resolution goes out
    [announced] = await service.outbox(ppid)
    assert announced.routing_key == "pause_point.expired"
    event = PausePointResolved.model_validate_json(bytes(announced.body))
    assert (event.pause_point.status, event.pause_point.resolution) == ("expired", None)


async def test_the_expiry_sweep_expires_lapsed_pause_points_and_says_so(service, amqp_url):
    org = new_id("org")
    lapsed, fresh = await paused(service, org), await paused(service, org)
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE proposals.pause_points SET expires_at = now() - interval '1 second' "
                "WHERE id = :i"
            ),
            {"i": lapsed},
        )

    async def swept() -> bool:
        return (await pause_row(service, lapsed)).status == "expired"

    await wait_until(swept, timeout=10, what="the sweep to expire the pause point")
    assert (await pause_row(service, fresh)).status == "pending"
    [(key, view)] = await announced(service, amqp_url, {lapsed})
    assert (key, view.status) == ("pause_point.expired", "expired")
    assert await service.outbox(fresh) == []


async def test_a_viewer_may_look_but_not_resolve_and_other_organizations_see_nothing(service):
    org = new_id("org")
    ppid = await paused(service, org, "choice")
    viewer = service.token(await service.member(org, "viewer"), org)
    stranger = await service.approver(new_id("org"))

    looked = await service.http.get(
        f"/v1/pause-points/{ppid}", headers={"Authorization": f"Bearer {viewer}"}
    )
    forbidden = await resolve_http(service, ppid, viewer, action="option", option="Tuesday")
    hidden = await service.http.get(
        f"/v1/pause-points/{ppid}", headers={"Authorization": f"Bearer {stranger}"}
    )
    unknown = await service.http.get(
        f"/v1/pause-points/{new_id('pp')}", headers={"Authorization": f"Bearer {viewer}"}
    )
    not_theirs = await resolve_http(service, ppid, stranger, action="decline")
    anonymous = await resolve_http(service, ppid, None, action="decline")

    assert looked.status_code == 200
    assert looked.json()["options"] == ["Tuesday", "Thursday", "Saturday"]
    problem(forbidden, 403, "forbidden")
    problem(hidden, 404, "not_found")
    problem(unknown, 404, "not_found")
    problem(not_theirs, 404, "not_found")
    problem(anonymous, 401, "unauthenticated")
    assert (await pause_row(service, ppid)).status == "pending"
    assert await service.outbox(ppid) == []


async def test_the_pending_list_holds_the_organizations_own_pause_points_page_by_page(service):
    org = new_id("org")
    ids = [await paused(service, org, "choice") for _ in range(3)]
    answered = await paused(service, org)
    viewer = service.token(await service.member(org, "viewer"), org)
    manager = await service.approver(org)
    assert (await resolve_http(service, answered, manager, action="approve")).status_code == 200
    elsewhere = await paused(service, new_id("org"))

    async def page(token: str | None, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await service.http.get("/v1/pause-points", params=params, headers=headers)

    first = (await page(viewer, status="pending", limit=2)).json()
    rest = (await page(viewer, status="pending", cursor=first["next_cursor"])).json()
    listed = [item["id"] for item in first["items"] + rest["items"]]
    assert listed == sorted(ids, reverse=True) and rest["next_cursor"] is None
    everything = [item["id"] for item in (await page(viewer)).json()["items"]]
    assert answered in everything and elsewhere not in everything
    problem(await page(None), 401, "unauthenticated")
    problem(await page(viewer, cursor="not-a-cursor"), 400, "invalid_cursor")
    assert (await page(viewer, status="nonsense")).status_code == 422
