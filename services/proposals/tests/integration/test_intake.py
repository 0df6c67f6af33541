"""Intake: the agent asks (v2 ``ProposalRequested``), this service makes and stores the contract.

Request-reply, idempotent by proposal id per person. The person is the token's (or a resolved
pause point's), never a field; the arguments and preview are this service's own ``resolve``.
"""

from __future__ import annotations

import json
from datetime import timedelta

import aio_pika
import pytest
from proposals_testkit import KIND, SECTION, drain_queue, pause_request, proposal_request
from proposals_toy import STAMPED
from signoff_conformance.toy.domain import AMOUNTS, GrantCredit
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import PausePointRequestReply, ProposalEvent, ProposalRequestReply
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import LimitsSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import ROUTING_KEYS

pytestmark = pytest.mark.integration
RATE = 3


@pytest.fixture
def settings(settings: ProposalsSettings) -> ProposalsSettings:
    """A low proposal rate, so one test can reach it (each other test uses fresh people)."""
    return settings.model_copy(update={"limits": LimitsSettings(proposals_per_minute=RATE)})


async def test_a_request_is_resolved_here_and_stored_pending_with_audit_and_event(
    service, amqp_url
):
    org = new_id("org")
    user = await service.member(org, "manager")
    account = await service.account(org, "Rue Cler Bakery")
    conversation = new_id("cnv")
    msg = proposal_request(
        service.token(user, org),
        account,
        request={"occasion": "outage"},
        conversation_id=conversation,
    )
    reply = await service.send(msg)

    assert reply.accepted and reply.proposal is not None
    row = await service.row(reply.proposal.id)
    assert (row.status, row.organization_id, row.requested_by) == ("pending", org, user)
    # the contract is the toy operation's resolve of this request, from this account's row
    cents = AMOUNTS[("basic", "outage")]
    assert row.arguments == {
        "account_id": account,
        "occasion": "outage",
        "plan": "basic",
        "amount_cents": cents,
    }
    assert row.preview == reply.proposal.preview
    assert row.preview == {
        "account_name": "Rue Cler Bakery",
        "plan": "basic",
        "occasion": "outage",
        "amount_cents": cents,
    }
    assert (row.section, row.operation_kind, row.resource_id) == (SECTION, KIND, account)
    assert row.request == {"account_id": account, "occasion": "outage", "note": ""}  # as parsed
    assert GrantCredit.ttl != timedelta(hours=24)  # not the default: the operation's own
    assert row.expires_at - row.created_at == GrantCredit.ttl
    [audit] = await service.audit(row.id)
    assert (audit.action, audit.actor, audit.detail["via"]) == ("created", user, "token")
    [event] = await service.outbox(row.id)
    # a conversation's proposal: announced through the exchange the agent reads
    assert (event.exchange, event.routing_key) == (
        service.topology.name("conversation-events"),
        "proposal.created",
    )
    delivered = await drain_queue(amqp_url, service.topology.name("agent.events"))
    events = [ProposalEvent.model_validate_json(m.body) for m in delivered]
    # the queue is the module's: other tests' proposals may be announced there too (an expiry)
    [announced] = [e for e in events if e.proposal.id == row.id]
    assert (announced.event, announced.proposal.conversation_id) == ("created", conversation)


