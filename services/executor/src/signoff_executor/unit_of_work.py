"""One transaction, and the truth about it when its COMMIT fails.

A connection lost during ``COMMIT`` leaves the result in doubt: the server may have committed
before the connection broke. Retrying the transaction blindly could run an effect twice (or call
a provider after an attempt that did commit); giving up could report a failure that did not
happen. So ``run`` separates the body from the commit, and when the commit raises it asks the
database on a fresh connection whether the transaction landed (``landed`` re-reads the contract's
``executions`` row, which commits with everything else):

- it did → carry on as if the commit had answered;
- it did not → raise the commit's error: ``settle`` requeues the delivery and the next one starts
  from the row again (nothing was written, so nothing is repeated);
- the database cannot be asked → raise too; whoever handles the redelivery reads the row first
  (``repository.claim``) and finds the truth there — ``attempting`` is never called again.

This is the only place the executor commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_executor import metrics

log = structlog.get_logger(__name__)
T = TypeVar("T")


async def run(
    engine: AsyncEngine,
    body: Callable[[AsyncConnection], Awaitable[T]],
    landed: Callable[[AsyncConnection, T], Awaitable[bool]],
) -> T:
    """Run ``body`` in one transaction and commit; resolve an in-doubt commit with ``landed``."""
    conn = await engine.connect()
    try:
        transaction = await conn.begin()
        try:
            result = await body(conn)
        except BaseException:
            with contextlib.suppress(Exception):
                await transaction.rollback()
            raise
        try:
            await transaction.commit()
            return result
        except Exception as exc:
            commit_error = exc
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
    # The broken connection is gone; the answer comes from a fresh one.
    if await _landed(engine, landed, result, commit_error):
        return result
    raise commit_error


async def _landed(
    engine: AsyncEngine,
    landed: Callable[[AsyncConnection, T], Awaitable[bool]],
    result: T,
    commit_error: Exception,
) -> bool:
    try:
        async with engine.connect() as conn:
            did = await landed(conn, result)
    except Exception as exc:
        metrics.COMMITS_IN_DOUBT.labels(resolution="unknown").inc()
        log.warning("commit.in_doubt_unresolved", error=repr(commit_error), probe=repr(exc))
        return False
    metrics.COMMITS_IN_DOUBT.labels(resolution="committed" if did else "rolled_back").inc()
    log.warning("commit.in_doubt", error=repr(commit_error), committed=did)
    return did
