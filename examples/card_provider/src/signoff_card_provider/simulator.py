"""The one live simulator: its clock, ledger and fault plan, and a create run through them.

Routes translate HTTP to and from ``Simulator.create``; the idempotency rules live in the
ledger, the choice of fault in the fault plan; this module orders them: a fault is decided
only for a create the ledger let proceed, ``fail_before`` releases the key, ``delay`` holds
it in flight while it waits, and the refund is applied in a shielded task so a caller that
hangs up mid-delay cannot stop the effect from landing (as with a real provider).
"""

from __future__ import annotations

import asyncio
import random
import string
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog

from signoff_card_provider.clock import OffsetClock
from signoff_card_provider.faults import Fault, FaultConfig, FaultMode, FaultPlan
from signoff_card_provider.ledger import (
    Decision,
    InFlight,
    KeyReused,
    Ledger,
    Proceed,
    Refund,
    RefundParams,
    Replay,
)
from signoff_card_provider.settings import Settings

log = structlog.get_logger(__name__)

_ID_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True, slots=True)
class Created:
    """A new refund; ``drop`` says its response must never reach the caller."""

    refund: Refund
    drop: bool


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Refused before applying anything; the key is released so a retry may proceed."""

    status: int
    code: str
    detail: str


_FAILED_BEFORE = Unavailable(503, "provider_unavailable", "Injected fault: nothing was applied.")
_CANNOT_DROP = Unavailable(
    501, "drop_response_unsupported", "This server cannot drop responses; nothing was applied."
)


Outcome = Created | Replay | KeyReused | InFlight | Unavailable


class Simulator:
    """All state of one simulator process; ``reset`` returns it to how it started."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._ids: random.Random = (
            random.Random(settings.seed)  # noqa: S311 - repeatable ids, not secrets
            if settings.seed is not None
            else random.SystemRandom()
        )
        self._applying: set[asyncio.Task[Refund]] = set()
        self.reset()

    def reset(self) -> None:
        """Forget every refund, key and effect; restore the start-up clock and faults."""
        self.clock = OffsetClock()
        retention = timedelta(seconds=self.settings.retention_seconds)
        self.ledger = Ledger(self.clock.now, retention, self._new_refund_id)
        self.set_faults(self.settings.fault_config())

    def set_faults(self, config: FaultConfig) -> None:
        """Replace the fault plan (rule counts and dice start afresh) and its history."""
        self.faults = FaultPlan(config)
        self.fault_history: list[dict[str, Any]] = []

    async def create(
        self, key: str, params: RefundParams, forced: Fault | None, *, can_drop: bool
    ) -> Outcome:
        """Run one create: the ledger decides, then a fault (``forced`` wins) may strike.

        ``can_drop`` is false when the app is served without ``wire.DroppableH11Protocol``
        (e.g. in-process); a drop fault then refuses up front rather than apply and answer.
        """
        ledger = self.ledger  # a reset mid-delay must not move this request to a new ledger
        decision: Decision = ledger.begin(key, params)
        if not isinstance(decision, Proceed):
            log.info("refund.answered", key=key, decision=type(decision).__name__)
            return decision
        fault = forced or self.faults.decide(params.payment_ref)
        if fault is not None:
            self._record_fault(fault, key, params)
        mode = fault.mode if fault is not None else None
        drop = mode is FaultMode.DROP_RESPONSE
        if mode is FaultMode.FAIL_BEFORE or (drop and not can_drop):
            ledger.abandon(key, params)
            return _FAILED_BEFORE if mode is FaultMode.FAIL_BEFORE else _CANNOT_DROP
        delay_ms = fault.delay_ms if fault is not None and mode is FaultMode.DELAY else 0
        refund = await self._apply(ledger, key, params, delay_ms)
        log.info("refund.created", key=key, refund_id=refund.id, dropped=drop)
        return Created(refund, drop)

    async def _apply(self, ledger: Ledger, key: str, params: RefundParams, delay_ms: int) -> Refund:
        """Wait out any delay, then apply; shielded so a hang-up cannot cancel the effect."""

        async def delayed_complete() -> Refund:
            await asyncio.sleep(delay_ms / 1000)
            return ledger.complete(key, params)

        task = asyncio.create_task(delayed_complete())
        self._applying.add(task)  # keep a strong reference until it lands
        task.add_done_callback(self._applying.discard)
        return await asyncio.shield(task)

    def _record_fault(self, fault: Fault, key: str, params: RefundParams) -> None:
        entry = {
            "mode": fault.mode.value,
            "delay_ms": fault.delay_ms,
            "idempotency_key": key,
            "payment_ref": params.payment_ref,
        }
        self.fault_history.append(entry)
        log.info("fault.injected", **entry)

    def _new_refund_id(self) -> str:
        return "re_" + "".join(self._ids.choice(_ID_ALPHABET) for _ in range(24))
