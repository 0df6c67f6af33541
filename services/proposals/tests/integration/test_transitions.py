"""The lifecycle table, walked on the real database through ``transitions.transition``.

Every pair of statuses is tried: a move the table has works (the status, its audit row and its
messages as ``domain.step`` says), every other raises ``IllegalTransition`` and writes nothing —
no status, no audit row, no outbox row. The clock condition is part of the move: a person's move
out of ``pending`` does not happen once the proposal has lapsed, expiry not before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client import REGISTRY
from proposals_testkit import KIND, SECTION, enrol, proposal_request, proposer_token
from proposals_toy import context
from signoff_conformance.toy.domain import open_account
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.status import TRANSITIONS, IllegalTransition, ProposalStatus
from signoff_contracts.v1 import ApproveProposal, OutcomeReported
from signoff_proposals.context import Context
from signoff_proposals.decisions import commands
from signoff_proposals.intake import store as intake
from signoff_proposals.lifecycle import domain, transitions
from signoff_proposals.lifecycle import metrics as lifecycle_metrics
from signoff_proposals.lifecycle import repository as repo
from signoff_proposals.outcomes import recording
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.statements import statements
from signoff_runtime.tokens import issue_token
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import text

pytestmark = pytest.mark.integration
S = ProposalStatus
PAIRS = [(a, b) for a in S for b in S]


@pytest_asyncio.fixture(loop_scope="session")
async def ctx(settings, engine, topology, toy_schema):
    return context(settings, engine, topology)


async def _proposal(ctx: Context, status: S, *, lapsed: bool = False) -> str:
    """A proposal created through ``create``, then put in ``status`` (test set-up only)."""
    new = repo.NewProposal(
        proposal_id=new_id("prp"),
        organization_id=new_id("org"),
        requested_by=new_id("usr"),
        conversation_id=None,
        section=SECTION,
        resource_id=new_id("acc"),
        operation_kind=KIND,
        contract_version=1,
        request={"account_id": "acc_1", "occasion": "goodwill"},
        arguments={
            "account_id": "acc_1",
            "occasion": "goodwill",
            "plan": "basic",
            "amount_cents": 500,
        },
        preview={
            "account_name": "Ada's Bakery",
            "plan": "basic",
            "occasion": "goodwill",
            "amount_cents": 500,
        },
    )
    async with unit_of_work(ctx.engine) as tx:
        row = await transitions.create(
            ctx, tx, new, timedelta(hours=1), detail={}, causation_id=new_id("msg")
        )
        assert row is not None
        await tx.conn.execute(
            text(
                "UPDATE proposals.proposals SET status = :s, expires_at = CASE WHEN :lapsed "
                "THEN now() - interval '1 second' ELSE expires_at END WHERE id = :i"
            ),
            {"s": status.value, "lapsed": lapsed, "i": row.id},
        )
    return row.id


async def _written(ctx: Context, pid: str) -> tuple[str, list[Any], list[Any]]:
    """The proposal's status, audit rows and outbox rows as they stand."""
    async with ctx.engine.connect() as conn:
        params = {"i": pid}
        status = await conn.scalar(
            text("SELECT status FROM proposals.proposals WHERE id = :i"), params
        )
        audit = list(
            await conn.execute(
                text("SELECT * FROM proposals.audit WHERE proposal_id = :i ORDER BY id"), params
            )
        )
        sent = list(
            await conn.execute(
                text("SELECT * FROM proposals.outbox WHERE correlation_id = :i ORDER BY id"), params
            )
        )
    return status, audit, sent


