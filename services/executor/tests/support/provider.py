"""An in-process card-like provider whose behaviour each test scripts, per idempotency key.

Modes: ``apply`` (apply, answer), ``lose`` (apply, then the answer is lost: ``EffectUncertain``),
``refuse`` (apply nothing, answer refused), ``hang`` (wait until ``release()``, then end the
caller as if its process had been killed mid-call: ``CancelledError``, nothing applied).
Like a Stripe-style provider, a key applies at most once: ``effects`` counts what a key actually
did, ``calls`` every request that reached it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from signoff_contracts.operations import EffectUncertain

Mode = Literal["apply", "lose", "refuse", "hang"]


class FakeProvider:
    def __init__(self, default: Mode = "apply") -> None:
        self.default: Mode = default
        self.script: dict[str, Mode] = {}
        self.calls: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()
        self.applied: dict[str, dict[str, Any]] = {}
        self.opened = 0
        self.closed = 0
        self.entered = asyncio.Event()
        self._release = asyncio.Event()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeProvider]:
        self.opened += 1
        try:
            yield self
        finally:
            self.closed += 1

    def release(self) -> None:
        self._release.set()

    async def charge(self, key: str, amount: int) -> dict[str, Any]:
        self.calls[key] += 1
        self.entered.set()
        mode = self.script.get(key, self.default)
        if mode == "hang":
            await self._release.wait()
            raise asyncio.CancelledError  # the caller "dies" here
        if mode == "refuse":
            return {"status": "refused", "code": "card_declined"}
        if key not in self.applied:
            self.effects[key] += 1
            self.applied[key] = {
                "status": "succeeded",
                "ref": f"ch_{len(self.applied) + 1}",
                "amount": amount,
            }
        if mode == "lose":
            raise EffectUncertain("response lost")
        return self.applied[key]

    async def lookup(self, key: str) -> dict[str, Any] | None:
        return self.applied.get(key)
