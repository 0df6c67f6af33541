"""The execute paths, driven the way the proposals service and the executor drive them.

The kit's checks — and an adopter's own tests — run an operation through these functions rather
than calling its parts ad hoc, so every check sees the same transaction boundaries the services
use: ``resolve`` in a read-only transaction, and execution through the executor's own protocol
(``signoff_runtime.execution``: ``revalidate`` + ``execute`` in one transaction; for external
effects the attempt committed before the provider is called and the answer recorded after),
with plain transactions where the executor keeps its ``executions`` row.
Arguments always cross a JSON boundary first, as stored contracts do.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    ExecutionContext,
    ExternalOperation,
    LocalOperation,
    Resolved,
)
from signoff_contracts.outcomes import OperationOutcome, RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from signoff_runtime import execution
from signoff_runtime.execution import Admitted, Attempting, External
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_conformance.case import ConformanceCase

UNIQUE_VIOLATION = "23505"
R = TypeVar("R")


@dataclass(frozen=True, kw_only=True)
class Run:
    """What one pass through the execute path came to.

    ``executed``   the effect ran (``result`` is the operation's ``Result`` for a local one,
                   ``outcome`` what ``record`` returned or the executor would report);
    ``refused``    ``revalidate`` returned ``reason``, or the store refused a duplicate
                   (``refused_by="unique_violation"``) — the transaction rolled back;
    ``uncertain``  ``perform`` raised (``EffectUncertain``, or anything else: ``error``) and
                   ``mark_unknown`` ran — as in the executor, a failed call is never retried.
    """

    status: Literal["executed", "refused", "uncertain"]
    result: BaseModel | None = None
    outcome: OperationOutcome | None = None
    reason: Reason | None = None
    refused_by: Literal["revalidation", "unique_violation"] | None = None
    attempt: AttemptRef | None = None
    provider_calls: int = 0
    error: Exception | None = None


def new_context(case: ConformanceCase, proposal_id: str | None = None) -> ExecutionContext:
    """An approved contract's facts, as the executor passes them (same ids → same dedup key)."""
    return ExecutionContext(
        proposal_id=proposal_id or new_id("prp"),
        contract_id=new_id("ctr"),
        approved_by=case.manager.user_id,
        approved_at=datetime.now(UTC),
    )


async def resolve_request(
    op: AnyOperation, case: ConformanceCase, request: dict[str, Any]
) -> Resolved[Any, Any]:
    """``parse_request`` + ``resolve`` in a READ ONLY transaction: resolving stores nothing."""
    parsed = op.parse_request(request)
    async with case.engine.connect() as conn, conn.begin():
        await conn.execute(text("SET TRANSACTION READ ONLY"))
        return await op.resolve(parsed, case.scope, conn)


def stored(op: AnyOperation, arguments: BaseModel) -> Any:
    """``arguments`` as the executor gets them: through JSON, parsed by the operation."""
    return op.parse_arguments(json.loads(arguments.model_dump_json()))


def is_unique_violation(exc: BaseException) -> bool:
    """A duplicate the store refused (PostgreSQL 23505) — a dedup key doing its job."""
    if not isinstance(exc, IntegrityError):
        return False
    codes = {getattr(exc.orig, name, None) for name in ("sqlstate", "pgcode")}
    return UNIQUE_VIOLATION in codes


#: called from inside ``perform`` on each provider call, with the attempt being performed
ProviderCallHook = Callable[[AttemptRef], Awaitable[None]]


class _KitLedger:
    """The kit's side of ``signoff_runtime.execution``: plain transactions on the case's
    engine, nothing kept beside the domain's own rows, every step reported as a ``Run``."""

    def __init__(
        self,
        op: AnyOperation,
        case: ConformanceCase,
        ctx: ExecutionContext,
        arguments: BaseModel,
        on_provider_call: ProviderCallHook | None = None,
    ) -> None:
        self.op, self.case, self.ctx, self.arguments = op, case, ctx, arguments
        self.spy: ProviderSpy | None = None
        self.on_provider_call = on_provider_call
        self.error: Exception | None = None

    async def transaction(self, body: Callable[[AsyncConnection], Awaitable[R]]) -> R:
        async with self.case.engine.begin() as conn:
            return await body(conn)

    async def admit(self, conn: AsyncConnection, op: AnyOperation) -> Admitted | Run:
        return Admitted(stored(op, self.arguments), self.case.scope, self.ctx)

    async def conclude(
        self, conn: AsyncConnection, outcome: OperationOutcome, attempt: AttemptRef | None
    ) -> Run:
        if attempt is None and isinstance(outcome, RevisionRequired):
            return _refusal(outcome.reason)
        result = None
        if attempt is None and isinstance(outcome, Succeeded):
            result = self.op.parse_result(outcome.result)
        return Run(
            status="executed",
            result=result,
            outcome=outcome,
            attempt=attempt,
            provider_calls=self.calls,
        )

    async def conclude_unknown(self, conn: AsyncConnection, attempt: AttemptRef) -> Run:
        return Run(status="uncertain", attempt=attempt, provider_calls=self.calls, error=self.error)

    async def attempting(
        self, conn: AsyncConnection, attempt: AttemptRef, arguments: Any
    ) -> Attempting:
        return Attempting(attempt, arguments)

    async def holds(self, conn: AsyncConnection, attempt: AttemptRef) -> Run | None:
        return None

    def provider(self, op: External) -> AbstractAsyncContextManager[Any]:
        return self._spied(op)

    @asynccontextmanager
    async def _spied(self, op: External) -> AsyncIterator[Any]:
        async with open_provider(op, self.case) as provider:
            yield provider if self.spy is None else self.spy.wrap(provider)

    def performed(self, op: External, attempt: AttemptRef, error: Exception | None) -> None:
        self.error = error

    async def failed(self, op: AnyOperation, exc: Exception) -> Run:
        if is_unique_violation(exc):
            return Run(status="refused", refused_by="unique_violation")
        raise exc

    def record_failed(self, attempt: AttemptRef, exc: Exception) -> None:
        raise exc

    @property
    def calls(self) -> int:
        return self.spy.calls if self.spy is not None else 0


