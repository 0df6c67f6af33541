"""``GET /v1/events``: the caller's organization's proposal and pause-point changes, pushed.

Frontends follow this server-sent event stream instead of polling the lists. Every state change
of a proposal or a pause point NOTIFYs ``proposals_changes`` at commit (triggers, migration
0004), whichever code path made it. One ``LISTEN`` connection per process (``ChangeHub``) hands
each notification to the streams of that organization only: an event names the kind, id,
status and conversation of what changed — never its content, which the reader fetches with the
same token through the reading routes. Notifications are not stored, so there is nothing to
resume: a reconnecting reader re-reads the state once (``event: resync`` is also sent to every
stream after the listener itself reconnected). The person's membership is checked at opening
and again every ``stream_recheck_s``: a person removed from the organization stops receiving.
A person holds at most ``stream_max_per_person`` streams per process (``429`` beyond).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import structlog
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from signoff_contracts.operations import Membership
from signoff_runtime.members import Authorization
from signoff_runtime.openapi import event_stream
from signoff_runtime.problems import Problem, responses

from signoff_proposals.api.http import member_of
from signoff_proposals.context import Context

log = structlog.get_logger(__name__)
CHANNEL = "proposals_changes"
#: a reader that falls this far behind gets one ``resync`` instead of the backlog
QUEUE_BOUND = 100
RESYNC: dict[str, Any] = {"type": "resync"}


class ChangeHub:
    """Fans the change notifications out to the streams of each organization."""

    def __init__(self, dsn: str, every_organization: bool = False) -> None:
        self._dsn = dsn
        #: ``SIGNOFF_UNSAFE__EVENTS_EVERY_ORGANIZATION`` (tests only): the tenant scope is off
        self._every_organization = every_organization
        self._streams: dict[str, set[asyncio.Queue[dict[str, Any]]]] = defaultdict(set)
        self.open_per_person: dict[str, int] = defaultdict(int)

    def subscribe(self, organization_id: str) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_BOUND)
        self._streams[organization_id].add(queue)
        return queue

    def unsubscribe(self, organization_id: str, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._streams[organization_id].discard(queue)
        if not self._streams[organization_id]:
            del self._streams[organization_id]

    def deliver(self, payload: str) -> None:
        try:
            change = json.loads(payload)
            org = str(change.pop("org"))
        except (ValueError, KeyError, AttributeError):
            log.warning("change_notification_unreadable")
            return
        readers = self._streams.get(org, set())
        if self._every_organization:
            readers = {queue for queues in self._streams.values() for queue in queues}
        for queue in readers:
            _offer(queue, change)

    def resync_all(self) -> None:
        for queues in self._streams.values():
            for queue in queues:
                _offer(queue, RESYNC)

    async def listen(self) -> None:
        """Forever (a service loop: restarted if the connection drops)."""
        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.add_listener(CHANNEL, lambda *args: self.deliver(str(args[-1])))
            self.resync_all()  # anything committed while no one was listening
            while True:
                await asyncio.sleep(5.0)
                await conn.execute("SELECT 1")  # a dropped connection surfaces here
        finally:
            await conn.close()


def _offer(queue: asyncio.Queue[dict[str, Any]], change: dict[str, Any]) -> None:
    if queue.full():
        while not queue.empty():
            queue.get_nowait()
        change = RESYNC
    queue.put_nowait(change)


def _frame(change: dict[str, Any]) -> str:
    kind = "resync" if change.get("type") == "resync" else "change"
    return f"event: {kind}\ndata: {json.dumps(change)}\n\n"


async def follow(
    ctx: Context,
    hub: ChangeHub,
    member: Membership,
    disconnected: Callable[[], Any],
) -> AsyncIterator[str]:
    group = ctx.settings.proposals
    queue = hub.subscribe(member.organization_id)
    checked = time.monotonic()
    hub.open_per_person[member.user_id] += 1
    try:
        yield ": connected\n\n"
        while not await disconnected():
            if time.monotonic() - checked >= group.stream_recheck_s:
                if not await _still_member(ctx, member):
                    return
                checked = time.monotonic()
            try:
                change = await asyncio.wait_for(queue.get(), group.stream_keepalive_s)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            yield _frame(change)
    finally:
        hub.unsubscribe(member.organization_id, queue)
        hub.open_per_person[member.user_id] -= 1
        if hub.open_per_person[member.user_id] <= 0:
            del hub.open_per_person[member.user_id]


async def _still_member(ctx: Context, member: Membership) -> bool:
    async with ctx.engine.connect() as conn:
        now = await ctx.directory.membership(conn, member.user_id, member.organization_id)
    return now is not None and now.organization_id == member.organization_id


def router(ctx: Context, hub: ChangeHub) -> APIRouter:
    api = APIRouter()

    @api.get(
        "/v1/events",
        response_class=StreamingResponse,
        responses=event_stream("Changes to the organization's proposals, live.") | responses(429),
    )
    async def organization_events(
        request: Request, authorization: Authorization = None
    ) -> StreamingResponse:
        member = await member_of(ctx, authorization)
        if (
            hub.open_per_person.get(member.user_id, 0)
            >= ctx.settings.proposals.stream_max_per_person
        ):
            raise Problem(429, "too_many_streams", "Close another page first.")
        stream = follow(ctx, hub, member, request.is_disconnected)
        return StreamingResponse(
            stream, media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    return api
