"""``SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY`` really takes the provider's dedup away: each call of
``perform`` sends a key of its own instead of the attempt's, so the provider cannot tell a repeated
refund from a new one (and reconciliation, which asks by the attempt's key, finds nothing)."""

from __future__ import annotations

import json

import httpx
import pytest
from pydantic import ValidationError
from signoff_card_provider.client import CardProviderClient
from signoff_club.operations.refund_missing_discount import RefundArguments, RefundMissingDiscount
from signoff_club.refunds import Refunded
from signoff_club.settings import ClubSettings
from signoff_contracts.operations import AttemptRef

ATTEMPT = AttemptRef(attempt_id="att_1", idempotency_key="signoff-refund-prp_1")
ARGUMENTS = RefundArguments(
    order_id="ord_1",
    payment_id="pay_1",
    line_item_id="lin_1",
    discount_id="dsc_1",
    amount_cents=500,
    currency="CAD",
    destination="card_refund",
    payment_ref="ch_1",
    order_total_cents=4500,
)


async def _keys_sent(settings: ClubSettings, calls: int) -> list[str]:
    sent: list[str] = []

    def provider(request: httpx.Request) -> httpx.Response:
        key = request.headers["Idempotency-Key"]
        sent.append(key)
        body = json.loads(request.content)
        refund = {
            "id": f"re_{len(sent)}",
            "status": "succeeded",
            "idempotency_key": key,
            "created_at": "2026-01-01T00:00:00Z",
            **body,
        }
        return httpx.Response(201, json=refund)

    operation = RefundMissingDiscount(settings)
    async with CardProviderClient(
        "http://provider.test", transport=httpx.MockTransport(provider)
    ) as client:
        for _ in range(calls):
            assert isinstance(await operation.perform(ATTEMPT, ARGUMENTS, client), Refunded)
    return sent


async def test_the_attempts_key_is_sent_on_every_call() -> None:
    assert await _keys_sent(ClubSettings(), 2) == [ATTEMPT.idempotency_key] * 2


async def test_with_the_switch_every_call_sends_a_key_of_its_own() -> None:
    settings = ClubSettings(env="test", unsafe_random_idempotency_key=True)
    first, second = await _keys_sent(settings, 2)
    assert len({first, second, ATTEMPT.idempotency_key}) == 3


def test_the_switch_is_read_from_the_services_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY", "true")
    monkeypatch.setenv("SIGNOFF_ENV", "test")
    assert ClubSettings().unsafe_random_idempotency_key
    monkeypatch.setenv("SIGNOFF_ENV", "prod")
    with pytest.raises(ValidationError, match="SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY"):
        ClubSettings()
