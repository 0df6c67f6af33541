"""Each fault mode as the executor will meet it: through the client, over a real socket."""

from __future__ import annotations

import uuid

import httpx
import pytest
from signoff_card_provider.client import (
    CardProviderClient,
    CardProviderError,
    ProviderUnavailable,
    Refund,
    ResponseLost,
)
from signoff_card_provider.testing import SimulatorAdmin, eventually

DICE = {"drop_response": 0.3, "fail_before": 0.3, "delay": 0.2}


async def test_dropped_response_is_lost_but_the_refund_landed_once(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str
) -> None:
    await admin.set_faults(rules=[{"mode": "drop_response", "count": 1}])

    with pytest.raises(ResponseLost) as caught:
        await provider.refund(key, "ch_1", 1500, "cad")

    # No HTTP response at all: the connection closed or reset, not a 5xx.
    assert isinstance(caught.value.__cause__, httpx.RemoteProtocolError | httpx.ReadError)
    assert (await admin.ledger())["effects_per_key"] == {key: 1}
    landed = await provider.find_by_key(key)
    assert landed is not None
    assert await provider.refund(key, "ch_1", 1500, "cad") == landed  # a replay, not a 2nd


async def test_dropped_response_per_request_header(
    raw: httpx.AsyncClient, admin: SimulatorAdmin, key: str
) -> None:
    headers = {"Idempotency-Key": key, "X-Fault": "drop_response"}
    body = {"payment_ref": "ch_1", "amount_cents": 1, "currency": "cad"}

    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        await raw.post("/v1/refunds", json=body, headers=headers)

    assert (await admin.ledger())["effects_per_key"] == {key: 1}


async def test_fail_before_applies_nothing_and_frees_the_key(
    provider: CardProviderClient, admin: SimulatorAdmin, key: str
) -> None:
    await admin.set_faults(rules=[{"mode": "fail_before", "count": 1}])

    with pytest.raises(ProviderUnavailable) as caught:
        await provider.refund(key, "ch_1", 1500, "cad")

    assert caught.value.definitely_not_applied is True
    assert (await admin.ledger())["items"] == []
    await provider.refund(key, "ch_1", 1500, "cad")  # a retry may proceed
    assert (await admin.ledger())["effects_per_key"] == {key: 1}


async def test_delay_beyond_the_client_timeout_is_lost_yet_lands(
    provider_url: str, admin: SimulatorAdmin, key: str
) -> None:
    await admin.set_faults(rules=[{"mode": "delay", "delay_ms": 1000}])

    async with CardProviderClient(provider_url, timeout_s=0.25) as impatient:
        with pytest.raises(ResponseLost) as caught:
            await impatient.refund(key, "ch_1", 1500, "cad")

    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)

    async def landed() -> bool:
        effects: dict[str, int] = (await admin.ledger())["effects_per_key"]
        return effects.get(key) == 1

    await eventually(landed)


async def _run_dice(provider: CardProviderClient, admin: SimulatorAdmin) -> list[str]:
    await admin.set_faults(probabilities=DICE, delay_ms=10, seed=42)
    outcomes: list[str] = []
    for _ in range(16):
        try:
            result: Refund | CardProviderError = await provider.refund(
                f"dice-{uuid.uuid4().hex}", "ch_1", 100, "cad"
            )
        except CardProviderError as exc:
            result = exc
        outcomes.append(type(result).__name__)
    history = [entry["mode"] for entry in await admin.fault_history()]
    return [*outcomes, "|", *history]


async def test_seeded_dice_repeat_the_same_faults(
    provider: CardProviderClient, admin: SimulatorAdmin
) -> None:
    first = await _run_dice(provider, admin)
    await admin.reset()
    again = await _run_dice(provider, admin)

    assert first == again
    assert {"Refund", "ResponseLost", "ProviderUnavailable"} <= set(first)
    assert "delay" in first
