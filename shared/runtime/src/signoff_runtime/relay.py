"""The outbox relay: publishes a schema's outbox rows, never losing one.

The relay publishes unsent rows (written by ``signoff_runtime.outbox``) as persistent messages,
waits for the broker's confirm, and only then marks them sent. A relay killed between confirm and
mark-sent publishes the row again — consumers dedup by ``message_id`` — but a message is never
lost. Publishing to a routing key with no binding raises (``on_return_raises``) and the row stays
in the outbox with its error — except a fact (``topology.FACT_EXCHANGES``), which may have no
reader: it is published without ``mandatory``, and marked sent once confirmed. Every message
carries the relay's broker user in ``user_id`` (RabbitMQ checks it; consumers require it).

A row the broker refuses outright — its exchange missing (``NOT_FOUND``) or closed to the relay's
user (``ACCESS_REFUSED``) — makes the broker close the channel, which fails every publish in
flight on it. So the relay asks once per exchange whether the broker has it (a passive declare on
a channel of its own) and backs off a row naming a missing one without publishing it. Where a
channel still closes, only the rows the refusal names back off; the others were merely cut short
and are handed back for the next round at once. The relay's connection and channel are plain ones it
opens again itself: aio-pika's robust channel reopened itself while the relay opened another, and
the broker closed the whole connection (``CHANNEL_ERROR - expected 'channel.open'``). A lost
connection (broker or database) is passing: the relay reconnects; it never stops for one.

A writer of the relay's own process hands it the rows it has committed (``offer``,
``outbox.local_relay``), which it publishes at once without reading them back — unless a round
of its own carried the row already: a busy relay's take may find a committed row before the
writer's task resumes to hand it over (that published rows twice with no fault at all). Rows
written elsewhere wake it by ``NOTIFY`` (sent by the writing statement, so it fires at commit;
heard on a connection that does nothing else), and it polls slowly as a safety net. Every wake
ends with a take, the hand-overs' too, though it mostly finds nothing: skipping it made signoff
slower at C=16 in five pairs of five side by side, and cost more CPU per proposal, not less
(docs/benchmarks.md, "Session 25"). Several
relays may run: a round takes its rows under a lease (``relay_rows``: one statement, no
transaction held open while the broker confirms), so a row the relay was woken for is published
after one round trip to the database. Rounds overlap: the next round takes and publishes new rows
while earlier ones still wait for their confirms (at most ``rounds`` at once), so a slow confirm
holds back no later row. Across the rounds at most ``PUBLISHING`` publishes are under way at once:
a backlog waits as rows, not as built messages.

Each round is a span of its own (``outbox.relay <schema>``, no parent): it starts when the
hand-over or the ``NOTIFY`` that woke it arrived, and marks when the round began, had its rows
(``selected``: taken, or at once when handed over), published them and had every confirm; it
ends once they are marked sent, and names the message ids it carried
(``signoff.outbox.message_ids``) — the timeline of one approval reads them.

(Over 300 lines: the loop, its overlapping rounds and their spans are one mechanism; the
statements are ``relay_rows``.)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

import aio_pika
import aiormq
import asyncpg
import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from sqlalchemy import Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_runtime import failover
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.metrics import (
    OUTBOX_OLDEST_UNSENT,
    OUTBOX_PUBLISH_ERRORS,
    OUTBOX_PUBLISHED,
    OUTBOX_RELAY_HEARTBEAT,
    OUTBOX_UNSENT,
)
from signoff_runtime.outbox import local_relay, notify_channel
from signoff_runtime.relay_rows import RelayRows, Row
from signoff_runtime.settings import broker_user
from signoff_runtime.topology import FACT_EXCHANGES, Topology

log = structlog.get_logger(__name__)
_TRACER = trace.get_tracer(__name__)
#: what a round may meet that the next round recovers from (a lost connection, a closed channel,
#: a database connection left in a state asyncpg no longer follows: it is closed and opened again)
_PASSING = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    aio_pika.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
)


class NoSuchExchange(Exception):
    """A row names an exchange the broker does not have (found before any publish of it)."""


class _Unreachable(aio_pika.exceptions.AMQPError):
    """The relay's AMQP connection could not be (re)opened or closed under it: passing."""


