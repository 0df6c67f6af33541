"""The loop that asks about due checks until each has an authoritative outcome.

Each pass leases a bounded batch of due checks in one short transaction, then checks them one by
one, each in its own transaction holding the check row: ``op.reconcile`` asks the provider (with
the attempt's own key — it never repeats the effect) and either concludes, in which case the
outcome goes to the outbox with the check marked resolved, or cannot conclude yet, in which case
the check is due again after an exponential, capped back-off.

A failed check (the provider is down, the operation raised) is rescheduled like an inconclusive
one. A commit that fails in doubt needs no special care: the conditional writes of
``repository`` match nothing if it did land, and if it did not, the check is due again when its
lease runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket

import structlog
from signoff_contracts.ids import new_id
from signoff_contracts.operations import ExternalOperation
from signoff_contracts.outcomes import NeedsReconciliation, OperationOutcome
from signoff_contracts.v1 import OutcomeReported
from signoff_runtime.outbox import enqueue
from signoff_runtime.registry import Operations, UnknownOperation
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_reconciler import metrics, repository
from signoff_reconciler.domain import backoff_s
from signoff_reconciler.providers import Providers
from signoff_reconciler.repository import Check
from signoff_reconciler.settings import ReconcilerGroup
from signoff_reconciler.tables import outbox

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
        while True:
            checked = await self.pass_once()
            if checked < self._settings.batch:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._settings.poll_s)
                self._wake.clear()

    async def pass_once(self) -> int:
        """Lease one batch of due checks and check each; return how many were leased."""
        async with self._engine.begin() as conn:
            due = await repository.lease_due(
                conn, self.owner, self._settings.batch, self._settings.lease_s
            )
        for check in due:
            await self._check(check)
        return len(due)

    async def _check(self, check: Check) -> None:
        with structlog.contextvars.bound_contextvars(
            proposal_id=check.proposal_id, attempt_id=check.attempt_id, kind=check.operation_kind
        ):
            try:
                result = await self._ask(check)
            except Exception as exc:
                log.warning("reconciliation.check_failed", error=repr(exc))
                metrics.CHECKS.labels(check.operation_kind, "error").inc()
                await self._reschedule(check, {"result": "error", "error": type(exc).__name__})
                return
            metrics.CHECKS.labels(check.operation_kind, result).inc()

    async def _ask(self, check: Check) -> str:
        try:
            op = self._operations.get(check.operation_kind, check.contract_version)
        except UnknownOperation:
            await self._reschedule(check, {"result": "unsupported_version"}, at_cap=True)
            return "unsupported"
        assert isinstance(op, ExternalOperation)
        provider = self._providers.for_operation(op)
        async with self._engine.begin() as conn:
            if await repository.lock_leased(conn, check.id, self.owner) is None:
                return "lost_lease"
            outcome = await op.reconcile(check.attempt_id, conn, provider)
            if outcome is None or isinstance(outcome, NeedsReconciliation):
                await repository.reschedule(
                    conn, check.id, self.owner, self._delay(check), {"result": "pending"}
                )
                return "pending"
            await self._report(conn, check, outcome)
        metrics.OUTCOMES.labels(outcome.type).inc()
        log.info("reconciliation.resolved", outcome=outcome.type, checks=check.checks + 1)
        return "resolved"

    async def _report(self, conn: AsyncConnection, check: Check, outcome: OperationOutcome) -> None:
        message = OutcomeReported(
            message_id=new_id("msg"),
            source="reconciler",
            correlation_id=check.proposal_id,
            causation_id=check.required_message_id,
            proposal_id=check.proposal_id,
            contract_id=check.contract_id,
            operation_kind=check.operation_kind,
            outcome=outcome,
            reported_by="reconciler",
        )
        await repository.resolve(conn, check.id, self.owner, outcome, message.message_id)
        await enqueue(
            conn,
            outbox,
            message,
            exchange=self._topology.name("outcomes"),
            routing_key=ROUTING_KEYS["proposals.outcomes"],
        )

    async def _reschedule(
        self, check: Check, result: dict[str, str], *, at_cap: bool = False
    ) -> None:
        delay = self._settings.max_backoff_s if at_cap else self._delay(check)
        async with self._engine.begin() as conn:
            await repository.reschedule(conn, check.id, self.owner, delay, result)

    def _delay(self, check: Check) -> float:
        return backoff_s(
            check.checks + 1,
            base_s=self._settings.base_backoff_s,
            cap_s=self._settings.max_backoff_s,
        )
