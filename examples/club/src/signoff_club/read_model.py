"""What the club's assistants may read: one order's investigation, the segments, an audience.

Scope is always the server's: the organization (and for an order, the order id) come from the
``Scope`` the service built, never from the model. Provider references, password hashes and
other organizations' rows never appear here; the model sees names, amounts and opaque ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signoff_contracts.operations import Scope
from sqlalchemy import Select, and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t


async def order_investigation(conn: AsyncConnection, scope: Scope) -> dict[str, Any]:
    """Everything about ONE order an assistant needs to spot a missing discount; ``{}`` when
    the order is not in the scope's organization."""
    o, p = t.orders, t.participants
    order = (
        await conn.execute(
            select(
                o.c.id,
                o.c.currency,
                o.c.total_cents,
                o.c.created_at,
                p.c.id.label("participant_id"),
                p.c.name,
            )
            .join_from(o, p, o.c.participant_id == p.c.id)
            .where(o.c.id == scope.resource_id, o.c.organization_id == scope.organization_id)
        )
    ).first()
    if order is None:
        return {}
    return {
        "order": {
            "id": order.id,
            "currency": order.currency,
            "total_cents": order.total_cents,
            "created_at": order.created_at.isoformat(),
        },
        "participants": [{"id": order.participant_id, "name": order.name}],
        "line_items": await _line_items(conn, order.id),
        "discounts": await _discounts(conn, order.id),
        "payments": await _payments(conn, order.id),
        "refunds": await _refunds(conn, order.id),
    }


async def _line_items(conn: AsyncConnection, order_id: str) -> list[dict[str, Any]]:
    li, pr = t.line_items, t.products
    rows = await conn.execute(
        select(li.c.id, pr.c.name, li.c.quantity, li.c.unit_price_cents, li.c.amount_cents)
        .join_from(li, pr, li.c.product_id == pr.c.id)
        .where(li.c.order_id == order_id)
        .order_by(li.c.id)
    )
    return [
        {
            "id": r.id,
            "product_name": r.name,
            "quantity": r.quantity,
            "unit_price_cents": r.unit_price_cents,
            "amount_cents": r.amount_cents,
        }
        for r in rows
    ]


async def _discounts(conn: AsyncConnection, order_id: str) -> list[dict[str, Any]]:
    """The discounts evidenced for the order's line items, and whether each was applied."""
    e, d, li = t.line_item_discounts, t.discounts, t.line_items
    rows = await conn.execute(
        select(e.c.line_item_id, d.c.id, d.c.name, d.c.kind, d.c.value, e.c.applied)
        .join_from(e, d, e.c.discount_id == d.c.id)
        .join(li, and_(li.c.id == e.c.line_item_id, li.c.order_id == order_id))
        .order_by(e.c.line_item_id, d.c.id)
    )
    return [
        {
            "line_item_id": r.line_item_id,
            "discount_id": r.id,
            "name": r.name,
            "kind": r.kind,
            "value": r.value,
            "value_unit": "basis_points" if r.kind == "percentage" else "cents",
            "applied": r.applied,
        }
        for r in rows
    ]


async def _payments(conn: AsyncConnection, order_id: str) -> list[dict[str, Any]]:
    pay = t.payments
    rows = await conn.execute(select(pay).where(pay.c.order_id == order_id).order_by(pay.c.id))
    return [
        {
            "id": r.id,
            "method": r.method,
            "amount_cents": r.amount_cents,
            "refunded_cents": r.refunded_cents,
            "refundable_cents": r.amount_cents - r.refunded_cents - r.reserved_cents,
        }
        for r in rows
    ]


async def _refunds(conn: AsyncConnection, order_id: str) -> list[dict[str, Any]]:
    rf = t.refunds
    rows = await conn.execute(
        select(rf.c.id, rf.c.payment_id, rf.c.amount_cents, rf.c.destination, rf.c.status)
        .where(rf.c.order_id == order_id)
        .order_by(rf.c.created_at, rf.c.id)
    )
    return [dict(r._mapping) for r in rows]


async def list_segments(conn: AsyncConnection, organization_id: str) -> list[dict[str, Any]]:
    s, m = t.segments, t.segment_members
    rows = await conn.execute(
        select(s.c.id, s.c.name, s.c.filter, func.count(m.c.participant_id).label("members"))
        .join_from(s, m, m.c.segment_id == s.c.id, isouter=True)
        .where(s.c.organization_id == organization_id)
        .group_by(s.c.id)
        .order_by(s.c.name, s.c.id)
    )
    return [
        {"id": r.id, "name": r.name, "filter": r.filter, "member_count": r.members} for r in rows
    ]


async def count_audience(
    conn: AsyncConnection, organization_id: str, segment_ids: Sequence[str]
) -> int:
    """Distinct participants in any of the segments (a person in two segments counts once);
    segments of other organizations count for nothing."""
    return int((await conn.execute(audience_query(organization_id, segment_ids))).scalar_one())


def audience_query(organization_id: str, segment_ids: Sequence[str]) -> Select[int]:
    """``count_audience``'s query, for a caller that asks it beside another in one statement."""
    s, m = t.segments, t.segment_members
    return (
        select(func.count(func.distinct(m.c.participant_id)))
        .join_from(m, s, m.c.segment_id == s.c.id)
        .where(s.c.organization_id == organization_id, s.c.id.in_(list(segment_ids)))
    )