#: the most a refused row waits before its next publish: a fault of its own (no queue bound to its
#: routing key, its exchange missing or closed to the relay) a minute; the broker's passing trouble
#: (a nack while a quorum queue elects a new leader, a confirm that never came) two seconds, so a
#: row goes out within seconds of the broker's recovery however often it was refused meanwhile
#: (with one exponential back-off for both, rows nacked through a node's restart waited a minute)
OWN_FAULT_S = 60.0
BROKER_FAULT_S = 2.0
#: how many batches of the latest rows' ids a relay remembers so as not to publish a row handed
#: over after a take already carried it (``OutboxRelay.offer``)
RECENT_BATCHES = 10
#: publishes a relay has under way at once, across its rounds (``OutboxRelay._publish``), from
#: the message built to its confirm. A backlog's rounds (four of 200 rows) once waited on
#: aiormq's channel lock as 800 built messages with their coroutines, a burst of approvals
#: leaving them in the proposals service's peak. Confirms still overlap: 64 outstanding at a
#: quorum queue's ~2 ms confirm is far above any rate here.
PUBLISHING = 64


def _back_off_s(row: Any, result: BaseException) -> float | None:
    """How long at most ``row`` backs off after its publish failed with ``result``; ``None``: it
    is handed back for the next round at once (the channel closed under it for another row's
    fault, or the connection was lost: no fault of this row's, nor one to wait out).

    A channel the broker closed fails every publish in flight on it with the same reason; the
    reason names the exchange it refused (``NOT_FOUND - no exchange 'x' ...``, ``ACCESS_REFUSED -
    access to exchange 'x' ...``), so the rows naming that exchange are the refused ones. A
    reason naming no exchange cannot be pinned on one row: all the rows it failed back off
    briefly (a bad row must never spin)."""
    if isinstance(result, aio_pika.exceptions.DeliveryError):
        returned = getattr(result.frame, "name", "") == "Basic.Return"  # NO_ROUTE, not a nack
        return OWN_FAULT_S if returned else BROKER_FAULT_S
    if isinstance(result, TimeoutError):
        return BROKER_FAULT_S
    if isinstance(result, NoSuchExchange):
        return OWN_FAULT_S
    if isinstance(result, aiormq.exceptions.ChannelClosed):
        reason = str(result)
        if "exchange '" not in reason:
            return BROKER_FAULT_S
        return OWN_FAULT_S if f"exchange '{row.exchange}'" in reason else None
    return None if isinstance(result, _PASSING) else OWN_FAULT_S


def persistent_message(
    body: bytes,
    *,
    message_id: str,
    correlation_id: str | None,
    message_type: str,
    user_id: str,
    headers: dict[str, Any],
) -> aio_pika.Message:
    """A message as signoff publishes one: JSON, persistent, its envelope's ids and type repeated
    in the AMQP properties, and the sender's broker user (RabbitMQ checks it)."""
    return aio_pika.Message(
        body,
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=message_id,
        correlation_id=correlation_id,
        type=message_type,
        user_id=user_id,
        headers=headers,
    )


