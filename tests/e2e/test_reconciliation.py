"""Uncertain refunds resolved by asking, through the real processes: a late success, a refund the
provider never applied, an executor that died mid-call, two reconcilers sharing 100 attempts, and
a check still inconclusive past the bound — escalated, never failed, then concluded by a late
provider answer or by an operator.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from assistants_kit import Person, model_admin
from e2e_stack import Stack
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import ServiceProcess
from sqlalchemy import text
from test_lifecycle import propose_refund

pytestmark = pytest.mark.e2e
TERMINAL = ("succeeded", "revision_required", "failed")


async def _payment_ref(stack: Stack, org: dict[str, Any]) -> str:
    return str(
        await stack.scalar(
            "SELECT provider_ref FROM club.payments WHERE id = :p",
            p=org["refund_case"]["payment_id"],
        )
    )


async def _org(stack: Stack) -> tuple[dict[str, Any], str]:
    org = (await stack.seed())["organizations"][0]
    return org, stack.token(org["users"]["manager"], org)


async def _attempt(stack: Stack, proposal_id: str) -> dict[str, Any] | None:
    async with stack.engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT * FROM club.refund_attempts WHERE proposal_id = :p"),
                {"p": proposal_id},
            )
        ).first()
    return None if row is None else dict(row._mapping)


async def _in_flight(stack: Stack, proposal_id: str) -> bool:
    """The provider holds the proposal's refund request (a delay fault), unanswered."""
    return any(proposal_id in key for key in (await stack.ledger())["in_flight"])


async def _effects(stack: Stack, proposal_id: str) -> list[int]:
    per_key = (await stack.ledger())["effects_per_key"]
    return [count for key, count in per_key.items() if proposal_id in key]


