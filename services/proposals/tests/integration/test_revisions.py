"""Revisions: a pending proposal superseded by a freshly resolved one atomically, or not at all.

The edited request is resolved here, in the transaction that supersedes (no agent is asked).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from signoff_conformance.toy.domain import AMOUNTS, grant_request
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ReviseProposal
from sqlalchemy import text

pytestmark = pytest.mark.integration


async def revise_http(service, proposal_id: str, token: str | None, request: dict[str, Any]):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return await service.http.post(
        f"/v1/proposals/{proposal_id}/revise", headers=headers, json={"request": request}
    )


def problem(resp, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == code
    return body


async def outage(service, proposal_id: str) -> dict[str, Any]:
    """The pending proposal's request, for an outage instead of goodwill."""
    return {**(await service.row(proposal_id)).request, "occasion": "outage"}


async def snapshot(service, proposal_id: str) -> tuple[Any, ...]:
    return (
        await service.row(proposal_id),
        [a.action for a in await service.audit(proposal_id)],
        [r.routing_key for r in await service.outbox(proposal_id)],
    )


async def successors(service, proposal_id: str) -> int:
    """How many proposals name ``proposal_id`` as the one they supersede (in their audit)."""
    async with service.engine.connect() as conn:
        return (
            await conn.execute(
                text(
                    "SELECT count(*) FROM proposals.audit WHERE action = 'created' "
                    "AND detail->>'supersedes' = :p"
                ),
                {"p": proposal_id},
            )
        ).scalar_one()


async def test_a_revision_supersedes_the_pending_proposal_in_one_step(service):
    org = new_id("org")
    conversation = new_id("cnv")
    old = await service.pending(org, conversation_id=conversation)
    user = await service.member(org, "manager")

    edited = await outage(service, old)
    resp = await revise_http(service, old, service.token(user, org), edited)

    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["result"] == "revised"
    new = body["proposal"]["id"]
    assert new != old and body["proposal"]["status"] == "pending"
    cents = AMOUNTS[("basic", "outage")]
    assert body["proposal"]["preview"]["amount_cents"] == cents != AMOUNTS[("basic", "goodwill")]

    old_row, new_row = await service.row(old), await service.row(new)
    assert (old_row.status, old_row.superseded_by) == ("superseded", new)
    assert new_row.status == "pending" and new_row.requested_by == user
    # one resolve of the edited request, on the stored scope: what runs is what is shown
    shown = {"occasion": "outage", "plan": "basic", "amount_cents": cents}
    assert new_row.arguments == {"account_id": old_row.resource_id, **shown}
    assert new_row.preview == {"account_name": "Ada's Bakery", **shown}
    assert new_row.request == edited
    for column in ("organization_id", "conversation_id", "section", "resource_id"):
        assert getattr(new_row, column) == getattr(old_row, column), column
    assert new_row.operation_kind == old_row.operation_kind
    assert new_row.expires_at - new_row.created_at == old_row.expires_at - old_row.created_at
    assert new_row.created_at > old_row.created_at
    old_audit, new_audit = await service.audit(old), await service.audit(new)
    assert [(a.action, a.to_status, a.actor) for a in old_audit][1:] == [
        ("superseded", "superseded", user)
    ]
    assert [(a.action, a.detail["supersedes"]) for a in new_audit] == [("created", old)]
    assert [r.routing_key for r in await service.outbox(old)] == [
        "proposal.created",
        "proposal.superseded",
    ]
    assert [r.routing_key for r in await service.outbox(new)] == ["proposal.created"]

    # the old one can no longer be approved; the new one can
    token = service.token(user, org)
    late = problem(await service.approve_http(old, token), 409, "not_approvable")
    assert late["reason"]["code"] == "superseded"
    assert (await service.approve_http(new, token)).status_code == 200
    assert await service.contracts(old) == []


async def test_revise_over_amqp_is_the_same_path_and_a_replay_decides_nothing_again(service):
    org = new_id("org")
    old = await service.pending(org)
    command = ReviseProposal(
        token=await service.approver(org), proposal_id=old, request=await outage(service, old)
    )

    first = await service.command(command)
    replay = await service.command(command)

    assert (first.result, first.http_status) == ("revised", 200)
    assert first.proposal is not None and first.proposal.preview["occasion"] == "outage"
    assert first.causation_id == command.message_id
    assert replay == first
    assert (await service.row(old)).superseded_by == first.proposal.id
    assert await successors(service, old) == 1