async def _run(
    op: AnyOperation,
    case: ConformanceCase,
    ctx: ExecutionContext,
    arguments: BaseModel,
    on_provider_call: ProviderCallHook | None = None,
) -> Run:
    ledger = _KitLedger(op, case, ctx, arguments, on_provider_call)
    step = await execution.begin(op, ledger)
    if not isinstance(step, Attempting):
        return step
    assert isinstance(op, ExternalOperation)
    ledger.spy = ProviderSpy(step.attempt, on_provider_call)
    return await execution.perform(op, ledger, step)


async def run_local(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> Run:
    """``revalidate`` then ``execute`` in one transaction, committed together."""
    assert isinstance(op, LocalOperation), f"{op.kind} is not a LocalOperation"
    return await _run(op, case, ctx, arguments)


async def begin(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> AttemptRef | Run:
    """Phase 1 of the attempt protocol: ``revalidate`` + ``begin_attempt``, committed."""
    assert isinstance(op, ExternalOperation), f"{op.kind} is not an ExternalOperation"
    step = await execution.begin(op, _KitLedger(op, case, ctx, arguments))
    return step.attempt if isinstance(step, Attempting) else step


async def run_external(
    op: AnyOperation,
    case: ConformanceCase,
    ctx: ExecutionContext,
    arguments: BaseModel,
    *,
    on_provider_call: ProviderCallHook | None = None,
) -> Run:
    """The attempt protocol: begin + commit, ``perform`` once, then ``record`` or
    ``mark_unknown`` in a second transaction."""
    assert isinstance(op, ExternalOperation), f"{op.kind} is not an ExternalOperation"
    return await _run(op, case, ctx, arguments, on_provider_call)


async def run_execution(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> Run:
    """The path the executor takes for ``op``'s kind of effect."""
    return await _run(op, case, ctx, arguments)


def open_provider(op: AnyOperation, case: ConformanceCase) -> AbstractAsyncContextManager[Any]:
    if case.provider_factory is not None:
        return case.provider_factory()
    assert isinstance(op, ExternalOperation), f"{op.kind} has no provider"
    return op.open_provider()


class ProviderSpy:
    """Wraps a provider client so each coroutine method call first runs the hook.

    Transparent otherwise: attributes are forwarded, so ``perform`` cannot tell.
    """

    def __init__(self, attempt: AttemptRef, hook: ProviderCallHook | None) -> None:
        self.attempt = attempt
        self.hook = hook
        self.calls = 0

    def wrap(self, provider: Any) -> Any:
        return provider if self.hook is None else _Spied(provider, self)


class _Spied:
    def __init__(self, inner: Any, spy: ProviderSpy) -> None:
        self._inner = inner
        self._spy = spy

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr
        spy = self._spy

        async def called(*args: Any, **kwargs: Any) -> Any:
            spy.calls += 1
            assert spy.hook is not None
            await spy.hook(spy.attempt)
            return await attr(*args, **kwargs)

        return called


def _refusal(reason: Any) -> Run:
    if not isinstance(reason, Reason):
        raise AssertionError(f"revalidate must return a Reason or None, not {reason!r}")
    return Run(
        status="refused",
        reason=reason,
        refused_by="revalidation",
        outcome=RevisionRequired(reason=reason),
    )


async def reconcile(op: AnyOperation, case: ConformanceCase, attempt_id: str) -> Any:
    """One ``reconcile`` pass, as the reconciler runs it: its own transaction and provider."""
    assert isinstance(op, ExternalOperation), f"{op.kind} is not an ExternalOperation"
    async with open_provider(op, case) as provider, case.engine.begin() as conn:
        return await op.reconcile(attempt_id, conn, provider)
