"""The club data the proposals act on, made fast: one organization, one broadcast form each.

``email_broadcast.apply_draft`` fails closed with ``broadcast_changed`` once another draft has
moved the form's revision, so every proposal gets a form of its own and every execution
succeeds. Forms are written with ``COPY`` (thousands per second); the organization, its manager
and its segments come from the domain's demo seed, asked as an operator would
(``signoff demo seed``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
from signoff_contracts.ids import new_id
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import issue_token

KIND = "email_broadcast.apply_draft"
#: the card-provider operation of the executor scaling batches (the provider answers late)
REFUND = "order.refund_missing_discount"
PROPOSE_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class Club:
    organization_id: str
    manager_id: str
    segment_ids: list[str]
    token: str
    #: the demo's refund case (order, payment, line item, discount), cloned per proposal
    refund_case: dict[str, str]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def seed_club(env: dict[str, str]) -> Club:
    """The first organization ``signoff demo seed`` makes in the stack's database (``env``)."""
    argv = [sys.executable, "-c", "from signoff_cli.main import main; main()", "demo", "seed"]
    done = await asyncio.to_thread(
        subprocess.run,
        argv,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"signoff demo seed failed ({done.returncode}): {done.stderr[-2000:]}")
    org: dict[str, Any] = json.loads(done.stdout)["organizations"][0]
    manager = org["users"]["manager"]["id"]
    return Club(
        organization_id=org["id"],
        manager_id=manager,
        segment_ids=list(org["broadcast_case"]["segment_ids"]),
        token=issue_token(AuthSettings(), manager, org["id"]),
        refund_case=dict(org["refund_case"]),
    )


async def add_forms(conn: asyncpg.Connection, organization_id: str, count: int) -> list[str]:
    ids = [new_id("brd") for _ in range(count)]
    await conn.copy_records_to_table(
        "broadcast_forms",
        schema_name="club",
        columns=["id", "organization_id", "name"],
        records=[(fid, organization_id, f"Bench broadcast {i}") for i, fid in enumerate(ids)],
    )
    return ids


def draft(index: int, segment_ids: list[str]) -> dict[str, Any]:
    return {
        "segment_ids": segment_ids,
        "subject": f"Spring bonspiel — sign-up opens ({index})",
        "body": "Teams of four, all levels welcome. " * 8,
    }


async def propose_all(agent_url: str, club: Club, form_ids: list[str]) -> list[str]:
    """One proposal per form through ``POST /v1/operations/{kind}/propose``; their ids."""
    found: list[str] = []
    pending = iter(enumerate(form_ids))
    async with httpx.AsyncClient(base_url=agent_url, headers=club.headers, timeout=30) as http:

        async def worker() -> None:
            for index, form_id in pending:
                response = await http.post(
                    f"/v1/operations/{KIND}/propose",
                    json={"resource_id": form_id, "request": draft(index, club.segment_ids)},
                )
                if response.status_code != 201:
                    raise RuntimeError(f"propose answered {response.status_code}: {response.text}")
                found.append(response.json()["proposal"]["id"])

        await asyncio.gather(*(worker() for _ in range(PROPOSE_CONCURRENCY)))
    return found


async def add_refund_cases(conn: asyncpg.Connection, case: dict[str, str], count: int) -> list[str]:
    """``count`` copies of the demo's refund case (an order whose discount was never applied,
    paid by card), each with ids of its own; their order ids."""
    order = await conn.fetchrow("SELECT * FROM club.orders WHERE id = $1", case["order_id"])
    lines = await conn.fetch("SELECT * FROM club.line_items WHERE order_id = $1", order["id"])
    links = await conn.fetch(
        "SELECT line_item_id, discount_id, applied FROM club.line_item_discounts "
        "WHERE line_item_id = ANY($1::text[])",
        [r["id"] for r in lines],
    )
    payment = await conn.fetchrow("SELECT * FROM club.payments WHERE id = $1", case["payment_id"])
    orders, items, discounts, payments = [], [], [], []
    for _ in range(count):
        oid = new_id("ord")
        orders.append(
            (
                oid,
                order["organization_id"],
                order["participant_id"],
                order["currency"],
                order["total_cents"],
            )
        )
        renamed = {r["id"]: new_id("lin") for r in lines}
        items += [
            (
                renamed[r["id"]],
                oid,
                r["product_id"],
                r["quantity"],
                r["unit_price_cents"],
                r["amount_cents"],
            )
            for r in lines
        ]
        discounts += [(renamed[r["line_item_id"]], r["discount_id"], r["applied"]) for r in links]
        payments.append(
            (
                new_id("pay"),
                oid,
                payment["method"],
                payment["amount_cents"],
                f"{payment['provider_ref']}_{oid}",
                payment["card_last4"],
            )
        )
    for table, columns, records in (
        ("orders", ["id", "organization_id", "participant_id", "currency", "total_cents"], orders),
        (
            "line_items",
            ["id", "order_id", "product_id", "quantity", "unit_price_cents", "amount_cents"],
            items,
        ),
        ("line_item_discounts", ["line_item_id", "discount_id", "applied"], discounts),
        (
            "payments",
            ["id", "order_id", "method", "amount_cents", "provider_ref", "card_last4"],
            payments,
        ),
    ):
        await conn.copy_records_to_table(
            table, schema_name="club", columns=columns, records=records
        )
    return [o[0] for o in orders]


async def propose_refunds(
    agent_url: str, club: Club, conn: asyncpg.Connection, order_ids: list[str]
) -> list[str]:
    """One card refund proposal per order (``order.refund_missing_discount``); their ids."""
    rows = await conn.fetch(
        "SELECT p.order_id, p.id AS payment_id, l.id AS line_item_id, d.discount_id "
        "FROM club.payments p JOIN club.line_items l ON l.order_id = p.order_id "
        "JOIN club.line_item_discounts d ON d.line_item_id = l.id AND NOT d.applied "
        "WHERE p.order_id = ANY($1::text[])",
        order_ids,
    )
    found: list[str] = []
    pending = iter(rows)
    async with httpx.AsyncClient(base_url=agent_url, headers=club.headers, timeout=30) as http:

        async def worker() -> None:
            for r in pending:
                request = {
                    "payment_id": r["payment_id"],
                    "line_item_id": r["line_item_id"],
                    "discount_id": r["discount_id"],
                    "destination": "original_payment_method",
                }
                response = await http.post(
                    f"/v1/operations/{REFUND}/propose",
                    json={"resource_id": r["order_id"], "request": request},
                )
                if response.status_code != 201:
                    raise RuntimeError(f"propose answered {response.status_code}: {response.text}")
                found.append(response.json()["proposal"]["id"])

        await asyncio.gather(*(worker() for _ in range(PROPOSE_CONCURRENCY)))
    return found
