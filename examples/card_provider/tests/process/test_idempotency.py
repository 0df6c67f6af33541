"""Stripe-like idempotency against the simulator running as its own process."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from signoff_card_provider.client import CardProviderClient, KeyInFlight, ProviderRejected
from signoff_card_provider.testing import SimulatorAdmin, eventually

BODY = {"payment_ref": "ch_1", "amount_cents": 1500, "currency": "cad"}


async def test_replay_returns_the_first_response_and_applies_once(
    raw: httpx.AsyncClient, admin: SimulatorAdmin, key: str
) -> None:
    first = await raw.post("/v1/refunds", json=BODY, headers={"Idempotency-Key": key})
    again = await raw.post("/v1/refunds", json=BODY, headers={"Idempotency-Key": key})

    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    body = first.json()
    assert body["id"].startswith("re_") and body["status"] == "succeeded"
    assert body["idempotency_key"] == key and body["amount_cents"] == 1500
    ledger = await admin.ledger()
    assert ledger["effects_per_key"] == {key: 1}
    assert ledger["requests"] == {"create": 1, "lookup": 0, "replay": 1}


async def test_same_key_other_parameters_is_refused(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str
) -> None:
    await provider.refund(key, "ch_1", 1500, "cad")

    with pytest.raises(ProviderRejected) as caught:
        await provider.refund(key, "ch_1", 1600, "cad")

    assert (caught.value.status, caught.value.code) == (422, "idempotency_key_reused")
    assert (await admin.ledger())["effects_per_key"] == {key: 1}


async def test_a_colliding_request_is_refused_while_the_first_is_in_flight(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str
) -> None:
    await admin.set_faults(rules=[{"mode": "delay", "delay_ms": 800, "payment_ref": "ch_slow"}])
    slow = asyncio.create_task(provider.refund(key, "ch_slow", 1500, "cad"))

    async def in_flight() -> bool:
        return key in (await admin.ledger())["in_flight"]

    await eventually(in_flight)
    with pytest.raises(KeyInFlight):
        await provider.refund(key, "ch_slow", 1500, "cad")
    first = await slow

    assert (await provider.refund(key, "ch_slow", 1500, "cad")) == first  # now a replay
    assert (await admin.ledger())["effects_per_key"] == {key: 1}


async def test_after_the_window_a_reused_key_refunds_again_and_lookup_sees_both(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str, retention_seconds: int
) -> None:
    first = await provider.refund(key, "ch_1", 1500, "cad")
    await admin.advance_clock(retention_seconds - 60)
    assert await provider.refund(key, "ch_1", 1500, "cad") == first

    await admin.advance_clock(61)
    second = await provider.refund(key, "ch_1", 1500, "cad")

    assert second.id != first.id
    assert (await admin.ledger())["effects_per_key"] == {key: 2}
    assert await provider.list_refunds(idempotency_key=key) == [first, second]
    assert await provider.find_by_key(key) == first


async def test_lookups_never_create(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str
) -> None:
    refund = await provider.refund(key, "ch_9", 700, "eur")

    assert await provider.get(refund.id) == refund
    assert await provider.get("re_missing") is None
    assert await provider.find_by_key(key) == refund
    assert await provider.find_by_key("never-used") is None
    assert await provider.list_refunds(payment_ref="ch_9") == [refund]

    ledger = await admin.ledger()
    assert ledger["requests"] == {"create": 1, "lookup": 5, "replay": 0}
    assert len(ledger["items"]) == 1