async def _history(stack: Stack, token: str, proposal_id: str, last: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        page = await stack.reconciliation(token, proposal_id)
        return page if page["checks"] and page["checks"][-1]["result"] == last else None

    return await wait_until(probe, what=f"the {last} check on the status page")


async def test_a_late_success_ends_succeeded(stack: Stack) -> None:
    """The response is lost to the client timeout (2 s); the refund lands at 4 s, before the
    attempt's lease (3 s) plus the client timeout have passed: it must end succeeded."""
    org, token = await _org(stack)
    proposal_id = await propose_refund(stack, org, token)
    ref = await _payment_ref(stack, org)
    await stack.faults([{"mode": "delay", "delay_ms": 4000, "payment_ref": ref}])
    before = (await stack.ledger())["requests"]

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    view = await stack.settled(token, proposal_id)

    assert view["status"] == "succeeded", view
    assert "needs_reconciliation" in [a["to_status"] for a in view["audit"]]
    page = await _history(stack, token, proposal_id, "applied")
    assert "pending" in [c["result"] for c in page["checks"]], page  # asked before it landed
    assert await _effects(stack, proposal_id) == [1]
    after = (await stack.ledger())["requests"]
    assert (after["create"] - before["create"], after["replay"] - before["replay"]) == (1, 0)
    assert (await _attempt(stack, proposal_id) or {})["status"] == "succeeded"


async def test_a_refund_the_provider_never_applied_needs_revision_only_after_the_deadline(
    stack: Stack,
) -> None:
    """The provider dies while the refund waits (so it never lands) and comes back empty: the
    executor only knows the answer was lost. "Not applied" may be concluded only once the
    attempt's lease and the client timeout have passed."""
    org, token = await _org(stack)
    proposal_id = await propose_refund(stack, org, token)
    ref = await _payment_ref(stack, org)
    await stack.faults([{"mode": "delay", "delay_ms": 8000, "payment_ref": ref}])

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"

    async def in_flight() -> bool:
        return bool([k for k in (await stack.ledger())["in_flight"] if proposal_id in k])

    await wait_until(in_flight, what="the refund in flight at the provider")
    stack.restart("provider", kill=True)  # the delayed refund dies with it
    view = await stack.settled(token, proposal_id, within=45)

    assert view["status"] == "revision_required", view
    assert view["outcome"]["reason"]["code"] == "refund_not_applied"
    waited = await stack.scalar(
        "SELECT extract(epoch FROM p.outcome_at - (a.lease_until "
        "+ make_interval(secs => a.client_timeout_s))) FROM proposals.proposals p "
        "JOIN club.refund_attempts a ON a.proposal_id = p.id WHERE p.id = :p",
        p=proposal_id,
    )
    assert waited >= 0, f"concluded {-waited:.2f}s before the lease and timeout had passed"
    page = await _history(stack, token, proposal_id, "not_applied")
    assert {"pending"} <= {c["result"] for c in page["checks"][:-1]}, page
    assert await _effects(stack, proposal_id) == []
    assert (
        await stack.scalar(
            "SELECT count(*) FROM club.refunds WHERE proposal_id = :p", p=proposal_id
        )
        == 0
    )


async def test_an_executor_that_died_mid_call_is_found_by_the_scan(stack: Stack) -> None:
    """The executor is killed while the provider works on the refund: no answer is recorded
    and no ReconciliationRequired is sent. The reconciler's scan finds the stranded attempt
    after its lease and asks; the refund (which landed) ends succeeded, once."""
    org, token = await _org(stack)
    proposal_id = await propose_refund(stack, org, token)
    ref = await _payment_ref(stack, org)
    await stack.faults([{"mode": "delay", "delay_ms": 2500, "payment_ref": ref}])

    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    # at the provider, not only recorded: the attempt row is committed before the call, and an
    # executor killed in between never sent the refund, which then rightly ends not applied
    await wait_until(lambda: _in_flight(stack, proposal_id), what="the refund in flight")
    stack.processes["executor"].kill()
    try:
        view = await stack.settled(token, proposal_id, within=45)
        assert view["status"] == "succeeded", view
        found_by = await stack.scalar(
            "SELECT found_by FROM reconciler.checks WHERE proposal_id = :p", p=proposal_id
        )
        assert found_by == "scan"
    finally:  # the module's other cases need an executor, whatever this one found
        stack.restart("executor")  # the unacked contract comes back: it must change nothing
    await wait_until(
        lambda: _executions_done(stack, proposal_id), what="the redelivered contract handled"
    )
    assert (await stack.proposal(token, proposal_id))["status"] == "succeeded"
    assert await _effects(stack, proposal_id) == [1]
    assert (
        await stack.scalar(
            "SELECT count(*) FROM club.refunds WHERE proposal_id = :p", p=proposal_id
        )
        == 1
    )


async def _executions_done(stack: Stack, proposal_id: str) -> bool:
    status = await stack.scalar(
        "SELECT status FROM executor.executions WHERE proposal_id = :p", p=proposal_id
    )
    return status == "done"


async def test_two_reconcilers_resolve_100_uncertain_attempts_exactly_once(stack: Stack) -> None:
    stack.start_extra("reconciler", "reconciler-2")
    orgs: list[dict[str, Any]] = []
    for _ in range(50):
        orgs += (await stack.seed())["organizations"]
    tokens = [stack.token(org["users"]["manager"], org) for org in orgs]
    proposals = list(
        await asyncio.gather(
            *(propose_refund(stack, o, t) for o, t in zip(orgs, tokens, strict=True))
        )
    )
    resolved_before = await _resolved_per_reconciler(stack)
    before = (await stack.ledger())["requests"]
    # every create loses its answer: 20 land after the client gave up, 80 land and go silent
    await stack.faults(
        [{"mode": "delay", "delay_ms": 3000, "count": 20}, {"mode": "drop_response", "count": 80}]
    )
    started = time.monotonic()

    replies = await asyncio.gather(
        *(stack.approve(t, p) for t, p in zip(tokens, proposals, strict=True))
    )
    assert all(r.json()["result"] == "claimed" for r in replies)
    await wait_until(
        lambda: _settled_count(stack, proposals), timeout=120, interval=0.5, what="100 settled"
    )
    elapsed = time.monotonic() - started
    await stack.faults([])

    statuses = await _rows(
        stack, "SELECT status FROM proposals.proposals WHERE id = ANY(:ids)", proposals
    )
    assert statuses == ["succeeded"] * 100, statuses
    ledger = await stack.ledger()
    after = ledger["requests"]
    assert after["create"] - before["create"] == 100  # the executor's one call per attempt
    assert after["replay"] - before["replay"] == 0  # no reconciler ever re-posted
    assert after["lookup"] - before["lookup"] >= 100
    per_key = ledger["effects_per_key"]
    assert sorted(per_key[f"signoff-refund-{p}"] for p in proposals) == [1] * 100
    checks = await _rows(
        stack,
        "SELECT status || ':' || (outcome->>'type') FROM reconciler.checks "
        "WHERE proposal_id = ANY(:ids)",
        proposals,
    )
    assert checks == ["resolved:succeeded"] * 100
    reports = await _rows(
        stack,
        "SELECT count(*) FROM reconciler.outbox WHERE correlation_id = ANY(:ids) "
        "AND message_type = 'execution.outcome' GROUP BY correlation_id",
        proposals,
    )
    assert reports == [1] * 100  # each attempt concluded, and reported, exactly once
    moved = await _rows(
        stack,
        "SELECT count(*) FROM proposals.audit WHERE proposal_id = ANY(:ids) "
        "AND actor = 'system:reconciler' AND action = 'outcome' GROUP BY proposal_id",
        proposals,
    )
    assert moved == [1] * 100
    resolved = await _resolved_per_reconciler(stack)
    shares = {name: resolved[name] - resolved_before.get(name, 0.0) for name in resolved}
    assert sum(shares.values()) == 100 and min(shares.values()) > 0, shares
    print(f"100 uncertain attempts settled in {elapsed:.1f}s; resolved per reconciler {shares}")


async def _settled_count(stack: Stack, proposals: list[str]) -> bool:
    count = await stack.scalar(
        "SELECT count(*) FROM proposals.proposals WHERE id = ANY(:ids) "
        "AND status IN ('succeeded', 'revision_required', 'failed')",
        ids=proposals,
    )
    return bool(count == len(proposals))


async def _rows(stack: Stack, sql: str, ids: list[str]) -> list[Any]:
    async with stack.engine.connect() as conn:
        return [row[0] for row in await conn.execute(text(sql), {"ids": ids})]


async def _resolved_per_reconciler(stack: Stack) -> dict[str, float]:
    counts: dict[str, float] = {}
    for name in ("reconciler", "reconciler-2"):
        if name not in stack.processes:
            continue
        metrics = (await stack.http.get(f"{stack.url(name)}/metrics")).text
        counts[name] = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("signoff_reconciler_checks_total{") and 'result="resolved"' in line
        )
    return counts


