"""The loop that asks about due checks until each has an authoritative outcome.

Each pass leases a bounded batch of due checks in one short transaction, then checks them one by
one, each in its own transaction holding the check row: ``op.reconcile`` asks the provider (with
the attempt's own key — it never repeats the effect) and either concludes, in which case the
outcome goes to the outbox with the check marked resolved, or cannot conclude yet, in which case
the check is due again after an exponential, capped back-off. Every check, conclusive or not, is
recorded for the proposal's status page (``ReconciliationChecked``).

A failed check (the provider is down, the operation raised) is rescheduled like an inconclusive
one. Uncertainty is never settled by a clock: a check still inconclusive ``escalate_after_s``
after it opened is *escalated* — it stays open (the proposal stays ``needs_reconciliation``), the
check record says so (``ReconciliationChecked.escalated``: the proposals service audits it and
lists it first as stuck), it counts in ``signoff_reconciler_escalated_total`` — an operator's
alert — and it is asked about every ``escalated_check_every_s`` from then on, until the provider
answers or an operator resolves it (``signoff reconcile ID --resolve``). A commit that fails in
doubt needs no special care: the conditional writes of ``repository`` match nothing if it did
land, and if it did not, the check is due again when its lease runs out.

Every ``scan_interval_s`` the loop also asks each external operation for *stranded* attempts
(pending or unknown well past their lease: an executor died between recording the attempt and
recording its answer, and no ``ReconciliationRequired`` came) and opens a check for each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable

import structlog
from signoff_contracts.operations import ExternalOperation
from signoff_contracts.outcomes import NeedsReconciliation, OperationOutcome
from signoff_runtime.providers import Providers
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.topology import Topology
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_reconciler import metrics, reports, repository
from signoff_reconciler.domain import backoff_s
from signoff_reconciler.repository import Check
from signoff_reconciler.settings import ReconcilerGroup

log = structlog.get_logger(__name__)


class Checker:
    def __init__(
        self,
        *,
        engine: AsyncEngine,
        topology: Topology,
        operations: Operations,
        providers: Providers,
        settings: ReconcilerGroup,
    ) -> None:
        self._engine = engine
        self._topology = topology
        self._operations = operations
        self._providers = providers
        self._settings = settings
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """A check was just recorded: look now rather than at the next poll."""
        self._wake.set()

    async def run(self) -> None:
        next_scan = time.monotonic()
        while True:
            checked = await self.pass_once()
            if time.monotonic() >= next_scan:
                next_scan = time.monotonic() + self._settings.scan_interval_s
                await self._guarded(self.scan_once)
            await self._guarded(self.observe)
            if checked < self._settings.batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._settings.poll_s)
                self._wake.clear()

    async def pass_once(self) -> int:
        """Lease one batch of due checks and check each; return how many were leased."""
        async with unit_of_work(self._engine) as uow:
            due = await repository.lease_due(
                uow.conn, self.owner, self._settings.batch, self._settings.lease_s
            )
        for check in due:
            await self._check(check)
        return len(due)

    async def scan_once(self) -> int:
        """Open a check for every stranded attempt the operations report; how many were new."""
        opened = 0
        for op in self._operations:
            if not isinstance(op, ExternalOperation):
                continue
            async with unit_of_work(self._engine) as uow:
                stranded = await op.stranded_attempts(uow.conn, self._settings.stranded_after_s)
                for attempt in stranded:
                    if await repository.open_stranded(uow.conn, op.kind, op.version, attempt):
                        opened += 1
                        metrics.STRANDED.labels(op.kind).inc()
                        log.warning(
                            "reconciliation.stranded_attempt",
                            attempt_id=attempt.attempt_id,
                            proposal_id=attempt.proposal_id,
                            kind=op.kind,
                        )
        if opened:
            self.wake()
        return opened

    async def observe(self) -> None:
        """Refresh the open-checks gauges (the alert on checks nobody concludes)."""
        async with self._engine.connect() as conn:
            count, oldest, escalated = await repository.open_summary(conn)
        metrics.OPEN_CHECKS.set(count)
        metrics.OLDEST_OPEN_CHECK.set(oldest)
        metrics.ESCALATED_OPEN_CHECKS.set(escalated)

    async def _guarded(self, step: Callable[[], Awaitable[object]]) -> None:
        try:
            await step()
        except Exception as exc:  # a scan or gauge failing must not stop the checks
            log.warning("reconciliation.loop_step_failed", error=repr(exc))

    async def _check(self, check: Check) -> None:
        with structlog.contextvars.bound_contextvars(
            proposal_id=check.proposal_id, attempt_id=check.attempt_id, kind=check.operation_kind
        ):
            try:
                result = await self._ask(check)
            except Exception as exc:
                log.warning("reconciliation.check_failed", error=repr(exc))
                metrics.CHECKS.labels(check.operation_kind, "error").inc()
                await self._inconclusive(check, "error", type(exc).__name__)
                return
            metrics.CHECKS.labels(check.operation_kind, result).inc()

    async def _ask(self, check: Check) -> str:
        try:
            op = self._operations.get(check.operation_kind, check.contract_version)
        except UnknownOperation:
            await self._inconclusive(check, "unsupported", "unsupported_version", at_cap=True)
            return "unsupported"
        assert isinstance(op, ExternalOperation)
        provider = self._providers.for_operation(op)
        async with unit_of_work(self._engine) as uow:
            locked = await repository.lock_leased(uow.conn, check.id, self.owner)
            if locked is None:
                return "lost_lease"
            outcome = await op.reconcile(locked.attempt_id, uow.conn, provider)
            if outcome is not None and not isinstance(outcome, NeedsReconciliation):
                await self._conclude(uow.conn, locked, outcome)
                log.info("reconciliation.resolved", outcome=outcome.type, checks=locked.checks + 1)
                return "resolved"
            await self._reschedule(uow.conn, locked, "pending", None)
        return "pending"

    async def _conclude(
        self, conn: AsyncConnection, check: Check, outcome: OperationOutcome
    ) -> None:
        message_id = await reports.outcome(conn, self._topology, check, outcome)
        await repository.resolve(conn, check.id, self.owner, outcome, message_id)
        await reports.checked(conn, self._topology, check, reports.result_of(outcome))
        metrics.OUTCOMES.labels(outcome.type).inc()
        if message_id is None:
            metrics.WITHHELD.inc()
            log.warning("reconciliation.outcome_withheld", why="contract not known yet")

    async def _inconclusive(
        self, check: Check, result: str, detail: str, *, at_cap: bool = False
    ) -> None:
        """A check that failed (its transaction rolled back): record it and ask again later."""
        async with unit_of_work(self._engine) as uow:
            locked = await repository.lock_leased(uow.conn, check.id, self.owner)
            if locked is None:
                return
            await self._reschedule(uow.conn, locked, result, detail, at_cap=at_cap)

    async def _reschedule(
        self,
        conn: AsyncConnection,
        check: Check,
        result: str,
        detail: str | None,
        *,
        at_cap: bool = False,
    ) -> None:
        """Still no answer: ask again later — escalating, once, past the bound; never failing."""
        escalate = not check.escalated and check.age_s >= self._settings.escalate_after_s
        delay = self._delay(check, at_cap=at_cap, escalated=check.escalated or escalate)
        last: dict[str, object] = {"result": result}
        if detail is not None:
            last["error"] = detail
        if escalate:
            last["escalated"] = True
        next_at = await repository.reschedule(
            conn, check.id, self.owner, delay, last, escalate=escalate
        )
        if escalate:
            detail = f"escalated after {int(check.age_s)}s without an answer" + (
                f" ({detail})" if detail else ""
            )
            metrics.ESCALATED.labels(check.operation_kind).inc()
            log.error(
                "reconciliation.escalated",
                age_s=round(check.age_s),
                checks=check.checks + 1,
                next_check_at=None if next_at is None else next_at.isoformat(),
            )
        await reports.checked(
            conn,
            self._topology,
            check,
            "pending" if result == "pending" else "error",
            detail=detail,
            next_check_at=next_at,
            escalated=escalate,
        )

    def _delay(self, check: Check, *, at_cap: bool = False, escalated: bool = False) -> float:
        """The back-off before the next check: exponential and capped, and once escalated the
        slower ``escalated_check_every_s`` (or the back-off, if that is longer)."""
        delay = (
            self._settings.max_backoff_s
            if at_cap
            else backoff_s(
                check.checks + 1,
                base_s=self._settings.base_backoff_s,
                cap_s=self._settings.max_backoff_s,
            )
        )
        return max(delay, self._settings.escalated_check_every_s) if escalated else delay
