"""Bad input gets an RFC 9457 problem document, never a stack trace."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from signoff_card_provider.testing import SimulatorAdmin

GOOD = {"payment_ref": "ch_1", "amount_cents": 1500, "currency": "cad"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail", "code"} <= body.keys()
    assert (body["status"], body["code"]) == (status, code)
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


async def test_missing_idempotency_key_is_400_even_with_a_bad_body(
    raw: httpx.AsyncClient, admin: SimulatorAdmin
) -> None:
    response = await raw.post("/v1/refunds", json={"amount_cents": "lots"})

    assert_problem(response, 400, "idempotency_key_missing")
    assert (await admin.ledger())["requests"]["create"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**GOOD, "amount_cents": 0}, "body.amount_cents"),
        ({**GOOD, "amount_cents": "1500"}, "body.amount_cents"),
        ({**GOOD, "amount_cents": 15.5}, "body.amount_cents"),
        ({**GOOD, "currency": "CAD"}, "body.currency"),
        ({**GOOD, "currency": "cadx"}, "body.currency"),
        ({**GOOD, "payment_ref": ""}, "body.payment_ref"),
        ({"amount_cents": 1500, "currency": "cad"}, "body.payment_ref"),
        ({**GOOD, "surprise": True}, "body.surprise"),
    ],
)
async def test_invalid_body_is_422_invalid_request(
    raw: httpx.AsyncClient, key: str, body: dict[str, Any], field: str
) -> None:
    response = await raw.post("/v1/refunds", json=body, headers={"Idempotency-Key": key})

    problem = assert_problem(response, 422, "invalid_request")
    assert field in [error["loc"] for error in problem["errors"]]


async def test_malformed_json_is_422_invalid_request(raw: httpx.AsyncClient, key: str) -> None:
    response = await raw.post(
        "/v1/refunds",
        content=b'{"payment_ref": "ch_1",',
        headers={"Idempotency-Key": key, "content-type": "application/json"},
    )

    assert_problem(response, 422, "invalid_request")


async def test_oversized_key_and_bad_fault_header_are_400(raw: httpx.AsyncClient) -> None:
    too_long = await raw.post("/v1/refunds", json=GOOD, headers={"Idempotency-Key": "k" * 256})
    bad_fault = await raw.post(
        "/v1/refunds", json=GOOD, headers={"Idempotency-Key": "k", "X-Fault": "explode"}
    )

    assert_problem(too_long, 400, "invalid_idempotency_key")
    assert_problem(bad_fault, 400, "invalid_fault_header")


async def test_lookup_errors(raw: httpx.AsyncClient) -> None:
    assert_problem(await raw.get("/v1/refunds/re_nope"), 404, "refund_not_found")
    assert_problem(await raw.get("/v1/refunds"), 422, "invalid_request")
    assert_problem(await raw.get("/v1/nowhere"), 404, "not_found")
    assert_problem(await raw.delete("/v1/ledger"), 405, "method_not_allowed")


async def test_bad_admin_commands(raw: httpx.AsyncClient) -> None:
    backwards = await raw.post("/_admin/clock", json={"advance_seconds": -5})
    too_likely = await raw.post(
        "/_admin/faults", json={"probabilities": {"drop_response": 0.7, "delay": 0.7}}
    )
    unknown_mode = await raw.post("/_admin/faults", json={"rules": [{"mode": "explode"}]})

    assert_problem(backwards, 422, "invalid_request")
    assert_problem(too_likely, 422, "invalid_request")
    assert_problem(unknown_mode, 422, "invalid_request")


async def test_health(raw: httpx.AsyncClient) -> None:
    response = await raw.get("/healthz")

    assert (response.status_code, response.json()) == (200, {"status": "ok"})
