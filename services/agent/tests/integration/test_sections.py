"""The sections the agent serves, read by frontends instead of a copy of their names."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from agent_testkit import auth

pytestmark = pytest.mark.integration


async def test_every_loaded_assistant_is_listed_with_its_resource_and_titles(
    agent: httpx.AsyncClient, club: dict[str, Any]
) -> None:
    listed = await agent.get("/v1/sections", headers=auth(club))
    assert listed.status_code == 200, listed.text
    by_name = {item["section"]: item for item in listed.json()["items"]}
    assert set(by_name) == {"orders", "email"}
    assert by_name["email"]["resource"] == "broadcast"
    assert by_name["orders"]["title"] == {"en": "Orders", "fr": "Commandes"}
    assert (await agent.get("/v1/sections")).status_code == 401


async def test_resources_are_the_callers_organizations_in_the_callers_locale(
    agent: httpx.AsyncClient, club: dict[str, Any], other_club: dict[str, Any]
) -> None:
    orders = await agent.get("/v1/sections/orders/resources", headers=auth(club))
    assert orders.status_code == 200, orders.text
    ids = [item["id"] for item in orders.json()["items"]]
    assert club["refund_case"]["order_id"] in ids
    assert other_club["refund_case"]["order_id"] not in ids
    french = await agent.get("/v1/sections/orders/resources", headers=auth(club, "viewer"))
    assert "," in french.json()["items"][0]["label"]  # 444,99 CAD: the viewer reads French
    email = await agent.get("/v1/sections/email/resources", headers=auth(club))
    assert [i["id"] for i in email.json()["items"]] == [club["broadcast_case"]["broadcast_id"]]
    unknown = await agent.get("/v1/sections/payroll/resources", headers=auth(club))
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_section"