def _values(target: S) -> dict[str, Any]:
    """What a claim stores besides the status (the contract is built from it)."""
    if target is not S.EXECUTING:
        return {}
    return {
        "decided_by": "usr_approver",
        "decided_at": repo.DB_CLOCK,
        "contract_id": new_id("ctr"),
        "execute_by": repo.Later(timedelta(minutes=5)),
    }


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=str)
async def test_every_move_of_the_table_works_and_every_other_is_refused(ctx, source, target):
    pid = await _proposal(ctx, source, lapsed=target is S.EXPIRED)
    before = await _written(ctx, pid)

    async def move() -> Any:
        async with unit_of_work(ctx.engine) as tx:
            return await transitions.transition(
                ctx,
                tx,
                pid,
                source=source,
                target=target,
                actor="usr_actor",
                values=_values(target),
                detail={"note": "walked"},
            )

    if target not in TRANSITIONS[source]:
        with pytest.raises(IllegalTransition):
            await move()
        assert await _written(ctx, pid) == before  # nothing written
        return

    moved = await move()
    assert moved is not None and moved.status == target.value
    status, audit, sent = await _written(ctx, pid)
    step = domain.step(source, target)
    assert status == target.value
    [entry] = audit[len(before[1]) :]
    assert (entry.actor, entry.action, entry.from_status, entry.to_status) == (
        "usr_actor",
        step.action,
        source.value,
        target.value,
    )
    assert entry.detail["note"] == "walked"
    new_messages = sent[len(before[2]) :]
    expected = ["execution.contract"] if target is S.EXECUTING else []
    expected.append("proposal.event")
    assert [m.message_type for m in new_messages] == expected
    event = json.loads(bytes(new_messages[-1].body))
    assert (new_messages[-1].routing_key, event["event"]) == (f"proposal.{step.event}", step.event)
    assert event["proposal"]["status"] == target.value
    if target is S.EXECUTING:
        contract = json.loads(bytes(new_messages[0].body))
        assert contract["contract_id"] == entry.detail["contract_id"] == moved.contract_id


@pytest.mark.parametrize("target", sorted(TRANSITIONS[S.PENDING] - {S.EXPIRED}), ids=str)
async def test_a_persons_move_does_not_happen_once_the_proposal_has_lapsed(ctx, target):
    pid = await _proposal(ctx, S.PENDING, lapsed=True)
    before = await _written(ctx, pid)
    async with unit_of_work(ctx.engine) as tx:
        moved = await transitions.transition(
            ctx, tx, pid, source=S.PENDING, target=target, actor="usr_a", values=_values(target)
        )
    assert moved is None
    assert await _written(ctx, pid) == before


async def test_expiry_does_not_happen_before_the_proposal_has_lapsed(ctx):
    pid = await _proposal(ctx, S.PENDING)
    before = await _written(ctx, pid)
    async with unit_of_work(ctx.engine) as tx:
        assert (
            await transitions.transition(
                ctx, tx, pid, source=S.PENDING, target=S.EXPIRED, actor="usr_a"
            )
            is None
        )
        assert await transitions.expire(ctx, tx, noticed_by="test", proposal_id=pid) == []
    assert await _written(ctx, pid) == before


async def test_a_move_from_a_status_the_row_no_longer_has_writes_nothing(ctx):
    """The conditional UPDATE is the guard: the table allows pending → declined, the row is not
    pending any more."""
    pid = await _proposal(ctx, S.EXECUTING)
    before = await _written(ctx, pid)
    async with unit_of_work(ctx.engine) as tx:
        assert (
            await transitions.transition(
                ctx, tx, pid, source=S.PENDING, target=S.DECLINED, actor="usr_a"
            )
            is None
        )
    assert await _written(ctx, pid) == before


async def test_creation_is_audited_and_announced(ctx):
    pid = await _proposal(ctx, S.PENDING)
    status, [entry], [event] = await _written(ctx, pid)
    assert (status, entry.action, entry.from_status, entry.to_status) == (
        "pending",
        "created",
        None,
        "pending",
    )
    assert event.routing_key == "proposal.created"


