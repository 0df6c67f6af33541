"""The club's assistants: each sees one resource of its own organization, through its own tools."""

from __future__ import annotations

import json

import pytest
from signoff_club.assistants import (
    AudienceParameters,
    EmailAssistant,
    OrderAssistant,
)
from signoff_club.testing import BroadcastWorld, RefundWorld
from signoff_contracts.assistants import NoParameters, check_assistant
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def test_both_assistants_are_complete_and_keep_to_their_section() -> None:
    for assistant in (OrderAssistant, EmailAssistant):
        check_assistant(assistant)
    order_tools = {t.name for t in OrderAssistant.read_tools} | {
        t.name for t in OrderAssistant.propose_tools
    }
    email_tools = {t.name for t in EmailAssistant.read_tools} | {
        t.name for t in EmailAssistant.propose_tools
    }
    assert not order_tools & email_tools
    assert [t.kind for t in OrderAssistant.propose_tools] == ["order.refund_missing_discount"]
    assert [t.kind for t in EmailAssistant.propose_tools] == ["email_broadcast.apply_draft"]


async def test_the_order_assistant_reads_only_its_order(
    engine: AsyncEngine, refund_world: RefundWorld
) -> None:
    assistant = OrderAssistant()
    [investigation] = assistant.read_tools
    async with engine.connect() as conn:
        assert await assistant.exists(conn, refund_world.scope)
        elsewhere = refund_world.other_scope.model_copy(
            update={"organization_id": refund_world.scope.organization_id}
        )
        assert not await assistant.exists(conn, elsewhere)  # another club's order, named here
        found = await investigation.run(conn, refund_world.scope, NoParameters())
        foreign = refund_world.scope.model_copy(
            update={"organization_id": refund_world.other_scope.organization_id}
        )
        assert not await assistant.exists(conn, foreign)
        assert await investigation.run(conn, foreign, NoParameters()) == {
            "error": {"code": "order_not_found"}
        }
        context = await assistant.context(conn, refund_world.scope)
    assert found["order"]["id"] == refund_world.scope.resource_id
    text = json.dumps(found) + context
    assert refund_world.scope.organization_id not in text and "ch_demo" not in text
    assert "444.99 CAD" in context and len(context) <= assistant.max_context_chars


async def test_the_email_assistant_lists_segments_without_their_filters(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    assistant = EmailAssistant()
    segments_tool, audience_tool = assistant.read_tools
    segment_ids = broadcast_world.request["segment_ids"]
    async with engine.connect() as conn:
        assert await assistant.exists(conn, broadcast_world.scope)
        segments = await segments_tool.run(conn, broadcast_world.scope, NoParameters())
        audience = await audience_tool.run(
            conn, broadcast_world.scope, AudienceParameters(segment_ids=segment_ids)
        )
        foreign = await audience_tool.run(
            conn, broadcast_world.other_scope, AudienceParameters(segment_ids=segment_ids)
        )
        context = await assistant.context(conn, broadcast_world.scope)
    assert {s["id"] for s in segments["segments"]} == set(segment_ids)
    assert all(set(s) == {"id", "name", "member_count"} for s in segments["segments"])
    assert audience["audience_count"] == 3 and foreign["audience_count"] == 0
    assert "Spring bonspiel announcement" in context
