"""Proposal lifecycle metrics: latencies observed at the transition, states counted by the
database.

Latencies come from the row the transition's ``UPDATE … RETURNING`` gave back (database clock
on both ends), observed once the transaction committed. The state gauge is refreshed by a loop
with one ``GROUP BY`` query, so a scrape never touches the database.
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


async def refresh_states(engine: AsyncEngine, interval_s: float = 5.0) -> None:
    """Keep ``signoff_proposals_in_state`` current (every status present, zero included)."""
    while True:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT status, count(*) AS n FROM proposals.proposals GROUP BY status")
            )
            counts = {row.status: row.n for row in rows}
        for status in ProposalStatus:
            IN_STATE.labels(status=status.value).set(counts.get(status.value, 0))
        await asyncio.sleep(interval_s)
