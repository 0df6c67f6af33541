"""Quotas on what waits for people: pending proposals and pause points per conversation and org.

An assistant in a loop must not bury a team in cards. Each storing transaction first takes a
transaction-scoped advisory lock on its organization (``pg_advisory_xact_lock(namespace,
hashtext(org))``), then writes its row, then counts: the lock is held until commit, and under
READ COMMITTED each count statement sees every earlier holder's committed rows — so of twenty
concurrent requests against a limit of five, exactly five commit, whichever replicas they reach.
Counting *after* the insert lets a replayed request (its row already there) pass unchanged. Only
unexpired pending rows count: a lapsed one is as good as expired even before the sweep marks it.
A request without a conversation (the machine-facing endpoint) counts only against its
organization.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.reasons import Reason
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# advisory-lock namespaces (the first key of the two-key form), so these locks never collide
# with another user of advisory locks in the same database
PROPOSALS_LOCK = 0x5350_0001
PAUSE_POINTS_LOCK = 0x5350_0002

_COUNT = (
    "SELECT count(*) AS org, count(*) FILTER (WHERE conversation_id = :c) AS conversation "
    "FROM proposals.{table} WHERE organization_id = :o AND status = 'pending' "
    "AND expires_at > statement_timestamp()"
)


async def lock_organization(conn: AsyncConnection, namespace: int, organization_id: str) -> None:
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(:ns, hashtext(:org))"),
        {"ns": namespace, "org": organization_id},
    )


async def excess(
    conn: AsyncConnection,
    table: str,
    organization_id: str,
    conversation_id: str | None,
    *,
    per_conversation: int,
    per_organization: int,
) -> Reason | None:
    """Which limit the pending rows of ``table`` now exceed (the caller's own included)."""
    assert table in ("proposals", "pause_points")
    row: Any = (
        await conn.execute(
            text(_COUNT.format(table=table)), {"o": organization_id, "c": conversation_id}
        )
    ).one()
    if conversation_id is not None and row.conversation > per_conversation:
        return Reason(code="conversation_quota_exceeded", params={"limit": per_conversation})
    if row.org > per_organization:
        return Reason(code="organization_quota_exceeded", params={"limit": per_organization})
    return None
