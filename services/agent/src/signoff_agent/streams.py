"""Server-sent events: a conversation's new messages, card updates and turns, as they commit.

Writers append to the conversation's journal and ``NOTIFY agent_conversations`` in the same
transaction. One ``LISTEN`` connection per process (``Hub``) wakes the streams of that
conversation; each stream then reads the journal after the last ``seq`` it sent, so nothing is
missed between wake-ups, a reconnect resumes from ``Last-Event-ID``, and replicas need no
shared memory — a message written by any process (a turn started by an event included) reaches
every stream. Without notifications (the listener reconnecting) streams still poll at the
keep-alive interval.

A stream is a long-lived read: the person's membership is checked again every
``stream_membership_check_s`` (30 s at most), and the stream ends with a ``closed`` event
(``{"reason": "not_a_member"}``) once they are no longer in the organization. A person has at
most ``max_streams_per_person`` streams open in one process (``StreamLimit``); beyond it the
route answers ``429 too_many_streams``.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import structlog
from signoff_contracts.operations import Locale
from signoff_runtime.registry import Operations
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_agent import repository as repo
from signoff_agent import views

log = structlog.get_logger(__name__)


class Hub:
    """Wakes the streams of a conversation when its journal grows."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._waiting: dict[str, set[asyncio.Event]] = defaultdict(set)

    def subscribe(self, conversation_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self._waiting[conversation_id].add(event)
        return event

    def unsubscribe(self, conversation_id: str, event: asyncio.Event) -> None:
        self._waiting[conversation_id].discard(event)
        if not self._waiting[conversation_id]:
            del self._waiting[conversation_id]

    def wake(self, conversation_id: str) -> None:
        for event in self._waiting.get(conversation_id, ()):
            event.set()

    async def listen(self) -> None:
        """Forever (a service loop: restarted if the connection drops)."""
        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.add_listener(repo.CHANNEL, lambda *args: self.wake(str(args[-1])))
            for waiting in list(self._waiting):
                self.wake(waiting)  # anything committed while we were away
            while True:
                await asyncio.sleep(5.0)
                await conn.execute("SELECT 1")  # a dropped connection surfaces here
        finally:
            await conn.close()


class StreamLimit:
    """At most ``cap`` open event streams per person in this process.

    It holds the streams weakly and counts those not yet finished: a stream that ends, or whose
    response is dropped before it ever started (the client left at once), stops counting with no
    bookkeeping that a cancelled request could skip.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._streams: dict[str, weakref.WeakSet[Any]] = defaultdict(weakref.WeakSet)

    def open_count(self, person: str) -> int:
        return sum(1 for stream in self._streams[person] if stream.ag_frame is not None)

    def admit(self, person: str, stream: AsyncIterator[str]) -> bool:
        """Count ``stream`` as ``person``'s if they are under the cap; else ``False``."""
        if self.open_count(person) >= self.cap:
            return False
        self._streams[person].add(stream)
        return True


def frame(seq: int | None, event: str, data: dict[str, Any]) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


async def entry(
    conn: AsyncConnection, row: Row[Any], locale: Locale, operations: Operations
) -> dict[str, Any] | None:
    if row.kind == "message":
        found = await repo.message(conn, row.ref)
        return None if found is None else views.message(found, locale, operations)
    if row.kind == "card":
        card = await repo.card(conn, row.ref)
        return None if card is None else views.card(card)
    status, _, turn_id = row.ref.partition(":")
    return {"status": status, "turn_id": turn_id}


async def follow(
    engine: AsyncEngine,
    hub: Hub,
    conversation_id: str,
    after_seq: int,
    locale: Locale,
    operations: Operations,
    keepalive_s: float,
    disconnected: Callable[[], Any],
    *,
    still_member: Callable[[], Awaitable[bool]] | None = None,
    recheck_s: float = 30.0,
) -> AsyncIterator[str]:
    """Frames for every journal entry after ``after_seq``, until the client goes away or the
    person is no longer a member (``still_member``, asked every ``recheck_s``)."""
    wake = hub.subscribe(conversation_id)
    last = after_seq
    clock = asyncio.get_running_loop().time
    checked = clock()
    try:
        yield ": connected\n\n"
        while not await disconnected():
            if still_member is not None and clock() - checked >= recheck_s:
                if not await still_member():
                    yield frame(None, "closed", {"reason": "not_a_member"})
                    return
                checked = clock()
            wake.clear()
            async with engine.connect() as conn:
                rows = await repo.journal_after(conn, conversation_id, last)
                for row in rows:
                    data = await entry(conn, row, locale, operations)
                    if data is not None:
                        yield frame(row.seq, row.kind, data)
                    last = row.seq
            if rows:
                continue
            try:
                await asyncio.wait_for(wake.wait(), min(keepalive_s, recheck_s))
            except TimeoutError:
                yield ": keep-alive\n\n"
    finally:
        hub.unsubscribe(conversation_id, wake)
