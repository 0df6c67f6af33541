"""The expiry sweep and the stuck-execution sweep, called directly on the real database."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import pytest_asyncio
from proposals_testkit import enrol, proposal_request, proposer_token
from proposals_toy import build
from signoff_conformance.toy.domain import open_account
from signoff_contracts.ids import new_id
from signoff_proposals import sweeps
from signoff_proposals.context import Context
from signoff_proposals.decisions import decide
from signoff_proposals.intake import store as intake
from signoff_proposals.settings import ProposalsGroup
from signoff_runtime.tokens import issue_token
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(loop_scope="session")
async def ctx(settings, engine, topology, toy_schema):
    tuned = settings.model_copy(
        update={
            "proposals": ProposalsGroup(
                expiry_batch=2, stuck_after_s=10, stuck_backoff_max_s=60, stuck_batch=50
            )
        }
    )
    operations, directory = build()
    return Context(
        settings=tuned, engine=engine, topology=topology, operations=operations, directory=directory
    )


async def _pending(ctx: Context, org: str) -> str:
    token = await proposer_token(ctx.engine, ctx.settings.auth, org)
    reply = await intake.store(ctx, proposal_request(token, await open_account(ctx.engine, org)))
    assert reply.accepted and reply.proposal is not None
    return reply.proposal.id


async def _sql(ctx: Context, statement: str, **params: Any) -> list[Any]:
    async with ctx.engine.begin() as conn:
        result = await conn.execute(text(statement), params)
        return list(result) if result.returns_rows else []


async def _claimed(ctx: Context) -> str:
    org = new_id("org")
    pid = await _pending(ctx, org)
    user = new_id("usr")
    await enrol(ctx.engine, org, "admin", user)
    async with unit_of_work(ctx.engine) as tx:
        reply = await decide.approve(ctx, tx, issue_token(ctx.settings.auth, user, org), pid)
    assert reply.result == "claimed"
    return pid


async def test_the_expiry_sweep_expires_lapsed_pending_proposals_in_bounded_batches(ctx):
    org = new_id("org")
    lapsed = [await _pending(ctx, org) for _ in range(3)]
    fresh = await _pending(ctx, org)
    await _sql(
        ctx,
        "UPDATE proposals.proposals SET expires_at = now() - interval '1 second' "
        "WHERE id = ANY(:ids)",
        ids=lapsed,
    )

    assert await sweeps.expire_once(ctx) == 2  # the batch bound
    while await sweeps.expire_once(ctx):
        pass

    rows = {
        r.id: r.status
        for r in await _sql(
            ctx,
            "SELECT id, status FROM proposals.proposals WHERE id = ANY(:ids)",
            ids=[*lapsed, fresh],
        )
    }
    assert rows == {**dict.fromkeys(lapsed, "expired"), fresh: "pending"}
    for pid in lapsed:
        [entry] = await _sql(
            ctx,
            "SELECT * FROM proposals.audit WHERE proposal_id = :p AND action = 'expired'",
            p=pid,
        )
        assert (entry.actor, entry.from_status, entry.to_status) == (
            "system:proposals",
            "pending",
            "expired",
        )
        events = await _sql(
            ctx,
            "SELECT routing_key FROM proposals.outbox WHERE correlation_id = :p ORDER BY id",
            p=pid,
        )
        assert [e.routing_key for e in events] == ["proposal.created", "proposal.expired"]


async def test_the_expiry_sweep_skips_rows_another_transaction_holds(ctx):
    pid = await _pending(ctx, new_id("org"))
    await _sql(
        ctx,
        "UPDATE proposals.proposals SET expires_at = now() - interval '1 second' WHERE id = :p",
        p=pid,
    )
    async with ctx.engine.connect() as holder:
        await holder.execute(
            text("SELECT 1 FROM proposals.proposals WHERE id = :p FOR UPDATE"), {"p": pid}
        )
        started = time.monotonic()
        while await asyncio.wait_for(sweeps.expire_once(ctx), timeout=5):
            pass
        assert time.monotonic() - started < 5
        [row] = await _sql(ctx, "SELECT status FROM proposals.proposals WHERE id = :p", p=pid)
        assert row.status == "pending"
        await holder.rollback()
    await sweeps.expire_once(ctx)
    [row] = await _sql(ctx, "SELECT status FROM proposals.proposals WHERE id = :p", p=pid)
    assert row.status == "expired"


async def test_a_stuck_execution_gets_the_same_contract_again_with_back_off(ctx):
    pid = await _claimed(ctx)
    await _sql(
        ctx,
        "UPDATE proposals.proposals SET republish_after = now() - interval '1 s' WHERE id = :p",
        p=pid,
    )

    async def copies() -> list[dict[str, Any]]:
        rows = await _sql(
            ctx,
            "SELECT body FROM proposals.outbox WHERE correlation_id = :p "
            "AND message_type = 'execution.contract' ORDER BY id",
            p=pid,
        )
        return [json.loads(bytes(r.body)) for r in rows]

    # the first copy has not left the outbox yet: piling up more would help nobody
    await sweeps.republish_once(ctx)
    assert len(await copies()) == 1
    await _sql(ctx, "UPDATE proposals.outbox SET sent_at = now() WHERE correlation_id = :p", p=pid)

    await sweeps.republish_once(ctx)
    await sweeps.republish_once(ctx)  # backed off: nothing more yet

    first, second = await copies()
    assert second["contract_id"] == first["contract_id"]
    assert second["signature"] == first["signature"]
    assert second["message_id"] != first["message_id"]
    signed = ("arguments", "approved_by", "approved_at", "execute_by", "proposal_id")
    assert {k: second[k] for k in signed} == {k: first[k] for k in signed}
    [row] = await _sql(
        ctx,
        "SELECT republish_count, republish_after - now() AS wait, status "
        "FROM proposals.proposals WHERE id = :p",
        p=pid,
    )
    assert row.republish_count == 1 and row.status == "executing"
    assert 15 < row.wait.total_seconds() <= 20  # stuck_after_s * 2^1
    [entry] = await _sql(
        ctx,
        "SELECT * FROM proposals.audit WHERE proposal_id = :p AND action = 'republished'",
        p=pid,
    )
    assert entry.detail == {
        "contract_id": first["contract_id"],
        "message_id": second["message_id"],
        "copy": 1,
    }


async def test_a_finished_execution_is_never_republished(ctx):
    pid = await _claimed(ctx)
    await _sql(
        ctx,
        "UPDATE proposals.proposals SET status = 'succeeded', "
        "republish_after = now() - interval '1 s' WHERE id = :p",
        p=pid,
    )
    await _sql(ctx, "UPDATE proposals.outbox SET sent_at = now() WHERE correlation_id = :p", p=pid)
    await sweeps.republish_once(ctx)
    rows = await _sql(
        ctx,
        "SELECT 1 FROM proposals.outbox WHERE correlation_id = :p "
        "AND message_type = 'execution.contract'",
        p=pid,
    )
    assert len(rows) == 1
