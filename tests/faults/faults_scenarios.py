"""The nine fault scenarios of issue #9: what each injects while a stream of approvals runs.

Each scenario is an ``inject`` coroutine that starts the approval stream, strikes while it runs
(at moments drawn from the scenario's seeded RNG), puts the world back (servers up, links
flowing, provider faults cleared) and returns; ``after`` (optional) adds checks of its own once
the system is quiet. ``run.faults`` counts what was injected; ``run.allow`` records how many
proposals the faults may rightly keep from succeeding, and why (the checker's progress rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from faults_history import Case, Driver
from faults_quorum import executed_with_quorum, quorum_races, two_approvers
from faults_stack import FaultStack
from pydantic import SecretStr
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import keys
from signoff_runtime.settings import ContractSigningSettings
from signoff_runtime.signing import sign
from signoff_runtime.testing import wait_until

EXECUTORS = ("executor", "executor-2")
RECONCILERS = ("reconciler", "reconciler-2")
LINKED = ("proposals", *EXECUTORS, *RECONCILERS)


@dataclass
class Run:
    stack: FaultStack
    driver: Driver
    rng: random.Random
    seed: int
    cases: list[Case]
    long: bool
    faults: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    #: proposals the faults may keep from succeeding, by reason (see ``allow``)
    allowances: Counter[str] = field(default_factory=Counter)

    def allow(self, reason: str, proposals: int) -> None:
        """Up to ``proposals`` may end without success for this reason — each fault that can stop
        an attempt between its start and its provider call (a kill, a crash, a lost commit
        answer: reconciliation then finds nothing applied) allows one, since an executor works
        on one contract at a time; a refusal or a raced expiry allows its own proposal."""
        self.allowances[reason] += proposals

    @property
    def spread_s(self) -> float:
        """Approvals are spread over this long, so faults land among them."""
        return min(30.0, max(4.0, 0.08 * len(self.cases)))

    def stream(self, spread_s: float | None = None) -> asyncio.Task[None]:
        return asyncio.create_task(
            self.driver.approve_stream(self.cases, spread_s or self.spread_s)
        )

    async def pause(self, low: float, high: float) -> None:
        """A seeded random gap: *when* a fault strikes is part of the scenario's seed."""
        await asyncio.sleep(self.rng.uniform(low, high))

    async def provider_dice(self, probabilities: dict[str, float], delay_ms: int = 0) -> None:
        await self.stack.provider_faults(
            {"probabilities": probabilities, "delay_ms": delay_ms, "seed": self.seed}
        )

    async def provider_calm(self) -> None:
        """Count the faults the dice injected (the history starts with each plan), then clear.
        A refund refused before applying ends its proposal without success, rightly."""
        history = await self.stack.provider_fault_history()
        self.faults += len(history)
        refused = {f["payment_ref"] for f in history if f["mode"] == "fail_before"}
        self.allow("refused by the provider", len(refused))
        await self.stack.provider_faults({})


