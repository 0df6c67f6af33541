"""Approval commands over AMQP: typed replies always, replays answered from the inbox."""

from __future__ import annotations

import pytest
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import (
    ApproveProposal,
    DeclineProposal,
)
from signoff_runtime.topology import ROUTING_KEYS

pytestmark = pytest.mark.integration


async def test_a_replayed_command_gets_the_stored_reply_and_decides_nothing_again(service):
    org = new_id("org")
    pid = await service.pending(org)
    command = ApproveProposal(token=await service.approver(org), proposal_id=pid)

    first = await service.command(command)
    replay = await service.command(command)

    assert first.result == "claimed" and first.causation_id == command.message_id
    assert replay == first  # the very reply, message id included — not "in_progress"
    assert len(await service.contracts(pid)) == 1
    assert [a.action for a in await service.audit(pid)] == ["created", "claimed"]


async def test_decline_over_amqp_and_the_table_afterwards(service):
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)

    declined = await service.command(
        DeclineProposal(token=token, proposal_id=pid, reason="duplicate request")
    )
    approve = await service.approve_amqp(pid, token)

    assert (declined.result, declined.http_status) == ("declined", 200)
    assert declined.proposal.decline_reason == "duplicate request"
    assert (approve.result, approve.http_status, approve.reason.code) == (
        "not_approvable",
        409,
        "declined",
    )
    assert await service.contracts(pid) == []


async def test_scope_and_role_refusals_are_typed_replies(service):
    org = new_id("org")
    pid = await service.pending(org)
    viewer = await service.member(org, "viewer")
    stranger = await service.approver(new_id("org"))

    forbidden = await service.approve_amqp(pid, service.token(viewer, org))
    not_found = await service.approve_amqp(pid, stranger)

    assert (forbidden.result, forbidden.http_status, forbidden.proposal) == ("forbidden", 403, None)
    assert (not_found.result, not_found.http_status, not_found.proposal) == ("not_found", 404, None)
    assert await service.contracts(pid) == []


async def test_a_malformed_command_is_answered_invalid_or_dead_lettered(service, amqp, amqp_url):
    answered = await service.command(b'{"type": "approval.approve", "token": 3}')
    assert (answered.result, answered.reason.code) == ("invalid", "invalid_message")

    await amqp.publish(
        b"not json at all",
        exchange=service.topology.name("commands"),
        routing_key=ROUTING_KEYS["proposals.approvals"],
        persist=True,
        user_id=service.user_id,
        content_type="application/json",
    )
    [dead] = await drain_queue(amqp_url, service.topology.dlq("proposals.approvals"))
    assert dead.body == b"not json at all"
    assert dead.headers["x-signoff-reason"] == "invalid_message"
