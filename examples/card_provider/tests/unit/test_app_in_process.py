"""The app without uvicorn's socket: admin switched off, and drops refused up front."""

from __future__ import annotations

import httpx
from signoff_card_provider.app import create_app
from signoff_card_provider.settings import Settings


async def test_without_admin_the_admin_routes_and_fault_header_are_gone() -> None:
    app = create_app(Settings(allow_admin=False, faults=""))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://provider"
    ) as http:
        reset = await http.post("/_admin/reset")
        created = await http.post(
            "/v1/refunds",
            json={"payment_ref": "ch_1", "amount_cents": 100, "currency": "cad"},
            headers={"Idempotency-Key": "k", "X-Fault": "fail_before"},
        )

    assert reset.status_code == 404
    assert reset.headers["content-type"] == "application/problem+json"
    assert created.status_code == 200


async def test_a_drop_that_cannot_happen_applies_nothing() -> None:
    """In-process there is no socket to cut, so the simulator must not apply and answer."""
    app = create_app(Settings(faults="drop_response=1.0", allow_admin=True))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://provider"
    ) as http:
        created = await http.post(
            "/v1/refunds",
            json={"payment_ref": "ch_1", "amount_cents": 100, "currency": "cad"},
            headers={"Idempotency-Key": "k"},
        )
        ledger = (await http.get("/v1/ledger")).json()

    assert created.status_code == 501
    assert created.json()["code"] == "drop_response_unsupported"
    assert ledger["items"] == []
    assert ledger["in_flight"] == []
