"""Proposal lifecycle metrics: latencies observed at the transition, states counted by the
database.

Latencies come from the row the transition's ``UPDATE … RETURNING`` gave back (database clock
on both ends), observed once the transaction committed. The state gauge is refreshed by a loop,
so a scrape never touches the database, at two paces: the open statuses (``OPEN``: pending,
executing, needs_reconciliation — what alerts and people watch) every few seconds, each count
read from its own partial index, so it costs what is open, not what is stored; every status
(one ``GROUP BY`` over the whole table) once in ``totals_interval_s``. Counting everything every
five seconds read the whole table each time: 0.5 s of the database's CPU at a million proposals
stored, a tenth of a core for a gauge (docs/benchmarks.md, session 13).
"""

from __future__ import annotations

import asyncio

from prometheus_client import Gauge, Histogram
from signoff_contracts.status import ProposalStatus
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_proposals.lifecycle.repository import Stored

_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400)
DECISION_SECONDS = Histogram(
    "signoff_proposals_decision_seconds",
    "Time from a proposal's creation to the person's decision, by operation kind and decision.",
    ["kind", "decision"],
    buckets=_BUCKETS,
)
OUTCOME_SECONDS = Histogram(
    "signoff_proposals_outcome_seconds",
    "Time from approval to the recorded outcome, by operation kind and outcome status.",
    ["kind", "status"],
    buckets=_BUCKETS,
)
IN_STATE = Gauge(
    "signoff_proposals_in_state",
    "Proposals currently in each status (all organizations), from the database.",
    ["status"],
)

DECISIONS = {
    ProposalStatus.EXECUTING: "approved",
    ProposalStatus.DECLINED: "declined",
    ProposalStatus.WITHDRAWN: "withdrawn",
}
OUTCOMES = {
    ProposalStatus.SUCCEEDED,
    ProposalStatus.REVISION_REQUIRED,
    ProposalStatus.NEEDS_RECONCILIATION,
    ProposalStatus.FAILED,
}


def latency(row: Stored, to: ProposalStatus) -> tuple[Histogram, dict[str, str], float] | None:
    """What to observe for the transition of ``row`` to ``to`` (``None``: nothing)."""
    if to in DECISIONS and row.decided_at is not None:
        seconds = (row.decided_at - row.created_at).total_seconds()
        return DECISION_SECONDS, {"kind": row.operation_kind, "decision": DECISIONS[to]}, seconds
    if to in OUTCOMES and row.decided_at is not None and row.outcome_at is not None:
        seconds = (row.outcome_at - row.decided_at).total_seconds()
        return OUTCOME_SECONDS, {"kind": row.operation_kind, "status": to.value}, seconds
    return None


#: the statuses a proposal leaves again: counted often, each from its partial index
OPEN = (
    ProposalStatus.PENDING,
    ProposalStatus.EXECUTING,
    ProposalStatus.NEEDS_RECONCILIATION,
)
#: one count per open status, each predicate the very one of its partial index
_OPEN_COUNTS = text(
    "SELECT (SELECT count(*) FROM proposals.proposals WHERE status = 'pending') AS pending, "
    "(SELECT count(*) FROM proposals.proposals WHERE status = 'executing') AS executing, "
    "(SELECT count(*) FROM proposals.proposals WHERE status = 'needs_reconciliation') "
    "AS needs_reconciliation"
)
_ALL_COUNTS = text("SELECT status, count(*) AS n FROM proposals.proposals GROUP BY status")


async def refresh_states(
    engine: AsyncEngine, interval_s: float = 5.0, totals_interval_s: float = 300.0
) -> None:
    """Keep ``signoff_proposals_in_state`` current (every status present, zero included): the
    open statuses every ``interval_s``, all of them every ``totals_interval_s`` (and at start)."""
    totals_due = 0.0
    loop = asyncio.get_running_loop()
    while True:
        async with engine.connect() as conn:
            if loop.time() >= totals_due:
                rows = await conn.execute(_ALL_COUNTS)
                counts = {row.status: row.n for row in rows}
                totals_due = loop.time() + totals_interval_s
                shown: tuple[ProposalStatus, ...] = tuple(ProposalStatus)
            else:
                counts = dict((await conn.execute(_OPEN_COUNTS)).one()._mapping)
                shown = OPEN
        for status in shown:
            IN_STATE.labels(status=status.value).set(counts.get(status.value, 0))
        await asyncio.sleep(interval_s)