async def test_the_claim_and_the_outcome_cost_what_they_did(ctx):
    """Round trips on the hot paths: a claim is the command's inbox row and its stored reply,
    the proposal (read with the lock the quorum step needs), the membership, the approval
    policy's quorum step (the approval recorded and added to the row's copy: one), the one
    UPDATE and one statement of audit row + contract + event; an outcome is the inbox row with
    the lock, the UPDATE, and audit row + event. (A performance budget: more is a regression.)
    Each of them but the membership is a hot statement: one back on SQLAlchemy Core costs its
    CPU again (docs/benchmarks.md)."""
    org = new_id("org")
    proposed = await intake.store(
        ctx,
        proposal_request(
            await proposer_token(ctx.engine, ctx.settings.auth, org),
            await open_account(ctx.engine, org),
        ),
    )
    assert proposed.proposal is not None
    pid = proposed.proposal.id
    approver = issue_token(ctx.settings.auth, await enrol(ctx.engine, org), org)

    command = ApproveProposal(token=approver, proposal_id=pid)
    with statements(ctx.engine) as (core, hot):
        async with unit_of_work(ctx.engine) as tx:
            assert (await commands.decided(ctx, tx, command)).result == "claimed"
    assert len(core + hot) == 2 + 4 + 1, core + hot
    # all but the membership (the domain's directory, not this service's SQL) are hot statements
    assert len(core) == 1 and "conformance_toy.members" in core[0], core

    async with ctx.engine.connect() as conn:
        contract_id = await conn.scalar(
            text("SELECT contract_id FROM proposals.proposals WHERE id = :i"), {"i": pid}
        )
    report = OutcomeReported(
        proposal_id=pid,
        contract_id=contract_id,
        operation_kind=KIND,
        outcome=Succeeded(result={}),
        correlation_id=pid,
    )
    with statements(ctx.engine) as (core, hot):
        assert await recording.record(ctx, report)
    assert len(core + hot) == 3 and not core, (core, hot)


def _gauge() -> dict[str, float]:
    return {
        s.value: REGISTRY.get_sample_value("signoff_proposals_in_state", {"status": s.value}) or 0.0
        for s in S
    }


async def _counted(ctx: Context) -> dict[str, float]:
    async with ctx.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT status, count(*) FROM proposals.proposals GROUP BY status")
        )
        found = {status: float(n) for status, n in rows}
    return {s.value: found.get(s.value, 0.0) for s in S}


async def test_the_state_gauge_counts_open_statuses_often_and_every_status_at_its_pace(ctx):
    """The open statuses follow the table within a round; settled ones wait for the next full
    count (``totals_interval_s``), which does not come within this test."""
    gauge = asyncio.create_task(
        lifecycle_metrics.refresh_states(ctx.engine, interval_s=0.05, totals_interval_s=3600)
    )
    try:
        start = await _counted(ctx)

        async def counted_all() -> bool | None:
            return _gauge() == start or None

        await wait_until(counted_all, what="the first, full count")
        settles = await _proposal(ctx, S.PENDING)
        await _proposal(ctx, S.NEEDS_RECONCILIATION)
        async with ctx.engine.begin() as conn:
            await conn.execute(
                text("UPDATE proposals.proposals SET status = 'succeeded' WHERE id = :i"),
                {"i": settles},
            )
        now = await _counted(ctx)
        assert now["succeeded"] == start["succeeded"] + 1
        assert now["needs_reconciliation"] == start["needs_reconciliation"] + 1

        async def open_caught_up() -> bool | None:
            shown = _gauge()
            return all(shown[s.value] == now[s.value] for s in lifecycle_metrics.OPEN) or None

        await wait_until(open_caught_up, what="the open statuses' counts")
        assert _gauge()["succeeded"] == start["succeeded"], "a settled status waits for its pace"
    finally:
        gauge.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gauge


async def test_each_open_status_is_counted_from_its_partial_index(ctx):
    """A million proposals stored cost the open counts nothing: no statement reads the table."""
    async with ctx.engine.connect() as conn:
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in await conn.execute(text(f"EXPLAIN {lifecycle_metrics._OPEN_COUNTS.text}"))
        )
    assert "Seq Scan" not in plan, plan
    for index in ("ix_proposals_pending", "ix_proposals_executing", "ix_proposals_needs_rec"):
        assert index in plan, plan