class OutboxRelay:
    """Publishes one schema's outbox. ``run`` until cancelled."""

    def __init__(
        self,
        engine: AsyncEngine,
        table: Table,
        amqp_url: str,
        topology: Topology,
        *,
        batch: int = 200,
        poll_s: float = 1.0,
        publish_timeout_s: float = 10.0,
        rounds: int = 4,
        publishing: int = PUBLISHING,
        mark_before_confirm: bool = False,
    ) -> None:
        self._engine = engine
        self._table = table
        self._amqp_url = amqp_url
        self._user = broker_user(amqp_url)
        self._topology = topology
        self._facts = {topology.name(short) for short in FACT_EXCHANGES}
        self._batch = batch
        self._poll_s = poll_s
        self._timeout = publish_timeout_s
        #: a taken row is another relay's again after this long: a round lasts about one publish
        #: timeout at most (one outlasting its lease costs a deduplicated second publish), and a
        #: relay that died holding rows is waited for no longer
        self._lease_s = publish_timeout_s + 5.0
        self._rounds = asyncio.Semaphore(rounds)
        self._publishing = asyncio.Semaphore(publishing)
        self._in_flight: set[asyncio.Task[None]] = set()
        #: an error no round should meet (a bug): ``run`` raises it
        self._broken: BaseException | None = None
        self._rows: RelayRows | None = None
        #: rows this process's writers handed over (``offer``), waiting for a round; and the ids
        #: of the rows in a round now: neither is taken again, nor handed over twice
        self._offered: list[Row] = []
        self._offered_ns: int | None = None
        self._busy: set[int] = set()
        #: the ids of the latest rows any round carried (oldest first, ``RECENT_BATCHES``
        #: batches): a writer's hand-over runs when its task resumes after the commit, and a
        #: busy relay's take may have found, published and marked the row before that
        self._recent: dict[int, None] = {}
        self._listener: asyncpg.Connection | None = None
        self._wake = asyncio.Event()
        #: when the first NOTIFY since the last round began arrived (ns since the epoch)
        self._notified_ns: int | None = None
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        #: exchanges the broker was seen to have (``_check_exchange``), and one check at a time
        self._exchanges: set[str] = set()
        self._checking = asyncio.Lock()
        #: SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM, a negative control (``SIGNOFF_ENV=test`` only)
        self._mark_before_confirm = mark_before_confirm

    async def run(self) -> None:
        # a restarted run starts afresh: what broke the last one is in its log
        self._broken = None
        # this process's writers hand their rows over after their commit (``outbox``)
        # (not the negative control's relay, which must take every row it publishes)
        unregister = (
            local_relay(self._engine.url, self._table, self.offer)
            if not self._mark_before_confirm
            else lambda: None
        )
        measure_at = 0.0
        try:
            while True:
                if self._broken is not None:
                    raise self._broken
                try:
                    await self._ensure_channel()
                    await self._connect()
                    await self._pump()
                    # a busy relay wakes on every commit; the lag gauges need no such rate
                    if time.monotonic() >= measure_at:
                        await self.measure()
                        measure_at = time.monotonic() + self._poll_s
                except _PASSING as exc:
                    log.warning("outbox.drain_failed", schema=self._table.schema, error=str(exc))
                    await self._disconnect()
                # no task of its own (as ``wait_for`` would make): a wake resumes this one
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            unregister()
            await self._finish()
            await self._disconnect()
            await self._drop_broker()

    async def _pump(self) -> None:
        """Start rounds until one takes less than a full batch. Each publishes, waits for its
        confirms and marks its rows on its own; ``_delivered`` hears how it ended."""
        if self._mark_before_confirm:
            while await self._drain_marking_first() == self._batch:
                pass
            return
        while self._offered:
            await self._rounds.acquire()
            rows, self._offered = self._offered[: self._batch], self._offered[self._batch :]
            rows = [row for row in rows if row.id not in self._busy]  # a take had it already
            if not rows:
                self._rounds.release()
                continue
            began = time.time_ns()
            start, self._offered_ns = self._offered_ns or began, None
            self._start(rows, self._span(rows, start, began, handed=True))
        while True:
            await self._rounds.acquire()
            try:
                taken = await self._take()
            except BaseException:
                self._rounds.release()
                raise
            if taken is None:
                self._rounds.release()
                return
            self._start(*taken)
            if len(taken[0]) < self._batch:
                return

    def offer(self, rows: list[dict[str, Any]]) -> None:
        """Rows a writer of this process has just committed: publish them without reading them
        back (``outbox.local_relay``). While the relay cannot keep up (or cannot reach its
        table) it keeps at most ten batches in hand; the rest it takes from the table later.
        A row one of its rounds carried already (``_recent``) is dropped."""
        room = 10 * self._batch - len(self._offered)
        fresh = [row for row in rows if row["id"] not in self._recent]
        self._offered.extend(Row(row) for row in fresh[: max(0, room)])
        if self._offered_ns is None:
            self._offered_ns = time.time_ns()
        self._wake.set()

    def _start(self, rows: list[Any], span: trace.Span) -> None:
        """A round of its own for ``rows`` (the caller holds one of ``_rounds`` for it), its
        publishes started here: they go out at the loop's next turn, not one after that."""
        ids = {row.id for row in rows}
        self._busy |= ids
        self._recent.update(dict.fromkeys(ids))
        for _ in range(len(self._recent) - RECENT_BATCHES * self._batch):
            del self._recent[next(iter(self._recent))]
        span.add_event("publishing")
        publishes = [asyncio.ensure_future(self._publish(row)) for row in rows]
        task = asyncio.create_task(self._deliver(rows, span, publishes))
        self._in_flight.add(task)
        task.add_done_callback(lambda done: self._delivered(done, ids))

    def _delivered(self, task: asyncio.Task[None], ids: set[int]) -> None:
        self._in_flight.discard(task)
        self._busy -= ids
        self._rounds.release()
        if task.cancelled() or (exc := task.exception()) is None:
            return
        if isinstance(exc, _PASSING):
            log.warning("outbox.drain_failed", schema=self._table.schema, error=str(exc))
        else:
            self._broken = self._broken or exc
        self._wake.set()  # the loop reconnects, or raises what broke

    async def _finish(self, timeout_s: float = 5.0) -> None:
        """Let the rounds in flight finish (a stopping service), then cancel the rest: their
        rows are handed back (``_deliver``) for the next relay to publish."""
        if self._in_flight:
            _, pending = await asyncio.wait(set(self._in_flight), timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _ensure_channel(self) -> None:
        """A channel the broker closed (e.g. a row naming a missing exchange) is reopened, so one
        bad row backs off on its own instead of stopping every publish after it; a lost connection
        is opened again. Only here, by the relay's loop: nothing restores either behind its back
        (a second ``channel.open`` racing a restore closes the whole connection)."""
        try:
            if self._connection is None or self._connection.is_closed:
                self._channel = None
                self._connection = await failover.connect(self._amqp_url, timeout=self._timeout)
            if self._channel is None or self._channel.is_closed:
                self._channel = await self._connection.channel(
                    publisher_confirms=True, on_return_raises=True
                )
        except RuntimeError as exc:  # aio-pika: "<Connection ...> closed" (closed under us)
            await self._drop_broker()
            raise _Unreachable(repr(exc)) from exc
        except aio_pika.exceptions.CONNECTION_EXCEPTIONS:
            await self._drop_broker()
            raise

    async def _check_exchange(self, name: str) -> None:
        """Raise ``NoSuchExchange`` unless the broker has exchange ``name``: asked once per
        exchange and connection, by a passive declare on a channel of its own.

        A publish to a missing exchange makes the broker close the channel it came on, failing
        every publish in flight beside it, and the frames already sent behind it on the closed
        channel make the broker close the whole connection (``CHANNEL_ERROR``). Rows left behind
        by an old topology (a removed prefix, another test's) then cut short every round that
        took good rows with them, round after round as each came due again. Checked first, a
        missing exchange costs its own rows a back-off and nothing else."""
        async with self._checking:
            if name in self._exchanges:
                return
            assert self._connection is not None, "_ensure_channel() opens the connection"
            channel = await self._connection.channel(publisher_confirms=False)
            try:
                await channel.get_exchange(name, ensure=True)
            except aiormq.exceptions.ChannelNotFoundEntity as exc:
                raise NoSuchExchange(str(exc)) from exc
            finally:
                if not channel.is_closed:
                    await channel.close()
            self._exchanges.add(name)

    async def _drop_broker(self) -> None:
        self._exchanges.clear()
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _connect(self) -> None:
        """The relay's two connections of its own (again, after one was lost): one only listens,
        so a ``NOTIFY`` is heard at once; the other runs the relay's statements. Every wake asks,
        so the usual answer (both open) costs two checks, not a parse of the URL."""
        listening = self._listener is not None and not self._listener.is_closed()
        running = self._rows is not None and not self._rows.closed
        if listening and running:
            return
        dsn = asyncpg_dsn(str(self._engine.url.render_as_string(False)))
        schema = str(self._table.schema)
        if not listening:
            self._listener = await asyncpg.connect(dsn)
            await self._listener.add_listener(notify_channel(self._table), self._notified)
        if not running:
            self._rows = await RelayRows.open(dsn, schema, self._lease_s, f"relay-{schema}")

    async def _disconnect(self) -> None:
        for conn in (self._listener, self._rows):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._listener = self._rows = None

    def _notified(self, *_: Any) -> None:
        if self._notified_ns is None:
            self._notified_ns = time.time_ns()
        self._wake.set()

    async def measure(self) -> None:
        """Refresh the lag gauges (one query on the unsent rows' partial index)."""
        schema = self._table.schema
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT count(*) AS n, coalesce(extract(epoch FROM "  # noqa: S608
                        f"now() - min(created_at)), 0) AS age FROM {schema}.outbox "
                        "WHERE sent_at IS NULL"
                    )
                )
            ).one()
        OUTBOX_UNSENT.labels(schema=schema).set(row.n)
        OUTBOX_OLDEST_UNSENT.labels(schema=schema).set(float(row.age))
        # the relay is alive and reaches its table: an alert watches this stop moving
        OUTBOX_RELAY_HEARTBEAT.labels(schema=schema).set_to_current_time()

    async def drain(self) -> int:
        """Publish one batch of due rows and mark them; return how many rows were taken."""
        if self._mark_before_confirm:
            return await self._drain_marking_first()
        await self._connect()
        taken = await self._take()
        if taken is None:
            return 0
        await self._deliver(*taken)
        return len(taken[0])

    async def _take(self) -> tuple[list[Any], trace.Span] | None:
        assert self._rows is not None, "_connect() opens the connection"
        began = time.time_ns()
        notified, self._notified_ns = self._notified_ns, None
        besides = sorted(self._busy | {row.id for row in self._offered})
        rows = await self._rows.take(self._batch, besides)
        if not rows:
            return None
        taken = {row.id for row in rows}  # handed over while the take ran: published once
        self._offered = [row for row in self._offered if row.id not in taken]
        return rows, self._span(rows, notified or began, began)

    async def _deliver(
        self,
        rows: list[Any],
        span: trace.Span,
        publishes: Sequence[asyncio.Future[None]] | None = None,
    ) -> None:
        """Publish ``rows`` (or wait for ``publishes`` of them already started), wait for every
        confirm, mark them. A round cut short (cancelled, or its marking failed) hands its rows
        back at once instead of holding their lease."""
        conn = self._rows  # the connection that took them (``run`` may replace it meanwhile)
        try:
            if publishes is None:
                span.add_event("publishing")
                publishes = [asyncio.ensure_future(self._publish(row)) for row in rows]
            results = await asyncio.gather(*publishes, return_exceptions=True)
            span.add_event("confirmed")
            if any(isinstance(res, aiormq.exceptions.ChannelClosed) for res in results):
                self._exchanges.clear()  # an exchange seen before may be gone: check again
            sent: list[int] = []
            failed: list[tuple[int, str, float]] = []
            cut_short: list[int] = []
            for row, res in zip(rows, results, strict=True):
                if res is None:
                    sent.append(row.id)
                elif (wait_s := _back_off_s(row, res)) is None:
                    cut_short.append(row.id)
                else:
                    failed.append((row.id, repr(res)[:500], wait_s))
            await self._mark(conn, sent, failed)
            if cut_short:
                # the channel closed under them: the next round (at once) publishes them again
                assert conn is not None
                await conn.release(cut_short)
                self._wake.set()
        except BaseException as exc:
            if conn is not None:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self._timeout):  # a broken connection may hang
                        await conn.release([row.id for row in rows])
                if not isinstance(exc, asyncio.CancelledError):
                    # a statement failed on it: it may be left mid-statement; the loop opens
                    # another (``_connect``) instead of failing every later round on this one
                    conn.discard()
            raise
        finally:
            span.end()

    def _span(self, rows: Any, start: int, began: int, *, handed: bool = False) -> trace.Span:
        """The round's span (a root: it serves many traces), from the wake or hand-over."""
        span = _TRACER.start_span(
            f"outbox.relay {self._table.schema}",
            context=otel_context.Context(),
            start_time=start,
            attributes={
                "signoff.outbox.schema": str(self._table.schema),
                "signoff.outbox.message_ids": [row.message_id for row in rows],
                "signoff.outbox.handed_over": handed,
            },
        )
        span.add_event("began", timestamp=began)
        span.add_event("selected")
        return span

    async def _drain_marking_first(self) -> int:
        """The negative control ``SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM``: commit a batch as
        sent, then publish it. A crash (or a refused publish) before the confirm loses the message —
        exactly what ``drain`` exists to prevent."""
        await self._connect()
        assert self._rows is not None
        rows = await self._rows.take_marking_sent(self._batch)
        results = await asyncio.gather(
            *(self._publish(row) for row in rows), return_exceptions=True
        )
        for row, result in zip(rows, results, strict=True):
            if result is not None:
                log.warning(
                    "outbox.unsafe_message_lost",
                    schema=self._table.schema,
                    row=row.id,
                    error=repr(result),
                )
        return len(rows)

    async def _publish(self, row: Any) -> None:
        """Publish ``row`` and wait for its confirm, within the publish timeout from the moment
        it is asked for (waiting for room under ``PUBLISHING`` included, as waiting for
        aiormq's lock was): a round keeps to its lease. Room is taken at once when there is
        some, so a handed-over row still goes out at the loop's next turn."""
        async with asyncio.timeout(self._timeout), self._publishing:
            assert self._channel is not None
            if row.exchange not in self._exchanges and row.exchange:  # "": the default exchange
                await self._check_exchange(row.exchange)
            message = persistent_message(
                bytes(row.body),
                message_id=row.message_id,
                correlation_id=row.correlation_id,
                message_type=row.message_type,
                user_id=self._user,
                headers=dict(row.headers or {}),
            )
            # aiormq's own publish, not aio-pika's: aio-pika's waits until the connection's
            # writer has written the frame before it lets go of the channel's lock, so a backlog
            # went out one publish per two turns of the loop; the confirm is awaited either way
            channel = await self._channel.get_underlay_channel()
            assert isinstance(channel, aiormq.Channel), "aio-pika's channel is aiormq's"
            await channel.basic_publish(
                message.body,
                exchange=row.exchange,
                routing_key=row.routing_key,
                properties=message.properties,
                mandatory=row.exchange not in self._facts,
                wait=False,
            )

    async def _mark(
        self, rows: RelayRows | None, sent: list[int], failed: list[tuple[int, str, float]]
    ) -> None:
        assert rows is not None, "_connect() opens the connection"
        schema = self._table.schema
        if sent:
            await rows.mark(sent)
            OUTBOX_PUBLISHED.labels(schema=schema).inc(len(sent))
        for row_id, error, at_most_s in failed:
            await rows.back_off(row_id, error, at_most_s)
            OUTBOX_PUBLISH_ERRORS.labels(schema=schema).inc()
            log.warning("outbox.publish_failed", schema=schema, row=row_id, error=error)