# -- uncertainty is never settled by a clock --------------------------------------------------


def _restart_with(stack: Stack, name: str, env: dict[str, str]) -> None:
    old = stack.processes[name]
    old.stop()
    fresh = ServiceProcess(old.name, old.argv, env, old.port, old.log_dir)
    stack.processes[name] = fresh.start()
    fresh.wait_healthy(60.0)


@asynccontextmanager
async def _escalating_soon(stack: Stack) -> AsyncIterator[None]:
    """Every reconciler with a 2 s escalation bound (checking every second once escalated), and
    the provider down for the block's uncertain refund; all as they were afterwards."""
    names = [n for n in ("reconciler", "reconciler-2") if n in stack.processes]
    originals = {n: stack.processes[n].env for n in names}
    for name in names:
        _restart_with(
            stack,
            name,
            {
                **originals[name],
                "SIGNOFF_RECONCILER__ESCALATE_AFTER_S": "2",
                "SIGNOFF_RECONCILER__ESCALATED_CHECK_EVERY_S": "1",
            },
        )
    try:
        yield
    finally:
        provider = stack.processes["provider"].proc
        if provider is None or provider.poll() is not None:
            stack.restart("provider")
        for name in names:
            _restart_with(stack, name, originals[name])


async def _in_flight_then_provider_down(stack: Stack, token: str, proposal_id: str) -> None:
    """Approve while the refund is held at the provider (8 s), then kill the provider: the
    executor loses the answer and no lookup can conclude while it is down."""
    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    await wait_until(lambda: _in_flight(stack, proposal_id), what="the refund in flight")
    stack.processes["provider"].kill()


