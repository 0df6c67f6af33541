"""The simulator's memory: refunds, idempotency records, keys in flight, and the effects.

Pure, synchronous logic with the clock and ids passed in, so the Stripe-like rules are unit
tested without a server. A create goes through ``begin`` (which decides: proceed, replay,
refuse as reused, refuse as in flight) and then ``complete`` (apply the one effect) or
``abandon`` (apply nothing). The effect list is append-only and never expires: it is what
tests count to see a duplicate refund, which is the harm idempotency exists to prevent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt


class RefundParams(BaseModel):
    """What a create asks for; equal params are what make a same-key request a replay."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    payment_ref: str = Field(min_length=1, max_length=200, description="The charge refunded.")
    amount_cents: StrictInt = Field(gt=0, description="Amount in the currency's minor unit.")
    currency: str = Field(pattern=r"^[a-z]{3}$", description="ISO 4217 code, lowercase.")


class Refund(BaseModel):
    """A refund as the provider reports it; the key stays on it as metadata forever."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: Literal["succeeded"] = "succeeded"
    payment_ref: str
    amount_cents: int
    currency: str
    idempotency_key: str
    created_at: AwareDatetime


class Effect(BaseModel):
    """Money actually moved: one row per refund ever applied."""

    model_config = ConfigDict(frozen=True)

    refund_id: str
    idempotency_key: str
    payment_ref: str
    amount_cents: int
    currency: str
    applied_at: AwareDatetime


@dataclass(frozen=True, slots=True)
class Proceed:
    """New within the window: the key is now in flight; ``complete`` or ``abandon`` it."""


@dataclass(frozen=True, slots=True)
class Replay:
    """Seen with the same params within the window: answer with the first refund."""

    refund: Refund


@dataclass(frozen=True, slots=True)
class KeyReused:
    """Seen with different params within the window: refuse (422)."""

    refund: Refund


@dataclass(frozen=True, slots=True)
class InFlight:
    """Another request with this key is still being processed: refuse (409), retry later."""


Decision = Proceed | Replay | KeyReused | InFlight


class LedgerError(RuntimeError):
    """A caller broke the begin → complete/abandon protocol (a simulator bug)."""


@dataclass(frozen=True, slots=True)
class _KeyRecord:
    params: RefundParams
    refund: Refund
    stored_at: datetime


class Ledger:
    """All provider state, behind the idempotency rules; one instance per reset."""

    def __init__(
        self, clock: Callable[[], datetime], retention: timedelta, new_id: Callable[[], str]
    ) -> None:
        self._clock = clock
        self._retention = retention
        self._new_id = new_id
        self._refunds: dict[str, Refund] = {}
        self._keys: dict[str, _KeyRecord] = {}
        self._in_flight: dict[str, RefundParams] = {}
        self._effects: list[Effect] = []
        self._requests: Counter[str] = Counter(create=0, lookup=0, replay=0)

    def begin(self, key: str, params: RefundParams) -> Decision:
        """Decide what a create with ``key`` does; only ``Proceed`` claims the key."""
        if key in self._in_flight:
            self._requests["create"] += 1
            return InFlight()
        remembered = self._remembered(key)
        if remembered is not None and remembered.params == params:
            self._requests["replay"] += 1
            return Replay(remembered.refund)
        self._requests["create"] += 1
        if remembered is not None:
            return KeyReused(remembered.refund)
        self._in_flight[key] = params
        return Proceed()

    def complete(self, key: str, params: RefundParams) -> Refund:
        """Apply the one effect of a proceeding create and remember the key."""
        self._release(key, params)
        now = self._clock()
        refund = Refund(
            id=self._new_id(), created_at=now, idempotency_key=key, **params.model_dump()
        )
        self._refunds[refund.id] = refund
        self._keys[key] = _KeyRecord(params, refund, now)
        self._effects.append(
            Effect(refund_id=refund.id, applied_at=now, idempotency_key=key, **params.model_dump())
        )
        return refund

    def abandon(self, key: str, params: RefundParams) -> None:
        """Release a proceeding create that applied nothing; a retry may proceed."""
        self._release(key, params)

    def get(self, refund_id: str) -> Refund | None:
        """One refund by id (counted as a lookup)."""
        self._requests["lookup"] += 1
        return self._refunds.get(refund_id)

    def find(self, *, idempotency_key: str | None, payment_ref: str | None) -> list[Refund]:
        """Refunds matching every filter given, oldest first; keys never expire here."""
        self._requests["lookup"] += 1
        return [
            refund
            for refund in self._refunds.values()
            if idempotency_key in (None, refund.idempotency_key)
            and payment_ref in (None, refund.payment_ref)
        ]

    @property
    def effects(self) -> list[Effect]:
        """Every effect ever applied, in order."""
        return list(self._effects)

    def effects_per_key(self) -> dict[str, int]:
        """How many effects each key caused; more than one is a duplicate refund."""
        return dict(Counter(effect.idempotency_key for effect in self._effects))

    def request_counts(self) -> dict[str, int]:
        """``create`` (every create not answered as a replay), ``replay``, ``lookup``."""
        return dict(self._requests)

    def in_flight(self) -> list[str]:
        """Keys whose create is still being processed."""
        return sorted(self._in_flight)

    def _remembered(self, key: str) -> _KeyRecord | None:
        record = self._keys.get(key)
        if record is not None and self._clock() >= record.stored_at + self._retention:
            del self._keys[key]  # past the window: the key means nothing any more
            return None
        return record

    def _release(self, key: str, params: RefundParams) -> None:
        if self._in_flight.get(key) != params:
            raise LedgerError(f"idempotency key {key!r} is not in flight with these params")
        del self._in_flight[key]
