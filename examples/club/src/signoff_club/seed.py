"""Demo data: fresh clubs, each with a manager, a viewer, a refund case and a broadcast case.

Every call creates new organizations (names and emails carry a random suffix), so demos and
tests never trip over each other's rows and a second seed never fails on a unique key.
"""

from __future__ import annotations

import asyncio
import secrets
from functools import cache
from typing import Any

from signoff_contracts.ids import new_id
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t
from signoff_club.passwords import hash_password

PASSWORDS = {"manager": "demo-manager", "viewer": "demo-viewer"}
_CLUBS = ("Riverside Curling Club", "Lakeside Curling Club")
_PEOPLE = {"manager": ("Morgan Lee", "en"), "viewer": ("Camille Roy", "fr")}


async def seed_demo(conn: AsyncConnection) -> dict[str, Any]:
    """Create two fresh organizations in the caller's transaction; return what was made."""
    return {"organizations": [await seed_organization(conn, club) for club in _CLUBS]}


async def seed_organization(conn: AsyncConnection, club: str = _CLUBS[0]) -> dict[str, Any]:
    suffix = secrets.token_hex(4)
    org_id = new_id("org")
    name = f"{club} {suffix}"
    await conn.execute(t.organizations.insert().values(id=org_id, name=name))
    users = {role: await _user(conn, org_id, role, suffix) for role in PASSWORDS}
    participants = await _participants(conn, org_id, suffix)
    return {
        "id": org_id,
        "name": name,
        "users": users,
        "refund_case": await _refund_case(conn, org_id, participants[0], suffix),
        "broadcast_case": await _broadcast_case(conn, org_id, participants),
    }


async def _user(conn: AsyncConnection, org_id: str, role: str, suffix: str) -> dict[str, str]:
    user_id, email = new_id("usr"), f"{role}+{suffix}@club.example"
    display_name, locale = _PEOPLE[role]
    await conn.execute(
        t.users.insert().values(
            id=user_id,
            email=email,
            display_name=display_name,
            locale=locale,
            password_hash=await asyncio.to_thread(_demo_hash, PASSWORDS[role]),
        )
    )
    await conn.execute(
        t.memberships.insert().values(user_id=user_id, organization_id=org_id, role=role)
    )
    return {"id": user_id, "email": email, "password": PASSWORDS[role]}


@cache
def _demo_hash(password: str) -> str:
    """Demo passwords are published, so one hash (one argon2id, in a worker thread: never on the
    event loop) per process serves every demo user: seeding stays fast enough to run per test."""
    return hash_password(password)


async def _participants(conn: AsyncConnection, org_id: str, suffix: str) -> list[str]:
    names = ("Alex Tremblay", "Sam Gagnon", "Jordan Côté")
    ids = [new_id("par") for _ in names]
    await conn.execute(
        t.participants.insert(),
        [
            {
                "id": pid,
                "organization_id": org_id,
                "name": name,
                "email": f"{name.split()[0].lower()}+{suffix}@participants.example",
            }
            for pid, name in zip(ids, names, strict=True)
        ],
    )
    return ids


async def _refund_case(
    conn: AsyncConnection, org_id: str, participant_id: str, suffix: str
) -> dict[str, str]:
    """An adult-league registration whose 10 % early-bird discount was never applied (owed:
    3 500 cents of 34 999), beside a junior clinic whose sibling discount was; paid by card."""
    league, clinic = new_id("prd"), new_id("prd")
    await conn.execute(
        t.products.insert(),
        [
            {
                "id": league,
                "organization_id": org_id,
                "name": "Adult league — fall season",
                "unit_price_cents": 34_999,
            },
            {
                "id": clinic,
                "organization_id": org_id,
                "name": "Junior clinic",
                "unit_price_cents": 12_000,
            },
        ],
    )
    early_bird, sibling = new_id("dsc"), new_id("dsc")
    await conn.execute(
        t.discounts.insert(),
        [
            {
                "id": early_bird,
                "organization_id": org_id,
                "name": "Early-bird 10 %",
                "kind": "percentage",
                "value": 1_000,
            },
            {
                "id": sibling,
                "organization_id": org_id,
                "name": "Sibling $25",
                "kind": "fixed",
                "value": 2_500,
            },
        ],
    )
    order_id, league_line, clinic_line = new_id("ord"), new_id("lin"), new_id("lin")
    await conn.execute(
        t.orders.insert().values(
            id=order_id,
            organization_id=org_id,
            participant_id=participant_id,
            currency="CAD",
            total_cents=34_999 + 9_500,
        )
    )
    await conn.execute(
        t.line_items.insert(),
        [
            {
                "id": league_line,
                "order_id": order_id,
                "product_id": league,
                "quantity": 1,
                "unit_price_cents": 34_999,
                "amount_cents": 34_999,
            },
            {
                "id": clinic_line,
                "order_id": order_id,
                "product_id": clinic,
                "quantity": 1,
                "unit_price_cents": 12_000,
                "amount_cents": 9_500,
            },
        ],
    )
    await conn.execute(
        t.line_item_discounts.insert(),
        [
            {"line_item_id": league_line, "discount_id": early_bird, "applied": False},
            {"line_item_id": clinic_line, "discount_id": sibling, "applied": True},
        ],
    )
    payment_id = new_id("pay")
    await conn.execute(
        t.payments.insert().values(
            id=payment_id,
            order_id=order_id,
            method="card",
            amount_cents=34_999 + 9_500,
            provider_ref=f"ch_demo_{suffix}_{secrets.token_hex(4)}",
            card_last4="4242",
        )
    )
    return {
        "order_id": order_id,
        "payment_id": payment_id,
        "line_item_id": league_line,
        "discount_id": early_bird,
    }


async def _broadcast_case(
    conn: AsyncConnection, org_id: str, participants: list[str]
) -> dict[str, Any]:
    """Two overlapping segments (three people in all) and an empty broadcast form."""
    adults, parents = new_id("seg"), new_id("seg")
    await conn.execute(
        t.segments.insert(),
        [
            {
                "id": adults,
                "organization_id": org_id,
                "name": "Adult league",
                "filter": {"registered_for": "adult_league", "season": "fall"},
            },
            {
                "id": parents,
                "organization_id": org_id,
                "name": "Junior clinic families",
                "filter": {"registered_for": "junior_clinic"},
            },
        ],
    )
    first, second, third = participants
    await conn.execute(
        t.segment_members.insert(),
        [
            {"segment_id": adults, "participant_id": first},
            {"segment_id": adults, "participant_id": second},
            {"segment_id": parents, "participant_id": second},
            {"segment_id": parents, "participant_id": third},
        ],
    )
    broadcast_id = new_id("brd")
    await conn.execute(
        t.broadcast_forms.insert().values(
            id=broadcast_id, organization_id=org_id, name="Spring bonspiel announcement"
        )
    )
    return {"broadcast_id": broadcast_id, "segment_ids": [adults, parents]}
