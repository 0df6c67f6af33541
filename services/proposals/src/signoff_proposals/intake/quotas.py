"""Quotas on what waits for people: pending proposals and pause points per conversation and org.

An assistant in a loop must not bury a team in cards. A storing transaction writes its row, and
as its last statement before its commit counts the organization's pending rows under a
transaction-scoped advisory lock on the organization (``proposals.pending_under_lock``, migration
0010: the lock and then the count, one round trip). The lock is held until the commit, and under
READ COMMITTED the count sees every earlier holder's committed rows and the caller's own, so of
twenty concurrent requests against a limit of five exactly five commit, whichever replicas they
reach. Rows other requests have written but not yet counted are not seen: each is counted by its
own writer, after this one. Counting *after* the insert lets a replayed request (its row already
there) pass unchanged. Only unexpired pending rows count: a lapsed one is as good as expired even
before the sweep marks it. A request without a conversation (the machine-facing endpoint) counts
only against its organization.

The lock is taken last because it serializes an organization's requests from the moment it is
taken to the commit: taken before the insert, it held every other request back through the
insert, its audit and outbox rows, the policy's freeze and each turn of the event loop between
them (a proposal waited 97 ms for it on average, 16 at once in one organization).
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
_LOCKS = {"proposals": PROPOSALS_LOCK, "pause_points": PAUSE_POINTS_LOCK}

_COUNT = text(
    "SELECT in_organization, in_conversation FROM proposals.pending_under_lock(:ns, :table, :o, :c)"
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
    """Which limit the pending rows of ``table`` now exceed (the caller's own included). Takes
    the organization's lock until the commit: the caller's last statement before it (a revision
    decided in a batch of approvals, ``approval_batch_size`` above 1, holds it to the batch's
    commit)."""
    params = {"ns": _LOCKS[table], "table": table, "o": organization_id, "c": conversation_id}
    row: Any = (await conn.execute(_COUNT, params)).one()
    if conversation_id is not None and row.in_conversation > per_conversation:
        return Reason(code="conversation_quota_exceeded", params={"limit": per_conversation})
    if row.in_organization > per_organization:
        return Reason(code="organization_quota_exceeded", params={"limit": per_organization})
    return None
