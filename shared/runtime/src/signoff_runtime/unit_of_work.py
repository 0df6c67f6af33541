"""The unit of work: one connection, one transaction, and what happens once it has committed.

Every service's handler that writes opens one (``async with unit_of_work(engine) as uow``),
does its work on ``uow.conn`` — the effect, its inbox row, its outbox rows — and leaves. The
transaction commits on a clean exit and rolls back on an exception. What must wait for the commit
(counting a metric, or, under ``SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX``, publishing directly) is
registered with ``after_commit`` and runs only once the commit has answered: a rolled-back
transaction counts nothing and publishes nothing.

A connection lost during ``COMMIT`` leaves the result in doubt: the server may have committed
before the connection broke. Retrying blindly could run an effect twice; giving up could report
a failure that did not happen. A caller that can tell passes ``landed``, which asks the database
on a fresh connection whether the transaction did commit (the executor re-reads the contract's
``executions`` row, which commits with everything else):

- it did → carry on as if the commit had answered (the after-commit actions run);
- it did not, or the database cannot be asked → raise the commit's error: ``settle`` requeues
  the delivery, and whoever handles the redelivery reads the row first and finds the truth there.

``run`` is the same for a body whose result says what its commit must have left behind.

``savepoint`` is a part of the transaction that can be undone by itself (a SAVEPOINT): a
consumer that records many messages in one transaction (``signoff_runtime.savepoints``) gives
each its own, so one message's failure takes back its own statements and its own after-commit
actions, and nothing of its neighbours'. ``read_only`` is one that is always undone, with
writing refused inside it (proposals' intake runs an operation's ``resolve`` in one).

Both send their SAVEPOINT statements to the driver directly (``signoff_runtime.hot``: one
simple-protocol round trip each, nothing prepared), not through SQLAlchemy's nested
transaction, which costs about three times the CPU for the same statements (docs/benchmarks.md,
"Session 24"). SQLAlchemy never learns of these savepoints: a nested transaction of its own
begun inside one must end inside it. Each is released before its block's caller goes on.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_runtime import hot, tracing
from signoff_runtime.metrics import COMMITS_IN_DOUBT

log = structlog.get_logger(__name__)
T = TypeVar("T")

AfterCommit = Callable[[], Awaitable[None] | None]
Landed = Callable[[AsyncConnection], Awaitable[bool]]


#: the unit of work the current task is inside, if any (``current``)
_CURRENT: contextvars.ContextVar[UnitOfWork | None] = contextvars.ContextVar(
    "signoff_unit_of_work", default=None
)


def current(conn: AsyncConnection) -> UnitOfWork | None:
    """The unit of work whose transaction ``conn`` is, if the current task is inside one: what
    is written on it commits with it, and ``after_commit`` runs once it did."""
    uow = _CURRENT.get()
    return uow if uow is not None and uow.conn is conn else None


class TransactionLost(Exception):
    """A savepoint could not be rolled back: nothing more can be done in the transaction."""


@dataclass(eq=False)
class UnitOfWork:
    """The transaction's connection, and the actions to run once it has committed."""

    conn: AsyncConnection
    _after: list[AfterCommit] = field(default_factory=list)

    def after_commit(self, action: AfterCommit) -> None:
        """Run ``action`` (a function, or a coroutine function) once the commit answered."""
        self._after.append(action)

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A SAVEPOINT around the block: an exception out of it rolls the transaction back to
        the savepoint — the block's statements and the after-commit actions it registered are
        undone, the transaction goes on — and propagates. Should the rollback itself fail (the
        connection is lost), ``TransactionLost`` propagates instead: the transaction is over."""
        await hot.execute(self.conn, "SAVEPOINT signoff_each")
        mark = len(self._after)
        try:
            yield
        except BaseException:
            del self._after[mark:]
            try:
                await hot.execute(self.conn, _UNDO_EACH)
            except Exception as exc:
                raise TransactionLost(repr(exc)) from exc
            raise
        await hot.execute(self.conn, "RELEASE SAVEPOINT signoff_each")

    async def _committed(self) -> None:
        for action in self._after:
            done = action()
            if inspect.isawaitable(done):
                await done


#: a savepoint's undoing: back to it, then gone (a name reused later makes a new one)
_UNDO = "ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}"
_UNDO_EACH = _UNDO.format("signoff_each")
_UNDO_READ_ONLY = _UNDO.format("signoff_read_only")


@contextlib.asynccontextmanager
async def read_only(conn: AsyncConnection) -> AsyncIterator[None]:
    """The block in a savepoint where the transaction may not write (a write fails with
    ``read_only_sql_transaction``), rolled back when the block ends however it ends, so the
    transaction may write again after it. One round trip each way."""
    await hot.execute(conn, "SAVEPOINT signoff_read_only; SET LOCAL transaction_read_only = on")
    try:
        yield
    finally:
        await hot.execute(conn, _UNDO_READ_ONLY)


@contextlib.asynccontextmanager
async def unit_of_work(
    engine: AsyncEngine, *, landed: Landed | None = None
) -> AsyncIterator[UnitOfWork]:
    """One transaction on one connection; ``landed`` resolves an in-doubt commit."""
    conn = await engine.connect()
    commit_error: Exception | None = None
    try:
        transaction = await conn.begin()
        uow = UnitOfWork(conn)
        token = _CURRENT.set(uow)
        try:
            yield uow
        except BaseException:
            with contextlib.suppress(Exception):
                await transaction.rollback()
            raise
        finally:
            _CURRENT.reset(token)
        try:
            await transaction.commit()
            tracing.event("transaction.committed")  # the timeline's commit moments
        except Exception as exc:
            commit_error = exc
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
    # the broken connection is gone; the answer comes from a fresh one
    if commit_error is not None and not (
        landed is not None and await _landed(engine, landed, commit_error)
    ):
        raise commit_error
    await uow._committed()


async def run(
    engine: AsyncEngine,
    body: Callable[[AsyncConnection], Awaitable[T]],
    landed: Callable[[AsyncConnection, T], Awaitable[bool]],
) -> T:
    """``body`` in a unit of work; an in-doubt commit is resolved by ``landed(conn, result)``."""
    results: list[T] = []

    async def probe(conn: AsyncConnection) -> bool:
        return await landed(conn, results[0])

    async with unit_of_work(engine, landed=probe) as uow:
        results.append(await body(uow.conn))
    return results[0]


async def _landed(engine: AsyncEngine, landed: Landed, commit_error: Exception) -> bool:
    try:
        async with engine.connect() as conn:
            did = await landed(conn)
    except Exception as exc:
        COMMITS_IN_DOUBT.labels(resolution="unknown").inc()
        log.warning("commit.in_doubt_unresolved", error=repr(commit_error), probe=repr(exc))
        return False
    COMMITS_IN_DOUBT.labels(resolution="committed" if did else "rolled_back").inc()
    log.warning("commit.in_doubt", error=repr(commit_error), committed=did)
    return did