async def test_every_event_reaches_readers_of_events_and_only_a_conversations_the_agent(
    service, amqp_url
):
    """A proposal with no conversation (the machine-facing endpoint's) is announced on ``events``
    alone; one of a conversation through ``conversation-events``, which forwards it there."""
    org = new_id("org")
    token = service.token(await service.member(org, "manager"), org)
    read: list[str] = []
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        reader = await channel.declare_queue(exclusive=True)  # a third party's reader
        await reader.bind(service.topology.name("events"), routing_key="proposal.#")
        machine = await service.send(proposal_request(token, await service.account(org)))
        chat = await service.send(
            proposal_request(token, await service.account(org), conversation_id=new_id("cnv"))
        )
        assert machine.proposal is not None and chat.proposal is not None
        ids = {machine.proposal.id, chat.proposal.id}

        async def both_read() -> bool:
            while (message := await reader.get(no_ack=True, fail=False)) is not None:
                read.append(ProposalEvent.model_validate_json(message.body).proposal.id)
            return ids <= set(read)

        await wait_until(both_read, what="both proposals' events on a reader of events")
    # both were routed once they are on the reader's queue: the agent's has all it will get
    handed = await drain_queue(amqp_url, service.topology.name("agent.events"), at_least=0)
    to_agent = [ProposalEvent.model_validate_json(m.body).proposal.id for m in handed]
    assert sorted(i for i in read if i in ids) == sorted(ids)  # each once
    assert [i for i in to_agent if i in ids] == [chat.proposal.id]


