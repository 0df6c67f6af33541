"""The execution protocol: in which transactions an approved contract's operation runs.

One copy, used by the executor (its ``Ledger`` is the contract's ``executor.executions`` row, its
outbox and its in-doubt commits) and by the conformance kit (plain transactions, nothing kept),
so the kit checks an operation against the very order the executor runs it in:

1. one transaction: the caller's own checks (``Ledger.admit``: dedup, deadline, approver), then
   ``revalidate`` — a stale fact concludes ``RevisionRequired(reason)`` — then a local
   operation's ``execute`` (``Succeeded`` commits with the effect), or an external operation's
   ``begin_attempt``, committed *before* the provider is called;
2. external only: ``perform``, once, outside any transaction (bounded by ``perform_timeout_s``).
   Whatever goes wrong there — ``EffectUncertain``, a timeout, a transport error — the effect
   may have happened, so it is never retried. Nor is the call started once the attempt's lease
   (``AttemptRef.lease_s``) has run out, counted on this process's monotonic clock from before
   the first transaction began (so never later than the database's count): past the lease the
   reconciler may conclude "never applied", and a call started then could land after it;
3. a second transaction: ``record`` the answer, or ``mark_unknown`` (``NeedsReconciliation``: the
   reconciler asks the provider by the same key) — each only while the ledger still holds the
   attempt (a duplicate delivery may have declared it unknown meanwhile).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, cast

from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    ExecutionContext,
    ExternalOperation,
    LocalOperation,
    Scope,
)
from signoff_contracts.outcomes import OperationOutcome, RevisionRequired, Succeeded
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_runtime import tracing

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")
External = ExternalOperation[Any, Any, Any, Any, Any]


@dataclass(frozen=True, slots=True)
class Admitted:
    """The caller's checks passed: run the operation on these (parsed) arguments."""

    arguments: Any
    scope: Scope
    ctx: ExecutionContext


@dataclass(frozen=True, slots=True)
class Attempting:
    """The attempt is committed; the provider may now be called, once."""

    attempt: AttemptRef
    arguments: Any
    #: ``time.monotonic()`` before the transaction that recorded the attempt began (``begin``
    #: sets it): the attempt's lease is counted from here
    began: float = field(default=0.0, compare=False)

    def lease_left_s(self) -> float | None:
        """Seconds left to start the provider call (``None``: no lease)."""
        lease = self.attempt.lease_s
        return None if lease is None else lease - (time.monotonic() - self.began)


class LeaseExpired(Exception):
    """The attempt's lease ran out before the provider was called: it was not called."""


class Ledger(Protocol[T_co]):
    """What the caller keeps beside the domain's rows, and how it concludes (``T``: its step)."""

    async def transaction(self, body: Callable[[AsyncConnection], Awaitable[R]]) -> R:
        """Run ``body`` in one transaction and commit it."""
        ...

    async def admit(self, conn: AsyncConnection, op: AnyOperation) -> Admitted | T_co:
        """The caller's checks before ``revalidate`` (or its conclusion without running)."""
        ...

    async def conclude(
        self, conn: AsyncConnection, outcome: OperationOutcome, attempt: AttemptRef | None
    ) -> T_co:
        """Store ``outcome`` in the same transaction as the effect that caused it."""
        ...

    async def conclude_unknown(self, conn: AsyncConnection, attempt: AttemptRef) -> T_co:
        """The attempt is marked unknown: conclude ``NeedsReconciliation``."""
        ...

    async def attempting(
        self, conn: AsyncConnection, attempt: AttemptRef, arguments: Any
    ) -> Attempting:
        """Keep the begun attempt in the same transaction as ``begin_attempt``."""
        ...

    async def holds(self, conn: AsyncConnection, attempt: AttemptRef) -> T_co | None:
        """``None`` while this run still owns ``attempt``; else the step to return instead."""
        ...

    def provider(self, op: External) -> AbstractAsyncContextManager[Any]:
        """The provider client ``perform`` is given."""
        ...

    def performed(self, op: External, attempt: AttemptRef, error: Exception | None) -> None:
        """``perform`` answered (``error`` is ``None``) or may or may not have acted."""
        ...

    async def failed(self, op: AnyOperation, exc: Exception) -> T_co:
        """The first transaction raised: raise again, or conclude."""
        ...

    def record_failed(self, attempt: AttemptRef, exc: Exception) -> None:
        """Recording an answer raised: raise again, or (returning) mark the attempt unknown."""
        ...