Inject = Callable[[Run], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    inject: Inject
    after: Inject | None = None
    #: propose half of the cases during the faults (through the agent's request-reply to the
    #: proposals service), not all of them before
    live_proposals: bool = False
    #: built to exercise reconciliation: the run fails unless some outcome was reconciled
    must_reconcile: bool = False
    #: runs before anything is proposed (an approval policy to freeze into the proposals)
    prepare: Inject | None = None


# -- 1. kill -9 executors at random points -----------------------------------------------------
async def executor_kills(run: Run) -> None:
    """Two executors; the provider holds some refunds 0.7 s, so kills land before the call,
    during it (the refund lands after the caller died) and after the commit before the ack."""
    await run.provider_dice({"delay": 0.4}, delay_ms=700)
    approvals = run.stream()
    kills = 0
    while not approvals.done() or kills < 2:
        await run.pause(0.3, 1.5)
        await run.stack.restart(run.rng.choice(EXECUTORS), kill=True)
        kills += 1
    await approvals
    await run.provider_calm()
    run.faults += kills
    run.allow("executor killed", kills)


async def executor_freezes(run: Run) -> None:
    """Two executors, both frozen (``SIGSTOP``) the moment a new refund attempt is committed —
    so the one that committed it is caught between the commit and its provider call, or during
    the call — for longer than the attempt's lease plus the client timeout and the stranded
    scan's margin, then thawed. Meanwhile the reconciler's scan takes the attempt over (finding
    the refund applied, or not yet): the thawed executor must neither call late nor report a
    second outcome. The provider holds some refunds 0.7 s, so some calls are still in flight."""
    await run.provider_dice({"delay": 0.4}, delay_ms=700)
    env = run.stack.env
    frozen_s = (
        float(env["SIGNOFF_CLUB_ATTEMPT_LEASE_S"])
        + float(env["SIGNOFF_CLUB_PROVIDER_TIMEOUT_S"])
        + float(env["SIGNOFF_RECONCILER__STRANDED_AFTER_S"])
        + 2 * float(env["SIGNOFF_RECONCILER__SCAN_INTERVAL_S"])
    )
    approvals = run.stream()
    seen: set[str] = set()
    freezes = 0
    while not approvals.done() and freezes < 3:
        fresh = {
            row["id"]
            for row in await run.stack.rows("SELECT id FROM club.refund_attempts")
            if row["id"] not in seen
        }
        seen |= fresh
        if not fresh or run.rng.random() < 0.5:  # every other new attempt, at the seed's whim
            await asyncio.sleep(0.005)
            continue
        for label in EXECUTORS:
            run.stack.freeze(label)
        try:
            await asyncio.sleep(frozen_s)  # the fault itself: processes stalled this long
        finally:
            for label in EXECUTORS:
                run.stack.freeze(label, resume=True)
        freezes += 1
    await approvals
    await run.provider_calm()
    run.faults += freezes
    # a freeze between an attempt's commit and its call: the call is never made, and the
    # reconciler rightly finds nothing applied
    run.allow("executor frozen past its lease", freezes)


# -- 2. the provider drops responses, fails before applying, answers too late --------------------
async def provider_faults(run: Run) -> None:
    await run.provider_dice(
        {"drop_response": 0.25, "fail_before": 0.15, "delay": 0.15}, delay_ms=3000
    )
    await run.stream()
    await run.provider_calm()


# -- 3. double approvals, approve versus decline, approvals at the expiry -----------------------
async def races(run: Run) -> None:
    """Most cases get 2-5 approvals and 0-2 declines at once; a quarter are set to expire within
    a few hundred ms, and four approvals are fired from 60 ms before that instant to 15 ms after
    (a request reaches the claim some tens of ms after it leaves, so both sides get hit)."""
    edge = run.cases[: max(1, len(run.cases) // 4)]
    crowd = [case for case in run.cases[len(edge) :] if case.proposal_id]
    deadline = time.monotonic() + 120
    gate = asyncio.Semaphore(12)  # cases racing at once: each case's commands all at once

    async def race(case: Case) -> None:
        commands = ["approve"] * run.rng.randint(2, 5) + ["decline"] * run.rng.randint(0, 2)
        run.rng.shuffle(commands)
        run.faults += len(commands) - 1
        async with gate:
            await asyncio.gather(*(run.driver.decide(case, c, deadline) for c in commands))

    async def edge_case(case: Case) -> None:
        async with gate:
            await _at_the_expiry(run, case, deadline)

    await asyncio.gather(
        *(race(case) for case in crowd),
        *(edge_case(case) for case in edge if case.proposal_id),
    )
    run.allow("expiry raced", sum(1 for case in edge if case.proposal_id))


async def _at_the_expiry(run: Run, case: Case, deadline: float) -> None:
    window_ms = run.rng.uniform(150, 400)
    # a request reaches the claim some tens of ms after it leaves: aim a little early
    offsets = sorted(window_ms + run.rng.uniform(-60, 15) for _ in range(4))
    await run.stack.execute(
        "UPDATE proposals.proposals SET expires_at = statement_timestamp() "
        "+ make_interval(secs => :s) WHERE id = :id",
        s=window_ms / 1000,
        id=case.proposal_id,
    )
    start = time.monotonic()
    run.faults += len(offsets)

    async def fire(offset_ms: float) -> None:
        await asyncio.sleep(max(0.0, start + offset_ms / 1000 - time.monotonic()))
        await run.driver.decide(case, "approve", deadline)

    await asyncio.gather(*(fire(offset) for offset in offsets))


# -- 4. RabbitMQ killed and restarted; every connection closed, repeatedly ---------------------
async def broker_faults(run: Run) -> None:
    stack = run.stack
    approvals = run.stream(max(run.spread_s, 8.0))
    await run.pause(0.5, 2.0)
    await asyncio.to_thread(stack.rabbit.kill)
    await run.pause(0.5, 2.0)
    await asyncio.to_thread(stack.rabbit.start)
    run.faults += 1
    await asyncio.to_thread(stack.rabbit.ctl, "close_all_connections", "fault suite")
    run.faults += 1
    for _ in range(4 if run.long else 2):
        await run.pause(0.5, 1.5)
        for name in stack.proxy.links:
            if name.endswith(".amqp"):
                stack.proxy.cut(name)
        run.faults += 1
    await approvals


async def consumers_back(run: Run) -> None:
    """Every queue has its consumers again, without anyone restarting a service."""
    expected = run.stack.expected_consumers()

    async def back() -> dict[str, int] | None:
        counts = await run.stack.consumers()
        missing = {q: n - counts[q] for q, n in expected.items() if counts[q] < n}
        run.state["missing"] = missing
        return None if missing else counts

    try:
        await wait_until(back, timeout=60, interval=0.5, what="every consumer back")
    except AssertionError:
        run.extra["queues missing consumers"] = len(run.state["missing"])


# -- 5. PostgreSQL crashed; executor commits answered into the void ----------------------------
async def database_faults(run: Run) -> None:
    """The executors lose 8 % of their commit answers, the proposals service and the
    reconcilers 4 % (claims, outcomes, checks and outbox marks in doubt); PostgreSQL crashes."""
    stack = run.stack
    for label in LINKED:
        share = 0.08 if label in EXECUTORS else 0.04
        stack.proxy.drop_commits(f"{label}.db", share, run.seed + len(label))
    approvals = run.stream(max(run.spread_s, 6.0))
    for _ in range(2 if run.long else 1):
        await run.pause(1.0, 3.0)
        await asyncio.to_thread(stack.pg.crash)
        await run.pause(0.3, 1.5)
        await asyncio.to_thread(stack.pg.start)
        run.faults += 1
    await approvals
    crashes = run.faults
    for label in LINKED:
        stack.proxy.drop_commits(f"{label}.db", 0.0, 0)
        run.faults += stack.proxy.links[f"{label}.db"].commits_dropped
        stack.proxy.links[f"{label}.db"].commits_dropped = 0
    run.allow("database crashed", crashes)
    run.allow("commit answers lost", run.faults - crashes)
    await stack.engine.dispose()  # the suite's own pooled connections died with the server


# -- 6. contracts delivered several times; approvals replayed; forged contracts ----------------
async def duplicates(run: Run) -> None:
    forged = await run.driver.cases(max(2, len(run.cases) // 5))
    run.state["forged"] = forged
    await run.provider_dice({"delay": 0.3}, delay_ms=500)
    deadline = time.monotonic() + 120
    offsets = [run.rng.uniform(0, run.spread_s) for _ in run.cases]
    start = time.monotonic()

    async def one(case: Case, offset: float) -> None:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
        op = await run.driver.decide(case, "approve", deadline)
        if op.value != "claimed":
            return
        body = await _contract_body(run, case)
        copies = run.rng.randint(2, 4)
        await asyncio.gather(*(_copy(run, body) for _ in range(copies)))
        for _ in range(run.rng.randint(1, 2)):
            await run.driver.decide(case, "approve", deadline)
            run.faults += 1
        run.faults += copies

    await asyncio.gather(
        *(one(c, at) for c, at in zip(run.cases, offsets, strict=True) if c.proposal_id),
        *(_forge(run, case) for case in forged),
    )
    await run.provider_calm()


async def _contract_body(run: Run, case: Case) -> bytes:
    rows = await run.stack.rows(
        "SELECT body FROM proposals.outbox WHERE correlation_id = :p "
        "AND message_type = 'execution.contract' ORDER BY id LIMIT 1",
        p=case.proposal_id,
    )
    return bytes(rows[0]["body"])


async def _copy(run: Run, body: bytes) -> None:
    await run.pause(0.0, 1.0)
    await run.stack.publish("contracts", "execution.contract", body, new_id("msg"))


def _forged_contract(case: Case, **changes: Any) -> ExecutionContract:
    refund = case.org["refund_case"]
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "contract_id": new_id("ctr"),
        "proposal_id": new_id("prp"),
        "organization_id": case.org["id"],
        "section": "orders",
        "resource_id": case.order_id,
        "operation_kind": "order.refund_missing_discount",
        "contract_version": 1,
        "arguments": {
            "order_id": case.order_id,
            "payment_id": refund["payment_id"],
            "line_item_id": refund["line_item_id"],
            "discount_id": refund["discount_id"],
            "amount_cents": 3500,
            "currency": "CAD",
            "destination": "card_refund",
            "payment_ref": case.payment_ref,
            "order_total_cents": 44_499,
        },
        "approved_by": case.org["users"]["manager"]["id"],
        "approved_at": now,
        "execute_by": now + timedelta(minutes=5),
        "source": "proposals",
    }
    fields.update(changes)
    return ExecutionContract(**fields)


def _stranger() -> ContractSigningSettings:
    """A signing key no executor trusts, announcing the trusted key's id."""
    _, private, _ = keys.generate()
    return ContractSigningSettings(
        signing_key=SecretStr(private), key_id=keys.DEV_ONLY_CONTRACT_KID
    )


async def _forge(run: Run, case: Case) -> None:
    """Four forgeries for a case nobody approved: unsigned, signed with another key, signed then
    altered, and genuine but late. None may refund anything."""
    key = ContractSigningSettings()
    altered = sign(_forged_contract(case), key)
    forgeries = [
        _forged_contract(case, signature="0" * 64),
        sign(_forged_contract(case), _stranger()),
        altered.model_copy(update={"arguments": {**altered.arguments, "amount_cents": 9_999}}),
        sign(_forged_contract(case, execute_by=datetime.now(UTC) - timedelta(seconds=1)), key),
    ]
    for contract in forgeries:
        await run.pause(0.0, 1.0)
        body = contract.model_dump_json().encode()
        await run.stack.publish("contracts", "execution.contract", body, contract.message_id)
        run.faults += 1


async def forgeries_did_nothing(run: Run) -> None:
    forged: list[Case] = run.state["forged"]
    refs = {case.payment_ref for case in forged}
    ledger = await run.stack.ledger()
    effects = sum(1 for item in ledger["items"] if item["payment_ref"] in refs)
    rows = await run.stack.rows(
        "SELECT count(*) AS n FROM club.refunds r JOIN club.payments p ON p.id = r.payment_id "
        "WHERE p.order_id = ANY(:orders)",
        orders=[case.order_id for case in forged],
    )
    if effects + rows[0]["n"]:
        run.extra["forged contracts that refunded"] = effects + rows[0]["n"]


# -- 7. the proposals service and the relays killed mid-publish --------------------------------
async def relay_kills(run: Run) -> None:
    """Each round stalls one process's link, lets work pile up behind it, kills the process,
    resets the link (nothing held may arrive after the death) and starts the process again.
    A stalled broker link kills between the claim's (or outcome's) commit and the publish or its
    confirm — the round waits until such a commit has happened behind the stall; a stalled
    database link kills between the broker's confirm and the commit of mark-sent."""
    stack = run.stack
    plan = [("proposals", "amqp"), ("proposals", "db"), ("executor", "amqp"), ("executor", "db")]
    # the short run: one round of each kind (a broker link, a database link), one per process
    rounds = plan * 2 if run.long else [plan[0], plan[3]]
    approvals = run.stream(max(run.spread_s, 7.0 * len(rounds)))
    for label, link in rounds:
        await run.pause(0.3, 1.0)
        name = f"{label}.{link}"
        since = (await stack.rows("SELECT now() AS t"))[0]["t"]
        stack.proxy.stall(name)
        if link == "amqp":
            await _committed_behind_stall(run, label, since)
        else:
            await run.pause(0.5, 1.2)
        await asyncio.to_thread(stack.kill, label)
        stack.proxy.cut(name)
        stack.proxy.flow(name)
        await asyncio.to_thread(stack.start_again, label)
        run.faults += 1
        run.allow("process killed", 1)
    await approvals


async def _committed_behind_stall(run: Run, label: str, since: datetime) -> None:
    """Claims (proposals) or outcomes (executor) committed since the stall began — three, so a
    round strands several messages: theirs can only be waiting behind the stall. Gives up after
    a few seconds (the stream may be over)."""
    sql = (
        "SELECT count(*) AS n FROM proposals.proposals WHERE decided_at >= :since"
        if label == "proposals"
        else "SELECT count(*) AS n FROM executor.executions WHERE status = 'done' "
        "AND updated_at >= :since"
    )

    async def committed() -> bool:
        return bool((await run.stack.rows(sql, since=since))[0]["n"] >= 3)

    with contextlib.suppress(AssertionError):
        await wait_until(committed, timeout=6, interval=0.1, what="a commit behind the stall")


# -- 8. rolling restart: SIGTERM with handlers in flight --------------------------------------
async def rolling_restarts(run: Run) -> None:
    run.state["dead_before"] = await _dead_contracts(run)
    await run.provider_dice({"delay": 0.5}, delay_ms=1200)
    approvals = run.stream()
    restarts = 0
    while not approvals.done() or restarts < 2:
        for label in EXECUTORS:
            await run.pause(0.2, 0.8)
            await run.stack.restart(label, kill=False)
            restarts += 1
    await approvals
    await run.provider_calm()
    run.faults += restarts


async def _dead_contracts(run: Run) -> int:
    rows = await run.stack.rows(
        "SELECT count(*) AS n FROM reconciler.dead_letters WHERE queue = 'executor.contracts'"
    )
    return int(rows[0]["n"])


async def nothing_discarded(run: Run) -> None:
    dead = await _dead_contracts(run) - run.state["dead_before"]
    if dead:
        run.extra["contracts dead-lettered"] = dead


# -- 9. reconcilers killed while checking ------------------------------------------------------
async def reconciler_kills(run: Run) -> None:
    """Most refunds lose their answer (dropped, or later than the client's patience), so the two
    reconcilers have checks to make; they are killed while making them."""
    await run.provider_dice({"drop_response": 0.5, "delay": 0.3}, delay_ms=3000)
    approvals = run.stream()
    kills = 0
    open_checks = 1
    while not approvals.done() or (open_checks and kills < (12 if run.long else 4)):
        await run.pause(0.5, 2.0)
        await run.stack.restart(run.rng.choice(RECONCILERS), kill=True)
        kills += 1
        rows = await run.stack.rows(
            "SELECT count(*) AS n FROM reconciler.checks WHERE status = 'open'"
        )
        open_checks = rows[0]["n"]
    await approvals
    await run.provider_calm()
    run.faults += kills


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("1-executor-kill", "kill -9 executors at random points", executor_kills),
        Scenario(
            "1-executor-freeze",
            "executors stalled past the attempt lease, then resumed",
            executor_freezes,
        ),
        Scenario(
            "2-provider",
            "lost, refused and late provider answers",
            provider_faults,
            must_reconcile=True,
        ),
        Scenario("3-races", "double approvals, approve vs decline, expiry edge", races),
        Scenario(
            "3-races-quorum",
            "two of three managers racing to approve",
            quorum_races,
            executed_with_quorum,
            prepare=two_approvers,
        ),
        Scenario(
            "4-broker",
            "RabbitMQ killed; connections closed",
            broker_faults,
            consumers_back,
            live_proposals=True,
        ),
        Scenario(
            "5-database",
            "PostgreSQL crashed; commits in doubt",
            database_faults,
            live_proposals=True,
        ),
        Scenario(
            "6-duplicates", "redelivered, replayed, forged", duplicates, forgeries_did_nothing
        ),
        Scenario(
            "7-relay",
            "proposals and relays killed mid-publish",
            relay_kills,
            live_proposals=True,
        ),
        Scenario("8-rolling", "SIGTERM executors in flight", rolling_restarts, nothing_discarded),
        Scenario(
            "9-reconciler",
            "reconcilers killed while checking",
            reconciler_kills,
            must_reconcile=True,
        ),
    )
}
