"""The execution protocol never starts a provider call once the attempt's lease has run out.

Past the lease the reconciler may conclude "never applied"; a call started then could land after
that verdict. So a late caller leaves the attempt unknown, uncalled, for the reconciler. The
ledger and operation here are the smallest the protocol needs: what is observed is whether
``perform`` ran and which conclusion the protocol reached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

import pytest
from signoff_contracts.operations import AttemptRef, Scope
from signoff_contracts.outcomes import OperationOutcome
from signoff_runtime import execution
from signoff_runtime.execution import Admitted, Attempting, LeaseExpired

SCOPE = Scope(organization_id="org_1", section="refunds", resource_id="ord_1")


class _Op:
    """An external operation's protocol hooks, recording which ran."""

    def __init__(self, lease_s: float | None) -> None:
        self.lease_s = lease_s
        self.calls: list[str] = []

    async def revalidate(self, arguments: Any, scope: Scope, conn: Any) -> None:
        return None

    async def begin_attempt(self, arguments: Any, scope: Scope, ctx: Any, conn: Any) -> AttemptRef:
        return AttemptRef("att_1", "key-1", lease_s=self.lease_s)

    async def perform(self, attempt: AttemptRef, arguments: Any, provider: Any) -> str:
        self.calls.append("perform")
        return "answer"

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        self.calls.append("record")
        return None  # type: ignore[return-value]  # the ledger below stores nothing

    async def mark_unknown(self, attempt: AttemptRef, conn: Any) -> None:
        self.calls.append("mark_unknown")


class _Ledger:
    """Transactions that just run their body; each conclusion named by what reached it."""

    def __init__(self) -> None:
        self.errors: list[Exception | None] = []

    async def transaction(self, body: Callable[[Any], Awaitable[Any]]) -> Any:
        return await body(None)

    async def admit(self, conn: Any, op: Any) -> Admitted:
        return Admitted(arguments={}, scope=SCOPE, ctx=None)  # type: ignore[arg-type]

    async def conclude(self, conn: Any, outcome: Any, attempt: AttemptRef | None) -> str:
        return "recorded"

    async def conclude_unknown(self, conn: Any, attempt: AttemptRef) -> str:
        return "unknown"

    async def attempting(self, conn: Any, attempt: AttemptRef, arguments: Any) -> Attempting:
        return Attempting(attempt, arguments)

    async def holds(self, conn: Any, attempt: AttemptRef) -> None:
        return None

    def provider(self, op: Any) -> AbstractAsyncContextManager[Any]:
        return nullcontext(None)

    def performed(self, op: Any, attempt: AttemptRef, error: Exception | None) -> None:
        self.errors.append(error)

    async def failed(self, op: Any, exc: Exception) -> str:
        raise exc

    def record_failed(self, attempt: AttemptRef, exc: Exception) -> None:
        raise exc


@pytest.mark.parametrize("lease_s", [60.0, None])
async def test_within_its_lease_or_without_one_the_provider_is_called_once(
    lease_s: float | None,
) -> None:
    op, ledger = _Op(lease_s), _Ledger()

    step = await execution.run(op, ledger)  # type: ignore[arg-type]

    assert (step, op.calls) == ("recorded", ["perform", "record"])
    assert ledger.errors == [None]


async def test_once_the_lease_has_run_out_the_provider_is_not_called() -> None:
    op, ledger = _Op(lease_s=0.0), _Ledger()  # the lease runs out as the attempt commits

    step = await execution.run(op, ledger)  # type: ignore[arg-type]

    assert (step, op.calls) == ("unknown", ["mark_unknown"])
    assert len(ledger.errors) == 1 and isinstance(ledger.errors[0], LeaseExpired)


async def test_the_lease_counts_from_before_the_first_transaction_began() -> None:
    op, ledger = _Op(lease_s=60.0), _Ledger()

    step = await execution.begin(op, ledger)  # type: ignore[arg-type]

    assert isinstance(step, Attempting) and step.began > 0
    left = step.lease_left_s()
    assert left is not None and 0 < left <= 60.0