async def _escalated(stack: Stack, token: str, proposal_id: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        view = await stack.proposal(token, proposal_id)
        return view if "escalated" in [a["action"] for a in view["audit"]] else None

    view = await wait_until(probe, timeout=45, what="the check escalated")
    assert view["status"] == "needs_reconciliation", view  # escalated, not failed
    assert view["outcome"]["type"] == "needs_reconciliation"
    return view


async def _stuck_first(stack: Stack, proposal_id: str) -> None:
    listed = await stack.signoff("proposals", "stuck", "--json", "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    ids = [row["id"] for row in rows]
    assert proposal_id in ids, ids
    ahead = rows[: ids.index(proposal_id) + 1]
    assert all(row["escalated_at"] is not None for row in ahead), ahead  # escalated ones first


async def test_an_escalated_check_is_concluded_by_an_operator_and_never_said_failed(
    stack: Stack,
) -> None:
    org, token = await _org(stack)
    person = Person(stack, org)
    conversation = await person.open()
    async with model_admin(stack, "club.order_demo"):
        said = await person.say(conversation, "Was this order charged correctly?")
    [card] = [m for m in said if m["code"] == "proposal_ready"]
    proposal_id = str(card["proposal_id"])
    ref = await _payment_ref(stack, org)
    await stack.faults([{"mode": "delay", "delay_ms": 8000, "payment_ref": ref}])

    async with _escalating_soon(stack):
        await _in_flight_then_provider_down(stack, token, proposal_id)
        await _escalated(stack, token, proposal_id)
        await _stuck_first(stack, proposal_id)
        [told] = await person.message_with(conversation, "proposal_needs_reconciliation")
        assert told["text"].startswith("Waiting for confirmation"), told
        manager = org["users"]["manager"]["id"]
        async with stack.engine.begin() as conn:
            await conn.execute(
                text("UPDATE club.users SET locale = 'fr' WHERE id = :u"), {"u": manager}
            )
        try:
            messages = (await person.conversation(conversation))["messages"]
        finally:
            async with stack.engine.begin() as conn:
                await conn.execute(
                    text("UPDATE club.users SET locale = 'en' WHERE id = :u"), {"u": manager}
                )
        [dit] = [m for m in messages if m["code"] == "proposal_needs_reconciliation"]
        assert dit["text"].startswith("En attente de confirmation"), dit
        assert not [m for m in messages if m["code"] == "proposal_failed"]

        resolved = await stack.signoff(
            "reconcile",
            proposal_id,
            "--resolve",
            "succeeded",
            "--note",
            "the provider's dashboard shows the refund",
            "--operator",
            "alice",
        )
        assert resolved.returncode == 0, resolved.stderr
        view = await stack.settled(token, proposal_id)

    assert view["status"] == "succeeded", view
    trail = [(a["actor"], a["action"]) for a in view["audit"]]
    assert trail.index(("system:reconciler", "escalated")) < trail.index(
        ("operator:alice", "outcome")
    )
    assert ("operator:alice", "operator_outcome_ignored") not in trail
    assert not [
        m
        for m in (await person.conversation(conversation))["messages"]
        if m["code"] == "proposal_failed"
    ]


async def test_a_late_provider_answer_concludes_an_escalated_check(stack: Stack) -> None:
    org, token = await _org(stack)
    proposal_id = await propose_refund(stack, org, token)
    ref = await _payment_ref(stack, org)
    await stack.faults([{"mode": "delay", "delay_ms": 8000, "payment_ref": ref}])

    async with _escalating_soon(stack):
        await _in_flight_then_provider_down(stack, token, proposal_id)
        await _escalated(stack, token, proposal_id)
        page = await stack.reconciliation(token, proposal_id)
        assert page["state"] == "checking" and page["attempt"]["escalated"] is True, page
        stack.restart("provider")  # back, empty: the refund died with it — an answer at last
        view = await stack.settled(token, proposal_id, within=45)

    assert view["status"] == "revision_required", view  # what the provider says, not a clock
    assert view["outcome"]["reason"]["code"] == "refund_not_applied"
    trail = [(a["actor"], a["action"]) for a in view["audit"]]
    assert trail.index(("system:reconciler", "escalated")) < trail.index(
        ("system:reconciler", "outcome")
    )
    assert await _effects(stack, proposal_id) == []
