"""Waiting for a decision without polling: one proposal's changes, pushed or long-polled.

``GET /v1/proposals/{id}/events`` is a server-sent event stream of the proposal's audit trail:
each entry is one event whose ``id`` is the entry's id, so a client that reconnects with
``Last-Event-ID`` gets exactly what it missed — the database is the source, the change
notifications (``events.ChangeHub``) only wake the stream. The stream ends after the entry that
reaches a terminal status (``succeeded``, ``failed``, ``declined``, ``expired``, ``withdrawn``…).

``GET /v1/proposals/{id}?wait=S`` answers like the plain read, but not before the status differs
from ``status`` (the one the client last saw; by default the one at the request) or ``S`` seconds
passed (capped by ``SIGNOFF_PROPOSALS__WAIT_MAX_S``). Both are read like every read: the token's
current member, another organization's proposal a 404.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from signoff_contracts.operations import Membership
from signoff_contracts.status import ProposalStatus
from sqlalchemy import select

from signoff_proposals.api.events import ChangeHub
from signoff_proposals.context import Context
from signoff_proposals.tables import audit, proposals


def _frame(entry: Any, status: str) -> str:
    data = {
        "proposal_id": entry.proposal_id,
        "action": entry.action,
        "from_status": entry.from_status,
        "to_status": entry.to_status,
        "status": status,
        "at": entry.at.isoformat(),
    }
    return f"id: {entry.id}\nevent: change\ndata: {json.dumps(data)}\n\n"


async def _entries_after(ctx: Context, proposal_id: str, after: int) -> tuple[list[Any], str]:
    """Audit entries after ``after``, and the proposal's status, from one snapshot.

    Under READ COMMITTED each statement would see its own snapshot: a decision committed
    between the two reads would show as a terminal status whose entry was not read, and the
    stream would end without it.
    """
    async with ctx.engine.connect() as conn:
        await conn.execution_options(isolation_level="REPEATABLE READ")
        rows = (
            await conn.execute(
                select(audit)
                .where(audit.c.proposal_id == proposal_id, audit.c.id > after)
                .order_by(audit.c.id)
            )
        ).all()
        status = (
            await conn.execute(select(proposals.c.status).where(proposals.c.id == proposal_id))
        ).scalar_one()
    return list(rows), str(status)


async def follow(
    ctx: Context,
    hub: ChangeHub,
    member: Membership,
    proposal_id: str,
    after: int,
    disconnected: Callable[[], Any],
) -> AsyncIterator[str]:
    """The stream's frames: the entries after ``after``, then each new one, until terminal."""
    group = ctx.settings.proposals
    queue = hub.subscribe(member.organization_id)
    hub.open_per_person[member.user_id] += 1
    try:
        yield ": connected\n\n"
        while True:
            rows, status = await _entries_after(ctx, proposal_id, after)
            for row in rows:
                after = row.id
                yield _frame(row, status)
            if ProposalStatus(status).is_terminal or await disconnected():
                return
            try:  # a change of this proposal (or a resync) wakes the loop; else a keep-alive
                while True:
                    change = await asyncio.wait_for(queue.get(), group.stream_keepalive_s)
                    if change.get("type") == "resync" or change.get("id") == proposal_id:
                        break
            except TimeoutError:
                yield ": keep-alive\n\n"
    finally:
        hub.unsubscribe(member.organization_id, queue)
        hub.open_per_person[member.user_id] -= 1
        if hub.open_per_person[member.user_id] <= 0:
            del hub.open_per_person[member.user_id]


async def until_changed(
    ctx: Context, hub: ChangeHub, organization_id: str, proposal_id: str, seen: str, wait_s: float
) -> None:
    """Return once the proposal's status is not ``seen``, or after ``wait_s`` seconds."""
    queue = hub.subscribe(organization_id)
    deadline = time.monotonic() + min(wait_s, ctx.settings.proposals.wait_max_s)
    try:
        while (left := deadline - time.monotonic()) > 0:
            async with ctx.engine.connect() as conn:
                status = (
                    await conn.execute(
                        select(proposals.c.status).where(proposals.c.id == proposal_id)
                    )
                ).scalar_one()
            if status != seen:
                return
            try:
                while True:
                    change = await asyncio.wait_for(queue.get(), left)
                    if change.get("type") == "resync" or change.get("id") == proposal_id:
                        break
            except TimeoutError:
                return
    finally:
        hub.unsubscribe(organization_id, queue)
