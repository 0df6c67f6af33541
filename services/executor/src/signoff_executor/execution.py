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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, cast

import structlog
from pydantic import ValidationError
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    AnyOperation,
    AttemptRef,
    Directory,
    ExternalOperation,
    LocalOperation,
)
from signoff_contracts.outcomes import (
    OperationOutcome,
    RevisionRequired,
    Succeeded,
    TerminalFailure,
)
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import signing
from signoff_runtime.consumer import PermanentError
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.settings import ContractVerifyingSettings
from signoff_runtime.topology import Topology
from signoff_runtime.unsafe import DirectPublisher
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_executor import domain, metrics, outbox, repository, unit_of_work
from signoff_executor.authorization import approver_still_authorized
from signoff_executor.domain import Attempting, Concluded, Duplicate, Step
from signoff_executor.errors import is_transient

log = structlog.get_logger(__name__)
External = ExternalOperation[Any, Any, Any, Any, Any]


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
        try:
            step = await self._transaction(contract, lambda conn: self._first(conn, contract, op))
        except Exception as exc:
            if is_transient(exc):
                raise
            return await self._fail(contract, op, exc)
        if isinstance(step, Attempting):
            return await self._attempt(contract, cast(External, op), step)
        return step.outcome if isinstance(step, Concluded) else None

    async def _first(
        self, conn: AsyncConnection, contract: ExecutionContract, op: AnyOperation
    ) -> Step:
        row = await repository.claim(conn, contract)
        if self._no_dedup:  # SIGNOFF_UNSAFE__NO_DEDUP: whatever the row says, run it again
            row = replace(row, status="started")
        if row.status == "done":
            metrics.DUPLICATES.labels("done").inc()
            await self._republish(conn, contract, row)
            return Duplicate(row.status)
        if row.status == "attempting":
            # The executor that committed this attempt died before recording its answer (or is
            # still waiting for it): whether the provider applied it is unknown. Never call again.
            metrics.DUPLICATES.labels("attempting").inc()
            assert row.attempt is not None
            return await self._unknown_in(conn, contract, cast(External, op), row.attempt)
        if row.late:
            return await self._conclude(conn, contract, domain.stale(contract))
        if not self._skip_authz and not await approver_still_authorized(
            self._directory, conn, contract, op
        ):
            log.warning("contract.approver_no_longer_authorized", approved_by=contract.approved_by)
            return await self._conclude(conn, contract, domain.no_longer_authorized(contract))
        try:
            arguments = op.parse_arguments(contract.arguments)
        except (ValidationError, ValueError, TypeError) as exc:
            return await self._conclude(conn, contract, _unparseable(exc))
        scope, ctx = domain.scope_of(contract), domain.context_of(contract)
        reason = await op.revalidate(arguments, scope, conn)
        if reason is not None:
            return await self._conclude(conn, contract, RevisionRequired(reason=reason))
        if isinstance(op, LocalOperation):
            result = await op.execute(arguments, scope, ctx, conn)
            return await self._conclude(
                conn, contract, Succeeded(result=result.model_dump(mode="json"))
            )
        attempt = await cast(External, op).begin_attempt(arguments, scope, ctx, conn)
        await repository.mark_attempting(conn, contract.contract_id, attempt)
        return Attempting(attempt, arguments)

    async def _attempt(
        self, contract: ExecutionContract, op: External, step: Attempting
    ) -> OperationOutcome | None:
        """Call the provider once (the attempt is committed); record its answer or its absence."""
        provider = self._providers.for_operation(op)
        try:
            answer = await asyncio.wait_for(
                op.perform(step.attempt, step.arguments, provider), self._perform_timeout_s
            )
        except Exception as exc:  # EffectUncertain, timeout, transport: it may have happened
            metrics.PROVIDER_CALLS.labels(op.kind, "uncertain").inc()
            log.warning("attempt.uncertain", attempt_id=step.attempt.attempt_id, error=repr(exc))
            return await self._conclude_unknown(contract, op, step.attempt)
        metrics.PROVIDER_CALLS.labels(op.kind, "answered").inc()
        try:
            done = await self._transaction(
                contract, lambda conn: self._record(conn, contract, op, step.attempt, answer)
            )
        except Exception as exc:
            if is_transient(exc):
                raise  # the redelivery finds `attempting` and asks the reconciler
            log.error("attempt.record_failed", attempt_id=step.attempt.attempt_id, exc_info=exc)
            return await self._conclude_unknown(contract, op, step.attempt)
        return done.outcome if isinstance(done, Concluded) else None

    async def _record(
        self,
        conn: AsyncConnection,
        contract: ExecutionContract,
        op: External,
        attempt: AttemptRef,
        answer: Any,
    ) -> Step:
        row = await repository.lock(conn, contract.contract_id)
        if row is None or row.status != "attempting" or row.attempt != attempt:
            # A duplicate delivery declared this attempt unknown while we were calling: the
            # reconciler owns it now and will learn the same answer from the provider.
            log.warning("attempt.concluded_elsewhere", attempt_id=attempt.attempt_id)
            return Duplicate(row.status if row else "missing")
        outcome = await op.record(attempt, answer, conn)
        return await self._conclude(conn, contract, outcome, attempt)

    async def _conclude_unknown(
        self, contract: ExecutionContract, op: External, attempt: AttemptRef
    ) -> OperationOutcome | None:
        async def body(conn: AsyncConnection) -> Step:
            row = await repository.lock(conn, contract.contract_id)
            if row is None or row.status != "attempting" or row.attempt != attempt:
                return Duplicate(row.status if row else "missing")
            return await self._unknown_in(conn, contract, op, attempt)

        step = await self._transaction(contract, body)
        return step.outcome if isinstance(step, Concluded) else None

    async def _unknown_in(
        self, conn: AsyncConnection, contract: ExecutionContract, op: External, attempt: AttemptRef
    ) -> Concluded:
        await op.mark_unknown(attempt, conn)
        return await self._conclude(
            conn, contract, domain.needs_reconciliation(contract.proposal_id), attempt
        )

    async def _fail(
        self, contract: ExecutionContract, op: AnyOperation, exc: Exception
    ) -> OperationOutcome | None:
        """The operation's own code raised: the contract's answer is a ``TerminalFailure``."""
        correlation_id = new_id("cor")
        log.error("contract.execution_failed", correlation_id=correlation_id, exc_info=exc)

        async def body(conn: AsyncConnection) -> Step:
            row = await repository.claim(conn, contract)
            if row.status == "attempting":  # an attempt committed after all: its fate is unknown
                assert row.attempt is not None
                return await self._unknown_in(conn, contract, cast(External, op), row.attempt)
            if row.status == "done":
                return Duplicate(row.status)
            return await self._conclude(
                conn, contract, TerminalFailure(correlation_id=correlation_id)
            )

        step = await self._transaction(contract, body)
        return step.outcome if isinstance(step, Concluded) else None

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
        self, contract: ExecutionContract, body: Callable[[AsyncConnection], Awaitable[Step]]
    ) -> Step:
        async def landed(conn: AsyncConnection, step: Step) -> bool:
            return step.landed(await repository.read(conn, contract.contract_id))

        if self._direct is not None:  # SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX
            async with self._direct.after_commit():
                return await unit_of_work.run(self._engine, body, landed)
        return await unit_of_work.run(self._engine, body, landed)


def _unparseable(exc: Exception) -> TerminalFailure:
    """Stored arguments that no longer parse: logged in full, shown only as a correlation id."""
    correlation_id = new_id("cor")
    errors = domain.validation_summary(exc) if isinstance(exc, ValidationError) else []
    log.error(
        "contract.arguments_invalid",
        correlation_id=correlation_id,
        errors=errors,
        error=type(exc).__name__,
    )
    return TerminalFailure(correlation_id=correlation_id)
