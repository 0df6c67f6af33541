"""Running one execution contract: admit, dedup, check the deadline, revalidate, execute, record.

The order is the guarantee. A contract is admitted only with a valid signature and a supported
kind + version (else it is dead-lettered and nothing — not even an outcome — is written: a forger
must not be able to fail proposals). Then, in one transaction holding the contract's
``executions`` row and the domain rows ``revalidate`` locks, it is concluded: late on the database
clock → ``RevisionRequired(approval_stale)``; the approver no longer a member in a role the
operation accepts → ``RevisionRequired(approver_no_longer_authorized)`` (``authorization``);
arguments that do not parse → ``TerminalFailure``;
facts changed → ``RevisionRequired(reason)``; a local operation's effect → ``Succeeded``. The
outcome row and its outbox message commit with the effect.

An external operation commits its attempt first (``attempting``), calls the provider once outside
any transaction, and records the answer in a second transaction. If the answer is lost (or the
call fails in any way, or a redelivery finds ``attempting``), the attempt is marked unknown and
the reconciler is asked to find out (``NeedsReconciliation``); the provider is never called twice.

That order is ``signoff_runtime.execution`` — the one copy the conformance kit runs operations
through too; this module is the executor's ``Ledger`` for it (the ``executions`` row, the
checks before ``revalidate``, the outbox, and ``unit_of_work`` for every commit).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from typing import Any, TypeVar, cast

import structlog
from pydantic import ValidationError
from signoff_contracts.ids import new_id
from signoff_contracts.operations import AnyOperation, AttemptRef, Directory, EffectUncertain
from signoff_contracts.outcomes import OperationOutcome, TerminalFailure
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import execution, signing, tracing, unit_of_work
from signoff_runtime.consumer import PermanentError
from signoff_runtime.execution import Admitted, External
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.settings import ContractVerifyingSettings
from signoff_runtime.topology import Topology
from signoff_runtime.transient import is_transient
from signoff_runtime.unsafe import DirectPublisher
from signoff_runtime.validation import summary
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_executor import domain, metrics, outbox, repository
from signoff_executor.authorization import unauthorized_approver
from signoff_executor.domain import Attempting, Concluded, Duplicate, Step

log = structlog.get_logger(__name__)
R = TypeVar("R")


class Executor:
    def __init__(
        self,
        *,
        engine: AsyncEngine,
        topology: Topology,
        operations: Operations,
        directory: Directory,
        verifying: ContractVerifyingSettings,
        providers: Providers,
        perform_timeout_s: float,
        no_dedup: bool = False,
        direct: DirectPublisher | None = None,
        skip_authz: bool = False,
    ) -> None:
        self._engine = engine
        self._directory = directory
        self._topology = topology
        self._operations = operations
        self._verifying = verifying
        self._providers = providers
        self._perform_timeout_s = perform_timeout_s
        # negative controls (SIGNOFF_UNSAFE__NO_DEDUP, __PUBLISH_WITHOUT_OUTBOX,
        # __SKIP_EXECUTION_AUTHZ), tests only
        self._no_dedup = no_dedup
        self._skip_authz = skip_authz
        self._direct = direct

    async def handle(self, body: bytes) -> OperationOutcome | None:
        """Run one delivery; return the outcome it stored (``None``: concluded before)."""
        contract = ExecutionContract.model_validate_json(body)
        op = self._admit(contract)
        with structlog.contextvars.bound_contextvars(
            proposal_id=contract.proposal_id,
            contract_id=contract.contract_id,
            kind=contract.operation_kind,
        ):
            started = time.perf_counter()
            outcome = await self._execute(contract, op)
            if outcome is not None:
                metrics.EXECUTION_SECONDS.labels(op.kind, outcome.type).observe(
                    time.perf_counter() - started
                )
                metrics.OUTCOMES.labels(outcome.type).inc()
                log.info("contract.concluded", outcome=outcome.type)
            return outcome

    def _admit(self, contract: ExecutionContract) -> AnyOperation:
        if not signing.verify(contract, self._verifying):
            raise PermanentError("bad_signature", f"contract {contract.contract_id}")
        try:
            return self._operations.get(contract.operation_kind, contract.contract_version)
        except UnknownOperation:
            raise PermanentError(
                "unsupported_version", f"{contract.operation_kind} v{contract.contract_version}"
            ) from None

    async def _execute(
        self, contract: ExecutionContract, op: AnyOperation
    ) -> OperationOutcome | None:
        step = await execution.run(
            op, _ContractLedger(self, contract), perform_timeout_s=self._perform_timeout_s
        )
        return step.outcome if isinstance(step, Concluded) else None

    async def _fail(self, ledger: _ContractLedger, op: AnyOperation, exc: Exception) -> Step:
        """The operation's own code raised: the contract's answer is a ``TerminalFailure``."""
        contract = ledger.contract
        correlation_id = new_id("cor")
        log.error("contract.execution_failed", correlation_id=correlation_id, exc_info=exc)

        async def body(conn: AsyncConnection) -> Step:
            row = await repository.claim(conn, contract)
            if row.status == "attempting":  # an attempt committed after all: its fate is unknown
                assert row.attempt is not None
                return await execution.mark_unknown(cast(External, op), ledger, conn, row.attempt)
            if row.status == "done":
                return Duplicate(row.status)
            return await self._conclude(
                conn, contract, TerminalFailure(correlation_id=correlation_id)
            )

        return await self._transaction(contract, body)

    async def _conclude(
        self,
        conn: AsyncConnection,
        contract: ExecutionContract,
        outcome: OperationOutcome,
        attempt: AttemptRef | None = None,
    ) -> Concluded:
        """Store the outcome and write its messages to the outbox, in the caller's transaction."""
        await outbox.conclude(conn, self._topology, contract, outcome, attempt, direct=self._direct)
        return Concluded(outcome)

    async def _republish(
        self, conn: AsyncConnection, contract: ExecutionContract, row: repository.Execution
    ) -> None:
        """Send a finished contract's messages again, same ids (a lost outcome is healed)."""
        await outbox.republish(conn, self._topology, contract, row)

    async def _transaction(
        self, contract: ExecutionContract, body: Callable[[AsyncConnection], Awaitable[R]]
    ) -> R:
        async def landed(conn: AsyncConnection, step: R) -> bool:
            return domain.landed(step, await repository.read(conn, contract.contract_id))

        if self._direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX
            async with self._direct.after_commit():
                return await unit_of_work.run(self._engine, body, landed)
        return await unit_of_work.run(self._engine, body, landed)