async def test_a_claimed_declined_or_lapsed_proposal_is_not_revised(service):
    org = new_id("org")
    token = await service.approver(org)
    claimed, declined, lapsed = [await service.pending(org) for _ in range(3)]
    assert (await service.approve_http(claimed, token)).status_code == 200
    resp = await service.http.post(
        f"/v1/proposals/{declined}/decline", headers={"Authorization": f"Bearer {token}"}
    )
    assert resp.status_code == 200
    await service.set(lapsed, "expires_at = now() - interval '1 second'")

    refusals = {
        pid: problem(
            await revise_http(service, pid, token, await outage(service, pid)),
            409,
            "not_approvable",
        )
        for pid in (claimed, declined, lapsed)
    }

    assert refusals[claimed]["reason"]["code"] == "in_progress"
    assert refusals[declined]["reason"]["code"] == "declined"
    assert refusals[lapsed]["reason"]["code"] == "expired"
    assert (await service.row(lapsed)).status == "expired"
    for pid in (claimed, declined, lapsed):
        assert await successors(service, pid) == 0


async def test_who_may_revise_is_checked_like_an_approval(service):
    org = new_id("org")
    pid = await service.pending(org)
    viewer = service.token(await service.member(org, "viewer"), org)
    stranger = await service.approver(new_id("org"))
    before = await service.row(pid)
    edited = await outage(service, pid)

    forbidden = await revise_http(service, pid, viewer, edited)
    hidden = await revise_http(service, pid, stranger, edited)
    anonymous = await revise_http(service, pid, None, edited)
    bad = {**edited, "occasion": "birthday"}
    bad_request = await revise_http(service, pid, await service.approver(org), bad)

    problem(forbidden, 403, "forbidden")
    problem(hidden, 404, "not_found")
    problem(anonymous, 401, "unauthenticated")
    assert problem(bad_request, 422, "invalid")["reason"]["code"] == "invalid_request"
    assert [a.action for a in await service.audit(pid)] == ["created", "revise_forbidden"]
    assert await service.row(pid) == before


async def test_a_request_the_operation_refuses_changes_nothing(service):
    org = new_id("org")
    pid = await service.pending(org)
    before = await snapshot(service, pid)
    theirs = await service.account(new_id("org"))  # another organization's account

    body = problem(
        await revise_http(service, pid, await service.approver(org), grant_request(theirs)),
        422,
        "invalid",
    )

    assert body["reason"] == {"code": "account_not_found", "params": {"account_id": theirs}}
    assert await snapshot(service, pid) == before
    assert await successors(service, pid) == 0


async def test_concurrent_approve_and_revise_exactly_one_wins(service):
    org = new_id("org")
    token = await service.approver(org)
    for delay in (0.0, 0.0, 0.0, 0.01, 0.02, 0.05):
        pid = await service.pending(org)
        edited = await outage(service, pid)

        async def approve_later(pid: str = pid, delay: float = delay) -> int:
            await asyncio.sleep(delay)
            return (await service.approve_http(pid, token)).status_code

        revised, approved = await asyncio.gather(
            revise_http(service, pid, token, edited), approve_later()
        )

        assert sorted([revised.status_code, approved]) == [200, 409], (delay, revised.text)
        row = await service.row(pid)
        contracts = await service.contracts(pid)
        if approved == 200:
            assert revised.json()["reason"]["code"] == "in_progress"
            assert (row.status, len(contracts), await successors(service, pid)) == (
                "executing",
                1,
                0,
            )
        else:
            assert (row.status, contracts, await successors(service, pid)) == (
                "superseded",
                [],
                1,
            )


async def test_a_revision_fits_a_full_conversation_because_it_replaces_one(service, settings):
    org = new_id("org")
    conversation = new_id("cnv")
    limit = settings.proposals.max_pending_per_conversation
    pids = [await service.pending(org, conversation_id=conversation) for _ in range(limit)]

    edited = await outage(service, pids[0])
    resp = await revise_http(service, pids[0], await service.approver(org), edited)
    extra = await service.propose(org, conversation_id=conversation)

    assert resp.status_code == 200, resp.text
    assert not extra.accepted and extra.reason.code == "conversation_quota_exceeded"
