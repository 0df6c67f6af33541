"""The client's retries: a 503 or a lost connection is tried again with the same key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from signoff_client import SignoffClient, Unavailable

PROPOSAL_ID = "prp_01jz0000000000000000000000"
PROPOSED: dict[str, Any] = {
    "proposal": {
        "id": PROPOSAL_ID,
        "organization_id": "org_1",
        "requested_by": "usr_1",
        "section": "orders",
        "resource_id": "ord_1",
        "operation_kind": "order.refund_missing_discount",
        "contract_version": 1,
        "preview": {},
        "status": "pending",
        "created_at": "2026-11-30T10:00:00Z",
        "expires_at": "2026-12-01T10:00:00Z",
    },
    "rendered_preview": {"title": "Refund", "lines": []},
}


def _client(handler: httpx.MockTransport, retries: int = 3) -> SignoffClient:
    return SignoffClient(
        "http://agent", "http://proposals", "token", transport=handler, retries=retries
    )


def test_a_503_then_a_dropped_connection_are_retried_with_the_same_idempotency_key() -> None:
    keys: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        if len(keys) == 1:
            return httpx.Response(503, json={"code": "proposals_unavailable", "title": "later"})
        if len(keys) == 2:
            raise httpx.ReadError("connection lost", request=request)
        return httpx.Response(201, json=PROPOSED)

    with _client(httpx.MockTransport(answer)) as signoff:
        proposed = signoff.propose("order.refund_missing_discount", "ord_1", {"x": 1})
    assert proposed.proposal.id == PROPOSAL_ID
    assert len(keys) == 3 and len(set(keys)) == 1


def test_retries_end_in_a_typed_error_and_a_4xx_is_not_retried() -> None:
    calls = []

    def unavailable(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(503, json={"code": "proposals_unavailable", "title": "later"})

    with _client(httpx.MockTransport(unavailable), retries=2) as signoff:
        with pytest.raises(Unavailable) as failed:
            signoff.get("prp_1")
    assert failed.value.code == "proposals_unavailable" and len(calls) == 3

    refused = []

    def forbidden(request: httpx.Request) -> httpx.Response:
        refused.append(1)
        return httpx.Response(403, json={"code": "forbidden", "title": "no"})

    with _client(httpx.MockTransport(forbidden)) as signoff:
        with pytest.raises(Exception) as error:
            signoff.approve("prp_1")
    assert type(error.value).__name__ == "Forbidden" and len(refused) == 1