class _ContractLedger:
    """The executor's side of the execution protocol for one contract: its ``executions`` row
    (dedup, the attempt it holds), the checks before ``revalidate``, the outcome and its
    messages in the outbox, and every transaction through ``unit_of_work`` (in-doubt commits)."""

    def __init__(self, executor: Executor, contract: ExecutionContract) -> None:
        self.executor = executor
        self.contract = contract

    async def transaction(self, body: Callable[[AsyncConnection], Awaitable[R]]) -> R:
        return await self.executor._transaction(self.contract, body)

    async def admit(self, conn: AsyncConnection, op: AnyOperation) -> Admitted | Step:
        executor, contract = self.executor, self.contract
        row = await repository.claim(conn, contract)
        tracing.event("contract.claimed")
        if executor._no_dedup:  # SIGNOFF_UNSAFE__NO_DEDUP: whatever the row says, run it again
            row = replace(row, status="started")
        if row.status == "done":
            metrics.DUPLICATES.labels("done").inc()
            await executor._republish(conn, contract, row)
            return Duplicate(row.status)
        if row.status == "attempting":
            # The executor that committed this attempt died before recording its answer (or is
            # still waiting for it): whether the provider applied it is unknown. Never call again.
            metrics.DUPLICATES.labels("attempting").inc()
            assert row.attempt is not None
            return await execution.mark_unknown(cast(External, op), self, conn, row.attempt)
        if row.late:
            return await executor._conclude(conn, contract, domain.stale(contract))
        if not executor._skip_authz and (
            removed := await unauthorized_approver(executor._directory, conn, contract, op)
        ):
            log.warning("contract.approver_no_longer_authorized", approved_by=removed)
            return await executor._conclude(
                conn, contract, domain.no_longer_authorized(contract, removed)
            )
        try:
            arguments = op.parse_arguments(contract.arguments)
        except (ValidationError, ValueError, TypeError) as exc:
            return await executor._conclude(conn, contract, _unparseable(exc))
        return Admitted(arguments, domain.scope_of(contract), domain.context_of(contract))

    async def conclude(
        self, conn: AsyncConnection, outcome: OperationOutcome, attempt: AttemptRef | None
    ) -> Step:
        return await self.executor._conclude(conn, self.contract, outcome, attempt)

    async def conclude_unknown(self, conn: AsyncConnection, attempt: AttemptRef) -> Step:
        outcome = domain.needs_reconciliation(self.contract.proposal_id)
        return await self.executor._conclude(conn, self.contract, outcome, attempt)

    async def attempting(
        self, conn: AsyncConnection, attempt: AttemptRef, arguments: Any
    ) -> Attempting:
        await repository.mark_attempting(conn, self.contract.contract_id, attempt)
        return Attempting(attempt, arguments)

    async def holds(self, conn: AsyncConnection, attempt: AttemptRef) -> Step | None:
        row = await repository.lock(conn, self.contract.contract_id)
        if row is not None and row.status == "attempting" and row.attempt == attempt:
            return None
        # A duplicate delivery declared this attempt unknown while we were calling: the
        # reconciler owns it now and will learn the same answer from the provider.
        log.warning("attempt.concluded_elsewhere", attempt_id=attempt.attempt_id)
        return Duplicate(row.status if row else "missing")

    def provider(self, op: External) -> AbstractAsyncContextManager[Any]:
        return nullcontext(self.executor._providers.for_operation(op))

    def performed(self, op: External, attempt: AttemptRef, error: Exception | None) -> None:
        if error is None:
            metrics.PROVIDER_CALLS.labels(op.kind, "answered").inc()
            return
        metrics.PROVIDER_CALLS.labels(op.kind, "uncertain").inc()
        log.warning("attempt.uncertain", attempt_id=attempt.attempt_id, error=repr(error))

    async def failed(self, op: AnyOperation, exc: Exception) -> Step:
        if is_transient(exc):
            raise exc
        return await self.executor._fail(self, op, exc)

    def record_failed(self, attempt: AttemptRef, exc: Exception) -> None:
        if is_transient(exc):
            raise exc  # the redelivery finds `attempting` and asks the reconciler
        if isinstance(exc, EffectUncertain):  # e.g. the answer came after the attempt's deadline
            log.warning("attempt.answer_not_recorded", attempt_id=attempt.attempt_id, why=str(exc))
            return
        log.error("attempt.record_failed", attempt_id=attempt.attempt_id, exc_info=exc)


def _unparseable(exc: Exception) -> TerminalFailure:
    """Stored arguments that no longer parse: logged in full, shown only as a correlation id."""
    correlation_id = new_id("cor")
    errors = summary(exc) if isinstance(exc, ValidationError) else ""
    log.error(
        "contract.arguments_invalid",
        correlation_id=correlation_id,
        errors=errors,
        error=type(exc).__name__,
    )
    return TerminalFailure(correlation_id=correlation_id)
