"""After the drain: judge a scenario's history against the provider's ledger and the database.

Four numbers must be zero for a scenario to pass (issue #9):

- **duplicate external effects** — refunds the provider applied beyond one per refund case
  (each case is one charge, so this counts per ``payment_ref`` and therefore also per
  idempotency key, whatever key the client sent);
- **duplicate local effects** — per proposal, more than one claim (audit rows or ``claimed``
  replies), more than one contract executed, more than one terminal outcome concluded (the
  executor's and reconciler's outboxes), and per case more than one proposal (every retried
  propose carries the case's ``Idempotency-Key``), local refund or succeeded proposal;
- **unresolved** — proposals not terminal at the settle deadline (``lost`` ones are those among
  them that nothing is still working on — the contract, the outcome or an acknowledged approval
  vanished — plus proposals the client was told exist and the database does not hold);
- **disagreeing outcomes** — a proposal that succeeded without a refund at the provider or in the
  club's books, or the reverse; a claim after the proposal's expiry; a ``declined`` reply for a
  proposal that did something else.

Scenarios may add checks of their own (``extra``: queues without consumers, forged contracts
that executed, dead-lettered contracts); each counts as a violation too.

Agreement alone is not enough: a system that does nothing (every proposal fails closed, nothing
reaches the provider) agrees with itself perfectly. So a scenario must also show **progress**:
every proposal succeeds except as many as its faults allow to end otherwise (``allowances``: a
decline sent, an expiry raced, a refund the provider refused before applying, a process killed or
a commit answer lost while an attempt may have been between its start and its provider call) —
and a scenario built to exercise reconciliation must have reconciled some.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aio_pika
from faults_history import Case, History
from faults_stack import TERMINAL, FaultStack
from signoff_runtime.testing import wait_until


@dataclass
class Report:
    scenario: str
    seed: int
    proposals: int = 0
    #: refund cases driven (each should end in one proposal)
    cases: int = 0
    faults: int = 0
    duplicate_external: int = 0
    duplicate_local: int = 0
    lost: int = 0
    unresolved: int = 0
    disagreeing: int = 0
    settle_s: float = 0.0
    extra: dict[str, int] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)
    switches: str = ""
    #: proposals whose outcome had to be reconciled (the faults reached the provider calls)
    reconciled: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    #: why proposals may end without success, and how many each reason allows
    allowances: dict[str, int] = field(default_factory=dict)
    #: a scenario built to exercise reconciliation fails if nothing was reconciled
    must_reconcile: bool = False
    #: a negative control's expected violation (a field of this report), "" for a scenario
    expected: str = ""

    @property
    def succeeded(self) -> int:
        return self.statuses.get("succeeded", 0)

    @property
    def must_succeed(self) -> int:
        """Every case, less those the faults allow to end otherwise. Counted by case, not by
        proposal: a case whose propose never got through has no proposal, and no success."""
        return max(0, self.cases - sum(self.allowances.values()))

    @property
    def progress_shortfall(self) -> list[str]:
        """Why the run did not make the progress its faults allow (empty: it did)."""
        short = []
        if self.succeeded < self.must_succeed or self.cases == 0:
            allowed = ", ".join(f"{k} {n}" for k, n in self.allowances.items()) or "nothing"
            short.append(
                f"{self.succeeded} of {self.cases} cases succeeded ({self.proposals} proposed); "
                f"the faults allow at most {self.cases - self.must_succeed} to end otherwise "
                f"({allowed})"
            )
        if self.must_reconcile and self.reconciled == 0:
            short.append("nothing was reconciled in a scenario built to need reconciliation")
        return short

    @property
    def caught(self) -> bool:
        """A negative control is caught by the violation its switch is meant to cause only."""
        return bool(self.expected) and all(
            (getattr(self, column) if hasattr(self, column) else self.extra.get(column, 0)) > 0
            for column in self.expected.split(",")
        )

    @property
    def passed(self) -> bool:
        return self.violations == 0 and not self.progress_shortfall

    @property
    def violations(self) -> int:
        return (
            self.duplicate_external
            + self.duplicate_local
            + self.lost
            + self.unresolved
            + self.disagreeing
            + sum(self.extra.values())
        )

    def note(self, text: str) -> None:
        if len(self.details) < 12:
            self.details.append(text)


async def settled(stack: FaultStack, cases: list[Case], history: History, within_s: float) -> float:
    """Seconds until every proposal of these cases is terminal (``within_s`` if never) — but a
    pending one no client ever heard of (its propose went unanswered) waits for a person."""
    started = time.monotonic()
    orgs = [case.org["id"] for case in cases]
    known = list({op.proposal_id for op in history.ops if op.proposal_id})

    async def none_open() -> bool:
        rows = await stack.rows(
            "SELECT count(*) AS n FROM proposals.proposals WHERE organization_id = ANY(:o) "
            "AND status <> ALL(:t) AND (status <> 'pending' OR id = ANY(:known))",
            o=orgs,
            t=list(TERMINAL),
            known=known,
        )
        return rows[0]["n"] == 0

    try:
        await wait_until(none_open, timeout=within_s, interval=0.25, what="every proposal settled")
    except AssertionError:
        return within_s
    return time.monotonic() - started


async def quiet(stack: FaultStack, within_s: float = 20.0) -> None:
    """Wait until no work is left anywhere (queues empty, outboxes sent, nothing in flight at the
    provider), seen twice in a row: late duplicates must be counted, not missed."""
    work_queues = ("executor.contracts", "reconciler.required", "proposals.outcomes")
    calm = {"seen": 0}

    async def probe() -> bool:
        depth = 0
        for key in work_queues:
            depth += await _depth(stack, stack.topology.name(key))
        unsent = 0
        for schema in ("proposals", "executor", "reconciler"):
            rows = await stack.rows(
                f"SELECT count(*) AS n FROM {schema}.outbox WHERE sent_at IS NULL"
            )
            unsent += rows[0]["n"]
        in_flight = len((await stack.ledger())["in_flight"])
        calm["seen"] = calm["seen"] + 1 if depth + unsent + in_flight == 0 else 0
        return calm["seen"] >= 2

    try:
        await wait_until(probe, timeout=within_s, interval=0.5, what="a quiet system")
    except AssertionError:
        pass  # still busy: the counts below are what they are at the deadline


async def _depth(stack: FaultStack, queue: str) -> int:
    connection = await aio_pika.connect(stack.rabbit.url)
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return int(declared.declaration_result.message_count or 0)


@dataclass
class Facts:
    proposals: list[dict[str, Any]]
    claims: Counter[str]
    executions: dict[str, list[dict[str, Any]]]
    conclusions: dict[str, set[str]]
    refunds: Counter[str]
    attempts: dict[str, str]
    effects: Counter[str]
    reconciled: int
    books: dict[str, dict[str, Any]]
    #: each proposal's contract rows in the proposals outbox (a stuck contract's state says why)
    contracts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


async def _facts(stack: FaultStack, cases: list[Case]) -> Facts:
    orgs = [case.org["id"] for case in cases]
    proposals = await stack.rows(
        "SELECT id, resource_id, status, contract_id, decided_at, expires_at, "
        "decided_at >= expires_at AS late FROM proposals.proposals "
        "WHERE organization_id = ANY(:o)",
        o=orgs,
    )
    ids = [row["id"] for row in proposals]
    claims = Counter(
        row["proposal_id"]
        for row in await stack.rows(
            "SELECT proposal_id FROM proposals.audit WHERE action = 'claimed' "
            "AND proposal_id = ANY(:ids)",
            ids=ids,
        )
    )
    executions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in await stack.rows(
        "SELECT proposal_id, contract_id, status, outcome FROM executor.executions "
        "WHERE proposal_id = ANY(:ids)",
        ids=ids,
    ):
        executions[row["proposal_id"]].append(row)
    conclusions: dict[str, set[str]] = defaultdict(set)
    for schema in ("executor", "reconciler"):
        for row in await stack.rows(
            f"SELECT correlation_id, message_id, body FROM {schema}.outbox "
            "WHERE message_type = 'execution.outcome' AND correlation_id = ANY(:ids)",
            ids=ids,
        ):
            if json.loads(bytes(row["body"]))["outcome"]["type"] != "needs_reconciliation":
                conclusions[row["correlation_id"]].add(row["message_id"])
    refunds = Counter(
        row["order_id"]
        for row in await stack.rows(
            "SELECT p.order_id FROM club.refunds r JOIN club.payments p ON p.id = r.payment_id "
            "WHERE p.order_id = ANY(:orders)",
            orders=[case.order_id for case in cases],
        )
    )
    attempts = {
        row["proposal_id"]: row["status"]
        for row in await stack.rows(
            "SELECT proposal_id, status FROM club.refund_attempts WHERE proposal_id = ANY(:ids)",
            ids=ids,
        )
    }
    books = {
        row["order_id"]: row
        for row in await stack.rows(
            "SELECT o.id AS order_id, o.total_cents, p.refunded_cents, p.reserved_cents, "
            "(SELECT coalesce(sum(r.amount_cents), 0)::bigint FROM club.refunds r "
            " WHERE r.payment_id = p.id) AS refunds_cents "
            "FROM club.orders o JOIN club.payments p ON p.order_id = o.id "
            "WHERE o.id = ANY(:orders)",
            orders=[case.order_id for case in cases],
        )
    }
    reconciled = await stack.rows(
        "SELECT count(DISTINCT proposal_id) AS n FROM proposals.audit "
        "WHERE to_status = 'needs_reconciliation' AND proposal_id = ANY(:ids)",
        ids=ids,
    )
    contracts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in await stack.rows(
        "SELECT correlation_id, attempts, last_error, sent_at IS NOT NULL AS sent, "
        "round(extract(epoch FROM available_at - now())::numeric, 1) AS due_in_s "
        "FROM proposals.outbox WHERE message_type = 'execution.contract' "
        "AND correlation_id = ANY(:ids) ORDER BY id",
        ids=ids,
    ):
        contracts[row.pop("correlation_id")].append(row)
    refs = {case.payment_ref for case in cases}
    ledger = await stack.ledger()
    effects = Counter(
        item["payment_ref"] for item in ledger["items"] if item["payment_ref"] in refs
    )
    return Facts(
        proposals,
        claims,
        executions,
        conclusions,
        refunds,
        attempts,
        effects,
        reconciled[0]["n"],
        books,
        contracts,
    )


async def check(
    stack: FaultStack,
    scenario: str,
    seed: int,
    cases: list[Case],
    history: History,
    allowances: Mapping[str, int] | None = None,
) -> Report:
    return judge(await _facts(stack, cases), scenario, seed, cases, history, allowances)


def judge(
    facts: Facts,
    scenario: str,
    seed: int,
    cases: list[Case],
    history: History,
    allowances: Mapping[str, int] | None = None,
) -> Report:
    """The verdict on gathered facts (pure: the checker's own tests feed it made-up systems).
    ``allowances`` are the scenario's reasons for a proposal to end without success; a decline
    sent is counted here, from the history."""
    report = Report(scenario, seed, proposals=len(facts.proposals), cases=len(cases))
    declined = {op.proposal_id for op in history.ops if op.kind == "decline"}
    report.allowances = {k: n for k, n in (allowances or {}).items() if n}
    if declined:
        report.allowances["declines sent"] = len(declined)
    report.reconciled = facts.reconciled
    report.statuses = dict(Counter(row["status"] for row in facts.proposals))
    report.operations = {f"{k}:{r}": n for (k, r), n in sorted(history.summary().items())}
    _check_orders(report, facts, cases)
    known = {row["id"] for row in facts.proposals}
    for op in history.ops:
        if op.kind == "propose" and op.result == "ok" and op.proposal_id not in known:
            report.lost += 1
            report.note(f"{op.proposal_id}: created (201) but not in the database")
    for row in facts.proposals:
        _check_proposal(report, facts, history, row)
    return report


def _check_orders(report: Report, facts: Facts, cases: list[Case]) -> None:
    """Per refund case. Agreement is judged only where every proposal of the case has ended: an
    unresolved one is counted as such, not twice."""
    open_orders = {row["resource_id"] for row in facts.proposals if row["status"] not in TERMINAL}
    succeeded = Counter(
        row["resource_id"] for row in facts.proposals if row["status"] == "succeeded"
    )
    proposed = Counter(row["resource_id"] for row in facts.proposals)
    for case in cases:
        if proposed[case.order_id] > 1:  # every retry carried the case's Idempotency-Key
            report.duplicate_local += proposed[case.order_id] - 1
            report.note(f"{case.order_id}: {proposed[case.order_id]} proposals for one case")
        effects = facts.effects[case.payment_ref]
        if effects > 1:
            report.duplicate_external += effects - 1
            report.note(f"{case.order_id}: {effects} refunds at the provider")
        local = max(facts.refunds[case.order_id], succeeded[case.order_id]) - 1
        if local > 0:
            report.duplicate_local += local
            report.note(f"{case.order_id}: {local + 1} local refunds or succeeded proposals")
        if case.order_id in open_orders:
            continue
        _check_books(report, case, facts.books[case.order_id])
        if (effects == 0) != (succeeded[case.order_id] == 0):
            report.disagreeing += 1
            report.note(
                f"{case.order_id}: provider applied {effects}, "
                f"{succeeded[case.order_id]} proposal(s) succeeded"
            )


def _check_books(report: Report, case: Case, books: dict[str, Any]) -> None:
    """The club's own books for a settled case: the payment's refunded amount is its refunds'
    sum (more means an effect applied twice), nothing is left reserved, and the order total went
    down by exactly what was refunded."""
    refunded, recorded = books["refunded_cents"], books["refunds_cents"]
    if refunded > recorded:
        report.duplicate_local += 1
        report.note(f"{case.order_id}: payment refunded {refunded}, refunds recorded {recorded}")
    elif (
        refunded < recorded
        or books["reserved_cents"] != 0
        or (books["total_cents"] != case.total_before - refunded)
    ):
        report.disagreeing += 1
        report.note(f"{case.order_id}: books disagree {books}, total before {case.total_before}")


def _check_proposal(report: Report, facts: Facts, history: History, row: dict[str, Any]) -> None:
    pid, status = row["id"], row["status"]
    claimed_replies = history.replies("approve", pid).count("claimed")
    runs = facts.executions.get(pid, [])
    extra = max(
        max(facts.claims[pid], claimed_replies) - 1,
        len(runs) - 1,
        len(facts.conclusions.get(pid, ())) - 1,
        0,
    )
    if extra:
        report.duplicate_local += extra
        report.note(
            f"{pid}: claims={facts.claims[pid]} (replies {claimed_replies}), "
            f"executions={len(runs)}, conclusions={len(facts.conclusions.get(pid, ()))}"
        )
    if row["late"]:
        report.disagreeing += 1
        report.note(f"{pid}: claimed at {row['decided_at']} after expiry {row['expires_at']}")
    if "declined" in history.replies("decline", pid) and status != "declined":
        report.disagreeing += 1
        report.note(f"{pid}: the decline was acknowledged, the proposal ended {status}")
    if claimed_replies and status in ("pending", "declined", "expired", "superseded"):
        report.lost += 1
        report.note(f"{pid}: approval acknowledged (claimed), the proposal ended {status}")
    if status in TERMINAL:
        return
    if status == "pending" and not any(op.proposal_id == pid for op in history.ops):
        # made by a propose whose answer was lost: no one was told of it, so no one approved
        # it; it waits for a person like any pending proposal (and expires unattended)
        report.note(f"{pid}: pending, unknown to the client (an indeterminate propose)")
        return
    report.unresolved += 1
    current = [run for run in runs if run["contract_id"] == row["contract_id"]]
    why = _why_lost(status, current, facts.attempts.get(pid))
    if why:
        report.lost += 1
        if not current:  # what became of the contract on its way out
            why += f"; its outbox rows: {facts.contracts.get(pid, [])}"
    report.note(f"{pid}: still {status} at the deadline ({why or 'work still pending'})")


def _why_lost(status: str, runs: list[dict[str, Any]], attempt: str | None) -> str | None:
    """Whether nothing is working on an unresolved proposal any more, and what vanished."""
    if status == "pending":
        return None
    if not runs:
        return "its contract never reached an executor"
    outcome = runs[0]["outcome"] or {}
    if runs[0]["status"] == "done" and outcome.get("type") != "needs_reconciliation":
        return "the executor concluded; the outcome never arrived"
    if runs[0]["status"] == "done" and status == "executing":
        return "the executor asked for reconciliation; the proposal never heard"
    if attempt in ("succeeded", "failed", "not_applied"):
        return "the attempt concluded; the outcome never arrived"
    return None