async def run(op: AnyOperation, ledger: Ledger[T], *, perform_timeout_s: float | None = None) -> T:
    """The whole protocol for ``op``'s kind of effect; the step the ledger concluded with."""
    step = await begin(op, ledger)
    if not isinstance(step, Attempting):
        return step
    return await perform(cast(External, op), ledger, step, perform_timeout_s)


async def begin(op: AnyOperation, ledger: Ledger[T]) -> T | Attempting:
    """Step 1: admit, revalidate, then execute (local) or begin the attempt (external)."""
    began = time.monotonic()
    try:
        step = await ledger.transaction(lambda conn: _first(op, ledger, conn))
    except Exception as exc:
        return await ledger.failed(op, exc)
    return replace(step, began=began) if isinstance(step, Attempting) else step


async def _first(op: AnyOperation, ledger: Ledger[T], conn: AsyncConnection) -> T | Attempting:
    admitted = await ledger.admit(conn, op)
    if not isinstance(admitted, Admitted):
        return admitted
    arguments, scope, ctx = admitted.arguments, admitted.scope, admitted.ctx
    reason = await op.revalidate(arguments, scope, conn)
    if reason is not None:
        return await ledger.conclude(conn, RevisionRequired(reason=reason), None)
    if isinstance(op, LocalOperation):
        result = await op.execute(arguments, scope, ctx, conn)
        tracing.event("operation.executed")
        return await ledger.conclude(conn, Succeeded(result=result.model_dump(mode="json")), None)
    attempt = await cast(External, op).begin_attempt(arguments, scope, ctx, conn)
    return await ledger.attempting(conn, attempt, arguments)


async def perform(
    op: External, ledger: Ledger[T], step: Attempting, timeout_s: float | None = None
) -> T:
    """Steps 2 and 3: call the provider once; record its answer, or its absence."""
    attempt = step.attempt
    left = step.lease_left_s()
    if left is not None and left <= 0:  # too late to call: the reconciler will find it unmade
        ledger.performed(op, attempt, LeaseExpired(f"lease ran out {-left:.3f} s ago"))
        return await ledger.transaction(lambda conn: _unknown(op, ledger, conn, attempt))
    async with ledger.provider(op) as provider:
        try:
            call = op.perform(attempt, step.arguments, provider)
            answer = await asyncio.wait_for(call, timeout_s)
        except Exception as exc:  # EffectUncertain, timeout, transport: it may have happened
            ledger.performed(op, attempt, exc)
            return await ledger.transaction(lambda conn: _unknown(op, ledger, conn, attempt))
    ledger.performed(op, attempt, None)
    try:
        return await ledger.transaction(lambda conn: _record(op, ledger, conn, attempt, answer))
    except Exception as exc:
        ledger.record_failed(attempt, exc)
        return await ledger.transaction(lambda conn: _unknown(op, ledger, conn, attempt))


async def mark_unknown(
    op: External, ledger: Ledger[T], conn: AsyncConnection, attempt: AttemptRef
) -> T:
    """The attempt's fate is unknown: mark it so, and conclude ``NeedsReconciliation``."""
    await op.mark_unknown(attempt, conn)
    return await ledger.conclude_unknown(conn, attempt)


async def _record(
    op: External, ledger: Ledger[T], conn: AsyncConnection, attempt: AttemptRef, answer: Any
) -> T:
    elsewhere = await ledger.holds(conn, attempt)
    if elsewhere is not None:
        return elsewhere
    outcome = await op.record(attempt, answer, conn)
    return await ledger.conclude(conn, outcome, attempt)


async def _unknown(
    op: External, ledger: Ledger[T], conn: AsyncConnection, attempt: AttemptRef
) -> T:
    elsewhere = await ledger.holds(conn, attempt)
    if elsewhere is not None:
        return elsewhere
    return await mark_unknown(op, ledger, conn, attempt)
