"""The operations catalogue: what the caller may propose, with the schema propose accepts."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agent_testkit import auth
from signoff_club.operations.refund_missing_discount import RefundMissingDiscount
from signoff_contracts.assistants import strict_parameters

pytestmark = pytest.mark.integration
REFUND = "order.refund_missing_discount"


async def test_a_manager_sees_each_operation_with_titles_per_locale_and_the_request_schema(
    agent: httpx.AsyncClient, club: dict[str, Any]
) -> None:
    listed = await agent.get("/v1/operations", headers=auth(club))
    assert listed.status_code == 200, listed.text
    items = {item["kind"]: item for item in listed.json()["items"]}
    assert {REFUND, "email_broadcast.apply_draft"} <= set(items)
    refund = items[REFUND]
    assert refund["request_schema"] == strict_parameters(RefundMissingDiscount.Request)
    assert refund["request_schema"]["additionalProperties"] is False
    assert set(refund["title"]) == {"en", "fr"} and refund["title"]["fr"] != refund["title"]["en"]
    assert refund["propose_path"] == f"/v1/operations/{REFUND}/propose"
    one = await agent.get(f"/v1/operations/{REFUND}", headers=auth(club))
    assert one.json() == refund


async def test_a_viewer_who_may_not_propose_sees_none_and_an_unknown_kind_is_404(
    agent: httpx.AsyncClient, club: dict[str, Any]
) -> None:
    viewer = auth(club, "viewer")
    assert (await agent.get("/v1/operations", headers=viewer)).json()["items"] == []
    hidden = await agent.get(f"/v1/operations/{REFUND}", headers=viewer)
    unknown = await agent.get("/v1/operations/no.such", headers=auth(club))
    anonymous = await agent.get("/v1/operations")
    assert (hidden.status_code, hidden.json()["code"]) == (404, "unknown_operation")
    assert (unknown.status_code, unknown.json()["code"]) == (404, "unknown_operation")
    assert anonymous.status_code == 401