async def test_the_preview_shown_and_the_arguments_stored_come_from_one_resolve_call(service):
    """Each ``resolve`` of the stamped credit stamps a fresh id into arguments and preview."""
    org = new_id("org")
    reply = await service.propose(org, operation_kind=STAMPED)
    assert reply.accepted, reply
    row = await service.row(reply.proposal.id)
    assert row.arguments["resolution"] == row.preview["resolution"]
    assert reply.proposal.preview == row.preview

    token = await _token(service, org)
    revised = await service.http.post(
        f"/v1/proposals/{row.id}/revise",
        json={"request": {**row.request, "occasion": "outage"}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert revised.status_code == 200, revised.text
    new = await service.row(revised.json()["proposal"]["id"])
    assert new.arguments["resolution"] == new.preview["resolution"] != row.preview["resolution"]
    assert new.arguments["occasion"] == new.preview["occasion"] == "outage"


async def test_fields_of_the_agents_making_are_ignored_what_runs_is_what_was_resolved(service):
    """A tampered agent adds a harmless preview, harmful arguments and another organization and
    person to a v2 request: none of it is read (readers ignore unknown fields)."""
    org, elsewhere = new_id("org"), new_id("org")
    user = await service.member(org, "manager")
    account, mallorys = await service.account(org), await service.account(elsewhere)
    msg = proposal_request(service.token(user, org), account)
    tampered = json.loads(msg.model_dump_json())
    resolved = {"account_id": account, "occasion": "goodwill", "plan": "basic"}
    tampered.update(
        arguments={**resolved, "account_id": mallorys, "amount_cents": 999_999},
        preview={"account_name": "Ada's Bakery", "plan": "basic", "occasion": "goodwill"},
        organization_id=elsewhere,
        requested_by="usr_mallory",
        section="elsewhere",
    )
    reply = await service.send(json.dumps(tampered).encode())

    assert reply.accepted, reply
    row = await service.row(msg.proposal_id)
    cents = AMOUNTS[("basic", "goodwill")]
    assert row.arguments == {**resolved, "amount_cents": cents}
    assert row.preview == {**tampered["preview"], "amount_cents": cents}
    assert (row.organization_id, row.requested_by, row.section) == (org, user, SECTION)


async def test_a_v1_request_carrying_the_agents_contract_is_refused_and_dead_lettered(
    service, amqp, amqp_url
):
    """The old shape (arguments, preview, organization and person of the agent's making)."""
    org = new_id("org")
    v1 = {
        "type": "proposal.requested",
        "version": 1,
        "proposal_id": new_id("prp"),
        "organization_id": org,
        "requested_by": "usr_agent",
        "section": SECTION,
        "resource_id": "acc_1",
        "operation_kind": KIND,
        "contract_version": 1,
        "request": {"account_id": "acc_1", "occasion": "goodwill"},
        "arguments": {
            "account_id": "acc_mallory",
            "occasion": "outage",
            "plan": "pro",
            "amount_cents": 999_999,
        },
        "preview": {
            "account_name": "Ada's Bakery",
            "plan": "basic",
            "occasion": "goodwill",
            "amount_cents": 500,
        },
    }
    reply = await service.send(json.dumps(v1).encode())
    assert not reply.accepted and reply.reason.code == "unsupported_version"
    assert await service.row(v1["proposal_id"]) is None
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.requests"))
    assert dead.headers["x-signoff-reason"] == "unsupported_version"

    pause = {
        "type": "pause_point.requested",
        "version": 1,
        "pause_point_id": new_id("pp"),
        "organization_id": org,
        "requested_by": "usr_agent",
        "title": "Go ahead?",
        "description": "Nothing happens until you say so.",
    }
    raw = await service.request(
        "commands", ROUTING_KEYS["proposals.pause-points"], json.dumps(pause).encode()
    )
    refused = PausePointRequestReply.model_validate_json(raw)
    assert not refused.accepted and refused.reason
    assert refused.reason.code == "unsupported_version"


async def test_a_duplicate_request_returns_the_stored_proposal_and_resolves_nothing(service):
    org = new_id("org")
    msg = await service.proposal_request(org)
    first = await service.send(msg)
    before = (
        await service.row(msg.proposal_id),
        len(await service.audit(msg.proposal_id)),
        len(await service.outbox(msg.proposal_id)),
    )

    # the same message redelivered, and the same proposal id asked again with another request
    again = await service.send(msg)
    other_request = {**msg.request, "occasion": "outage"}
    resent = msg.model_copy(update={"message_id": new_id("msg"), "request": other_request})
    third = await service.send(resent)

    after = (
        await service.row(msg.proposal_id),
        len(await service.audit(msg.proposal_id)),
        len(await service.outbox(msg.proposal_id)),
    )
    assert first.accepted and again.accepted and third.accepted
    assert first.proposal == again.proposal == third.proposal
    assert before == after
    assert after[1:] == (1, 1)

    # another person (even of the same organization) asking for that id gets nothing of it
    other = msg.model_copy(
        update={"message_id": new_id("msg"), "token": await _token(service, org)}
    )
    stolen = await service.send(other)
    assert not stolen.accepted and stolen.proposal is None
    assert (stolen.refusal, stolen.reason.code) == ("not_stored", "proposal_id_conflict")


async def _token(service, org: str, role: str = "admin") -> str:
    return service.token(await service.member(org, role), org)


@pytest.mark.parametrize(
    ("overrides", "refusal", "code"),
    [
        ({"operation_kind": "account.unknown"}, "invalid", "unknown_operation"),
        ({"contract_version": 7}, "invalid", "unknown_operation"),
        ({"request": {"amount_cents": 5}}, "invalid", "invalid_request"),
        ({"request": {"occasion": "birthday"}}, "invalid", "invalid_request"),
        ({"request": {"account_id": "acc_missing"}}, "rejected", "account_not_found"),
    ],
)
async def test_a_request_that_cannot_be_resolved_is_refused_and_not_stored(
    service, overrides, refusal, code
):
    msg = await service.proposal_request(new_id("org"), **overrides)
    reply = await service.send(msg)
    assert not reply.accepted and reply.proposal is None
    assert (reply.refusal, reply.reason.code) == (refusal, code)
    assert await service.row(msg.proposal_id) is None


@pytest.mark.parametrize(
    ("who", "refusal", "code"),
    [
        ("viewer", "forbidden", "forbidden"),
        ("former member", "forbidden", "not_a_member"),
        ("bad token", "unauthenticated", "unauthenticated"),
        ("expired token", "unauthenticated", "unauthenticated"),
    ],
)
async def test_only_a_current_member_with_a_proposing_role_may_propose(service, who, refusal, code):
    org = new_id("org")
    user = await service.member(org, "viewer" if who == "viewer" else "admin")
    token = service.token(user, org, ttl_s=-60 if who == "expired token" else None)
    if who == "former member":
        await service.remove_member(org, user)
    if who == "bad token":
        token = token[:-4] + "AAAA"
    msg = proposal_request(token, await service.account(org))
    reply = await service.send(msg)
    assert not reply.accepted and (reply.refusal, reply.reason.code) == (refusal, code)
    assert await service.row(msg.proposal_id) is None


async def test_each_persons_proposals_are_rate_limited(service):
    org = new_id("org")
    token, account = await _token(service, org), await service.account(org)
    for _ in range(RATE):
        assert (await service.send(proposal_request(token, account))).accepted
    over = await service.send(proposal_request(token, account))
    assert not over.accepted and over.refusal == "rate_limited"
    assert over.reason.code == "rate_limited" and over.reason.params["retry_after_s"] >= 1
    # someone else of the organization is not slowed down by it
    assert (await service.send(proposal_request(await _token(service, org), account))).accepted


async def test_an_event_started_turn_speaks_through_a_recently_resolved_pause_point(service):
    """No token: the person and organization are those of the conversation's pause point that
    a person resolved, and only while it is recent."""
    org, chat = new_id("org"), new_id("cnv")
    owner = await service.member(org, "manager")
    # team-answerable, so that the person who resolves it is not the one it speaks for
    stored = await _pause(
        service, service.token(owner, org), conversation_id=chat, answerable_by="team"
    )
    resolver = await _token(service, org)
    answered = await service.http.post(
        f"/v1/pause-points/{stored}/resolve",
        json={"action": "approve"},
        headers={"Authorization": f"Bearer {resolver}"},
    )
    assert answered.status_code == 200, answered.text

    ok = proposal_request(
        None, await service.account(org), resumed_from=stored, conversation_id=chat
    )
    reply = await service.send(ok)
    assert reply.accepted, reply
    row = await service.row(ok.proposal_id)
    assert (row.organization_id, row.requested_by) == (org, owner)
    assert (await service.audit(row.id))[0].detail["resumed_from"] == stored

    elsewhere = ok.model_copy(update={"proposal_id": new_id("prp"), "conversation_id": "cnv_x"})
    assert (await service.send(elsewhere)).reason.code == "resumed_from_not_usable"
    pending = await _pause(service, service.token(owner, org), conversation_id=chat)
    unresolved = ok.model_copy(update={"proposal_id": new_id("prp"), "resumed_from": pending})
    assert (await service.send(unresolved)).reason.code == "resumed_from_not_usable"
    await service.set_pause(stored, "resolved_at = now() - interval '1 hour'")
    late = ok.model_copy(update={"proposal_id": new_id("prp")})
    refused = await service.send(late)
    assert (refused.refusal, refused.reason.code) == ("unauthenticated", "resumed_from_not_usable")


async def _pause(service, token: str | None, **overrides: object) -> str:
    raw = await service.request(
        "commands", ROUTING_KEYS["proposals.pause-points"], pause_request(token, **overrides)
    )
    reply = PausePointRequestReply.model_validate_json(raw)
    assert reply.accepted and reply.pause_point is not None, reply
    return reply.pause_point.id


async def test_a_malformed_request_gets_a_typed_reply_or_goes_to_the_dead_letter_queue(
    service, amqp, amqp_url
):
    raw = await service.request("commands", ROUTING_KEYS["proposals.requests"], b'{"nope": 1')
    reply = ProposalRequestReply.model_validate_json(raw)
    assert not reply.accepted and reply.reason and reply.reason.code == "invalid_message"

    await amqp.publish(
        json.dumps({"type": "proposal.requested", "version": 2}).encode(),
        exchange=service.topology.name("commands"),
        routing_key=ROUTING_KEYS["proposals.requests"],
        persist=True,
        user_id=service.user_id,
    )
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.requests"))
    assert dead.headers["x-signoff-reason"] == "invalid_message"
