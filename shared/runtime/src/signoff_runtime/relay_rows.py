"""The outbox relay's statements: taking rows under a lease, marking them sent, backing off.

Each is ONE statement on the relay's own connection (not the service's pool), committed on its
own, in order, one at a time (asyncpg runs one statement per connection at once):

- ``take`` leases the due rows (``available_at`` moved ``lease_s`` ahead, in the same statement
  that finds them with ``FOR UPDATE SKIP LOCKED``), so no other relay takes them while this one
  publishes — and no transaction stays open across the broker's round trip;
- ``mark`` sets ``sent_at`` once the broker confirmed; ``back_off`` keeps a refused row with its
  error for later; ``release`` hands rows back at once (a round that failed before marking).

The connection runs with ``synchronous_commit = off``: what these statements write (a lease, a
sent mark, a back-off) only steers the relay, and a crash that loses one of them costs at most a
second publish of a row already published — which every consumer drops by ``message_id``, as it
does the copy a relay killed between confirm and mark sends. The rows themselves are written by the
services' own transactions, durably. A relay that dies holding a lease leaves its rows unsent;
any relay takes them again once the lease ran out.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import asyncpg

#: the columns a taken row carries
COLUMNS = "id, message_id, exchange, routing_key, message_type, correlation_id, body, headers"


class RelayRows:
    """One schema's outbox, on one connection of the relay's own."""

    def __init__(self, conn: asyncpg.Connection, schema: str, lease_s: float) -> None:
        self.conn = conn
        self._lease_s = lease_s
        self._lock = asyncio.Lock()
        table = f"{schema}.outbox"
        self._take = (
            f"UPDATE {table} SET available_at = now() + make_interval(secs => $2) "  # noqa: S608
            f"WHERE id IN (SELECT id FROM {table} WHERE sent_at IS NULL AND available_at <= now() "
            "AND id <> ALL($3::bigint[]) ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) "
            f"RETURNING {COLUMNS}"
        )
        self._mark = (
            f"UPDATE {table} SET sent_at = now(), attempts = attempts + 1 "  # noqa: S608
            "WHERE id = ANY($1::bigint[])"
        )
        # back off per row (1 s, 2 s, 4 s ... up to $3) so one unroutable message does not spin
        self._back_off = (
            f"UPDATE {table} SET attempts = attempts + 1, last_error = $2, "  # noqa: S608
            "available_at = now() + make_interval(secs => least($3, 2 ^ attempts)) WHERE id = $1"
        )
        # SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM (a negative control): sent before published
        self._take_marking_sent = (
            f"UPDATE {table} SET sent_at = now(), attempts = attempts + 1 "  # noqa: S608
            f"WHERE id IN (SELECT id FROM {table} WHERE sent_at IS NULL AND available_at <= now() "
            f"ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING {COLUMNS}"
        )
        self._release = (
            f"UPDATE {table} SET available_at = now() "  # noqa: S608
            "WHERE id = ANY($1::bigint[]) AND sent_at IS NULL"
        )

    @classmethod
    async def open(cls, dsn: str, schema: str, lease_s: float, name: str) -> RelayRows:
        settings = {"application_name": name, "synchronous_commit": "off"}
        return cls(await asyncpg.connect(dsn, server_settings=settings), schema, lease_s)

    @property
    def closed(self) -> bool:
        return bool(self.conn.is_closed())

    async def take(self, batch: int, besides: list[int]) -> list[Any]:
        """Lease up to ``batch`` due rows, oldest first, none of ``besides`` (rows this relay is
        publishing already, handed over by their writer)."""
        async with self._lock:
            rows = await self.conn.fetch(self._take, batch, self._lease_s, besides)
        return sorted((Row(r) for r in rows), key=lambda row: row.id)

    async def take_marking_sent(self, batch: int) -> list[Any]:
        """The negative control's take: the rows are committed as sent before any publish."""
        async with self._lock:
            rows = await self.conn.fetch(self._take_marking_sent, batch)
        return sorted((Row(r) for r in rows), key=lambda row: row.id)

    async def mark(self, ids: list[int]) -> None:
        async with self._lock:
            await self.conn.execute(self._mark, ids)

    async def back_off(self, row_id: int, error: str, at_most_s: float) -> None:
        async with self._lock:
            await self.conn.execute(self._back_off, row_id, error, at_most_s)

    async def release(self, ids: list[int]) -> None:
        async with self._lock:
            await self.conn.execute(self._release, ids)

    async def close(self) -> None:
        await self.conn.close()

    def discard(self) -> None:
        """Drop the connection at once (no goodbye to the server): a statement failed on it, and
        it may be left mid-statement, where a graceful close could wait on it."""
        self.conn.terminate()


class Row:
    """A row to publish (taken, or handed over by its writer as ``outbox`` makes it), read like
    SQLAlchemy's rows (``row.message_id``); ``headers`` as a dict."""

    __slots__ = (
        "body",
        "correlation_id",
        "exchange",
        "headers",
        "id",
        "message_id",
        "message_type",
        "routing_key",
    )

    def __init__(self, record: Mapping[str, Any] | asyncpg.Record) -> None:
        self.id = int(record["id"])
        self.message_id = record["message_id"]
        self.exchange = record["exchange"]
        self.routing_key = record["routing_key"]
        self.message_type = record["message_type"]
        self.correlation_id = record["correlation_id"]
        self.body = bytes(record["body"])
        headers = record["headers"]
        self.headers = json.loads(headers) if isinstance(headers, str) else dict(headers or {})
