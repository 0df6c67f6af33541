"""Hot statements: fixed SQL run as asyncpg prepared statements inside SQLAlchemy's transaction.

A statement through SQLAlchemy Core costs, before and after its round trip, a cache key for the
construct, bind processing per parameter and a ``Row`` per result row — measured on the claim,
execution and outcome paths, about half of a busy process's CPU (docs/benchmarks.md, "Hot
statements"). The few statements every contract and every claim runs go here instead: a constant
SQL text with positional parameters (``$1``…), prepared once per connection by asyncpg's own
statement cache, and answered as asyncpg ``Record``\\ s. Everything else — schemas, migrations,
cold paths — stays SQLAlchemy.

The statement runs on the very connection, and in the very transaction, of the caller's
``AsyncConnection``. One care: SQLAlchemy's asyncpg adapter sends ``BEGIN`` lazily, with the
first statement *it* runs; a hot statement that came first would run outside any transaction.
``_driver`` therefore starts the adapter's transaction itself when none has begun — the same
call the adapter makes — so a later commit or rollback through SQLAlchemy covers it.

Codecs are the ones SQLAlchemy's dialect installs on connect: a ``jsonb`` parameter is given as
JSON *text* (``json_param``) and comes back decoded; ``timestamptz`` values are aware
``datetime``\\ s both ways; ``bytea`` is ``bytes``. Errors arrive as asyncpg's own exceptions,
which ``transient.is_transient`` judges by their SQLSTATE like SQLAlchemy's wrappers. A
connection found lost under a hot statement is invalidated here, as SQLAlchemy does for its own
statements: else the pool would hand the dead connection out again, to fail every later
transaction that draws it (seen in the database-crash fault scenario).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection

T = TypeVar("T")


#: what a lost connection raises from asyncpg itself (the adapter's own errors: the dialect says)
_LOST = (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError)


def _is_lost(conn: AsyncConnection, exc: Exception, dbapi: Any) -> bool:
    """Whether ``exc`` left the connection unusable: a lost link's own error, or — the dialect's
    own test, given the adapter's connection — its driver connection closed (``BEGIN`` sent to a
    terminated backend may fail as asyncpg's "another operation is in progress", and leave it
    closed all the same)."""
    return isinstance(exc, _LOST) or conn.dialect.is_disconnect(exc, dbapi, None)  # type: ignore[arg-type]  # the adapter raises DBAPI errors typed as Exception


async def _run(conn: AsyncConnection, call: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """``call`` on the driver connection; a lost connection is invalidated before re-raising."""
    try:
        return await call(await _driver(conn))
    except Exception as exc:
        if _is_lost(conn, exc, await _dbapi_of(conn)):
            with contextlib.suppress(Exception):
                await conn.invalidate(exc)
        raise


async def _dbapi_of(conn: AsyncConnection) -> Any:
    """The adapter's connection under ``conn`` (``None`` if it has none any more)."""
    try:
        return (await conn.get_raw_connection()).dbapi_connection
    except Exception:
        return None


async def _driver(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under ``conn``, with SQLAlchemy's transaction begun on it (begun
    here if need be, as SQLAlchemy's ``execute`` begins one)."""
    if not conn.in_transaction():
        await conn.begin()
    raw = await conn.get_raw_connection()
    adapted: Any = raw.dbapi_connection
    if adapted._transaction is None:
        await adapted._start_transaction()  # what the adapter does before its first statement
    driver: asyncpg.Connection = raw.driver_connection
    return driver


async def fetchrow(conn: AsyncConnection, sql: str, *args: Any) -> asyncpg.Record | None:
    """The first row of ``sql`` (prepared, cached per connection) run with ``args``."""
    row: asyncpg.Record | None = await _run(conn, lambda driver: driver.fetchrow(sql, *args))
    return row


async def fetch(conn: AsyncConnection, sql: str, *args: Any) -> list[asyncpg.Record]:
    """Every row of ``sql`` (prepared, cached per connection) run with ``args``."""
    rows: list[asyncpg.Record] = await _run(conn, lambda driver: driver.fetch(sql, *args))
    return rows


async def execute(conn: AsyncConnection, sql: str, *args: Any) -> None:
    """Run ``sql`` (prepared, cached per connection) with ``args``; no rows wanted."""
    await _run(conn, lambda driver: driver.execute(sql, *args))


class Fields:
    """An asyncpg ``Record`` read by attribute (``row.status``), as code written for
    SQLAlchemy's ``Row`` reads it: a statement moved here keeps the code after it unchanged. A
    missing name raises ``AttributeError``, so ``getattr(row, name, default)`` works too."""

    __slots__ = ("_record",)

    def __init__(self, record: asyncpg.Record) -> None:
        self._record = record

    def __getattr__(self, name: str) -> Any:
        try:
            return self._record[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"Fields({dict(self._record.items())!r})"


def json_param(value: Any) -> str | None:
    """A ``jsonb`` parameter as SQLAlchemy's codec on the connection wants it: JSON text."""
    return None if value is None else json.dumps(value, separators=(",", ":"))
