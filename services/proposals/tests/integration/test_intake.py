"""Intake: ``ProposalRequested`` over request-reply, idempotent by proposal id."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from proposals_testkit import drain_queue, proposal_request
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ProposalEvent, ProposalRequestReply
from signoff_runtime.topology import ROUTING_KEYS

pytestmark = pytest.mark.integration


async def test_a_request_is_stored_pending_with_audit_and_event(service, amqp_url):
    org = new_id("org")
    reply = await service.propose(org)

    assert reply.accepted and reply.proposal is not None
    row = await service.row(reply.proposal.id)
    assert row.status == "pending"
    assert row.expires_at - row.created_at == timedelta(hours=1)
    assert [a.action for a in await service.audit(row.id)] == ["created"]
    [event] = await service.outbox(row.id)
    assert (event.exchange, event.routing_key) == (
        service.topology.name("events"),
        "proposal.created",
    )
    delivered = await drain_queue(amqp_url, service.topology.name("agent.events"))
    [announced] = [ProposalEvent.model_validate_json(m.body) for m in delivered]
    assert (announced.event, announced.proposal.id) == ("created", row.id)


async def test_a_duplicate_request_returns_the_stored_proposal_and_changes_nothing(service):
    org = new_id("org")
    msg = proposal_request(org)
    first = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    )
    before = (
        await service.row(msg.proposal_id),
        len(await service.audit(msg.proposal_id)),
        len(await service.outbox(msg.proposal_id)),
    )

    # the same message redelivered, and the same proposal sent again under a new message id
    again = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    )
    resent = msg.model_copy(
        update={"message_id": new_id("msg"), "preview": {"member_id": "someone", "points": 9}}
    )
    third = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], resent)
    )

    after = (
        await service.row(msg.proposal_id),
        len(await service.audit(msg.proposal_id)),
        len(await service.outbox(msg.proposal_id)),
    )
    assert first.accepted and again.accepted and third.accepted
    assert first.proposal == again.proposal == third.proposal
    assert before == after
    assert after[1:] == (1, 1)


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"operation_kind": "points.unknown"}, "unknown_operation"),
        ({"contract_version": 7}, "unknown_operation"),
        ({"arguments": {"member_id": "m", "points": 5, "extra": 1}}, "invalid_arguments"),
        ({"preview": {"points": "many"}}, "invalid_preview"),
    ],
)
async def test_a_request_the_deployment_cannot_run_is_refused_and_not_stored(
    service, overrides, code
):
    msg = proposal_request(new_id("org"), **overrides)
    reply = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    )
    assert not reply.accepted and reply.proposal is None
    assert reply.reason is not None and reply.reason.code == code
    assert await service.row(msg.proposal_id) is None


async def test_a_revision_supersedes_a_pending_proposal_in_the_same_transaction(service):
    org = new_id("org")
    old = await service.pending(org)
    reply = await service.propose(
        org,
        supersedes=old,
        request={"points": 7},
        arguments={"member_id": "m", "points": 7},
        preview={"member_id": "m", "points": 7},
    )
    assert reply.accepted and reply.proposal is not None
    new = reply.proposal.id
    old_row = await service.row(old)
    assert (old_row.status, old_row.superseded_by) == ("superseded", new)
    assert [a.action for a in await service.audit(old)] == ["created", "superseded"]
    assert [r.routing_key for r in await service.outbox(old)] == [
        "proposal.created",
        "proposal.superseded",
    ]
    assert (await service.row(new)).status == "pending"


async def test_a_revision_of_a_proposal_no_longer_pending_is_refused_and_stores_nothing(service):
    org = new_id("org")
    old = await service.pending(org)
    token = await service.approver(org)
    assert (await service.approve_http(old, token)).status_code == 200

    msg = proposal_request(org, supersedes=old)
    reply = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    )
    assert not reply.accepted and reply.reason is not None
    assert reply.reason.code == "not_pending"
    assert await service.row(msg.proposal_id) is None
    assert (await service.row(old)).status == "executing"


async def test_a_revision_cannot_supersede_another_organizations_proposal(service):
    theirs = await service.pending(new_id("org"))
    msg = proposal_request(new_id("org"), supersedes=theirs)
    reply = ProposalRequestReply.model_validate_json(
        await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    )
    assert not reply.accepted and reply.reason.code == "not_pending"
    assert (await service.row(theirs)).status == "pending"


async def test_a_malformed_request_gets_a_typed_reply_or_goes_to_the_dead_letter_queue(
    service, amqp, amqp_url
):
    raw = await service.request("commands", ROUTING_KEYS["proposals.requests"], b'{"nope": 1')
    reply = ProposalRequestReply.model_validate_json(raw)
    assert not reply.accepted and reply.reason.code == "invalid_message"

    await amqp.publish(
        json.dumps({"type": "proposal.requested"}).encode(),
        exchange=service.topology.name("commands"),
        routing_key=ROUTING_KEYS["proposals.requests"],
        persist=True,
        user_id=service.user_id,
    )
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.requests"))
    assert dead.headers["x-signoff-reason"] == "invalid_message"
