from __future__ import annotations

import json

import pytest
from signoff_club.read_model import count_audience, list_segments, order_investigation
from signoff_club.testing import BroadcastWorld, RefundWorld
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def test_an_order_investigation_is_scoped_and_free_of_provider_data(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    case = refund_world.organization["refund_case"]
    async with engine.connect() as conn:
        found = await order_investigation(conn, refund_world.scope)
        foreign_scope = refund_world.scope.model_copy(
            update={"organization_id": refund_world.other_organization["id"]}
        )
        assert await order_investigation(conn, foreign_scope) == {}
    assert found["order"]["id"] == case["order_id"] and found["order"]["total_cents"] == 44_499
    assert [p["name"] for p in found["participants"]] == ["Alex Tremblay"]
    owed = [d for d in found["discounts"] if not d["applied"]]
    assert [(d["line_item_id"], d["discount_id"]) for d in owed] == [
        (case["line_item_id"], case["discount_id"])
    ]
    assert [p["id"] for p in found["payments"]] == [case["payment_id"]]
    assert found["payments"][0]["refundable_cents"] == 44_499
    assert found["refunds"] == []
    assert "ch_demo" not in json.dumps(found)  # the card reference stays server-side


async def test_segments_and_audience(engine: AsyncEngine, broadcast_world: BroadcastWorld) -> None:
    org = broadcast_world.organization["id"]
    segment_ids = broadcast_world.request["segment_ids"]
    async with engine.connect() as conn:
        segments = await list_segments(conn, org)
        assert [(s["name"], s["member_count"]) for s in segments] == [
            ("Adult league", 2),
            ("Junior clinic families", 2),
        ]
        assert await count_audience(conn, org, segment_ids) == 3
        assert await count_audience(conn, org, segment_ids[:1]) == 2
        other = broadcast_world.other_organization["id"]
        assert await count_audience(conn, other, segment_ids) == 0
