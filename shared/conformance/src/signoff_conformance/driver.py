"""The execute paths, driven the way the agent and the executor drive them.

The kit's checks — and an adopter's own tests — run an operation through these functions rather
than calling its parts ad hoc, so every check sees the same transaction boundaries the services
use: ``resolve`` in a read-only transaction, ``revalidate`` + ``execute`` in one, and for external
effects the attempt committed before the provider is called and the answer recorded after.
Arguments always cross a JSON boundary first, as stored contracts do.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    EffectUncertain,
    ExecutionContext,
    ExternalOperation,
    LocalOperation,
    Resolved,
)
from signoff_contracts.outcomes import OperationOutcome, RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from signoff_conformance.case import ConformanceCase

UNIQUE_VIOLATION = "23505"


class _Refused(Exception):
    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.code)
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class Run:
    """What one pass through the execute path came to.

    ``executed``   the effect ran (``result`` is the operation's ``Result`` for a local one,
                   ``outcome`` what ``record`` returned or the executor would report);
    ``refused``    ``revalidate`` returned ``reason``, or the store refused a duplicate
                   (``refused_by="unique_violation"``) — the transaction rolled back;
    ``uncertain``  ``perform`` raised ``EffectUncertain`` and ``mark_unknown`` ran.
    """

    status: Literal["executed", "refused", "uncertain"]
    result: BaseModel | None = None
    outcome: OperationOutcome | None = None
    reason: Reason | None = None
    refused_by: Literal["revalidation", "unique_violation"] | None = None
    attempt: AttemptRef | None = None
    provider_calls: int = 0


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


async def run_local(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> Run:
    """``revalidate`` then ``execute`` in one transaction, committed together."""
    assert isinstance(op, LocalOperation), f"{op.kind} is not a LocalOperation"
    args = stored(op, arguments)
    try:
        async with case.engine.begin() as conn:
            reason = await op.revalidate(args, case.scope, conn)
            if reason is not None:
                raise _Refused(reason)
            result = await op.execute(args, case.scope, ctx, conn)
    except _Refused as refused:
        return _refusal(refused.reason)
    except IntegrityError as exc:
        if not is_unique_violation(exc):
            raise
        return Run(status="refused", refused_by="unique_violation")
    outcome = Succeeded(result=result.model_dump(mode="json"))
    return Run(status="executed", result=result, outcome=outcome)


#: called from inside ``perform`` on each provider call, with the attempt being performed
ProviderCallHook = Callable[[AttemptRef], Awaitable[None]]


async def begin(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> AttemptRef | Run:
    """Phase 1 of the attempt protocol: ``revalidate`` + ``begin_attempt``, committed."""
    assert isinstance(op, ExternalOperation), f"{op.kind} is not an ExternalOperation"
    args = stored(op, arguments)
    try:
        async with case.engine.begin() as conn:
            reason = await op.revalidate(args, case.scope, conn)
            if reason is not None:
                raise _Refused(reason)
            attempt = await op.begin_attempt(args, case.scope, ctx, conn)
    except _Refused as refused:
        return _refusal(refused.reason)
    except IntegrityError as exc:
        if not is_unique_violation(exc):
            raise
        return Run(status="refused", refused_by="unique_violation")
    return attempt


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
    begun = await begin(op, case, ctx, arguments)
    if isinstance(begun, Run):
        return begun
    attempt, args = begun, stored(op, arguments)
    spy = ProviderSpy(attempt, on_provider_call)
    async with open_provider(op, case) as provider:
        try:
            answer = await op.perform(attempt, args, spy.wrap(provider))
        except EffectUncertain:
            async with case.engine.begin() as conn:
                await op.mark_unknown(attempt, conn)
            return Run(status="uncertain", attempt=attempt, provider_calls=spy.calls)
    async with case.engine.begin() as conn:
        outcome = await op.record(attempt, answer, conn)
    return Run(status="executed", outcome=outcome, attempt=attempt, provider_calls=spy.calls)


async def run_execution(
    op: AnyOperation, case: ConformanceCase, ctx: ExecutionContext, arguments: BaseModel
) -> Run:
    """The path the executor takes for ``op``'s kind of effect."""
    if isinstance(op, ExternalOperation):
        return await run_external(op, case, ctx, arguments)
    return await run_local(op, case, ctx, arguments)


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
