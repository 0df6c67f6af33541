"""What the approval-policy end-to-end tests share: more managers for a seeded club, a policy
set through the proposals API, and a refund large enough for a threshold."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from e2e_stack import Stack
from signoff_club.passwords import hash_password
from signoff_club.seed import PASSWORDS
from signoff_contracts.ids import new_id
from sqlalchemy import text

REFUND = "order.refund_missing_discount"
#: "refunds over 100.00 need two managers, and not the one who asked"
OVER_100 = {
    "when": {"fact": "amount_cents", "op": ">", "value": 10_000},
    "approvals": 2,
    "roles": ["manager"],
    "proposer_may_approve": False,
}


async def add_manager(stack: Stack, org: dict[str, Any], name: str) -> dict[str, str]:
    """Another manager of ``org`` (signing in with the demo manager's password)."""
    user_id, email = new_id("usr"), f"manager+{secrets.token_hex(4)}@club.example"
    digest = await asyncio.to_thread(hash_password, PASSWORDS["manager"])
    async with stack.engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO club.users (id, email, display_name, locale, password_hash) "
                "VALUES (:i, :e, :n, 'en', :h)"
            ),
            {"i": user_id, "e": email, "n": name, "h": digest},
        )
        await conn.execute(
            text(
                "INSERT INTO club.memberships (user_id, organization_id, role) "
                "VALUES (:i, :o, 'manager')"
            ),
            {"i": user_id, "o": org["id"]},
        )
    return {"id": user_id, "email": email, "password": PASSWORDS["manager"]}


async def set_policy(
    stack: Stack, token: str, rules: list[dict[str, Any]], kind: str = REFUND
) -> dict[str, Any]:
    response = await stack.http.put(
        f"{stack.url('proposals')}/v1/policies/{kind}",
        json={"rules": rules},
        headers=stack.auth(token),
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def make_refund_150(stack: Stack, org: dict[str, Any]) -> None:
    """The seeded league registration priced 1 500.00 instead of 349.99, so its missing 10 %
    early-bird refund is 150.00 (the seeded case owes 35.00)."""
    case = org["refund_case"]
    async with stack.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE club.line_items SET unit_price_cents = 150000, amount_cents = 150000 "
                "WHERE id = :l"
            ),
            {"l": case["line_item_id"]},
        )
        await conn.execute(
            text(
                "UPDATE club.products SET unit_price_cents = 150000 WHERE id = "
                "(SELECT product_id FROM club.line_items WHERE id = :l)"
            ),
            {"l": case["line_item_id"]},
        )
        await conn.execute(
            text("UPDATE club.orders SET total_cents = 159500 WHERE id = :o"),
            {"o": case["order_id"]},
        )
        await conn.execute(
            text("UPDATE club.payments SET amount_cents = 159500 WHERE id = :p"),
            {"p": case["payment_id"]},
        )
