"""``case`` fixtures for the toy operations: two organizations, an account in each.

Written the way an adopter writes theirs: fresh rows per test, stale facts that mutate through
the connection they are given, and effect counters scoped to the case's own account.
"""

from __future__ import annotations

from typing import Any

import pytest
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Actor, AttemptRef
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_conformance import ConformanceCase
from signoff_conformance.toy.domain import (
    account_scope,
    add_account,
    change_plan,
    close_account,
    create_schema,
    grant_request,
)
from signoff_conformance.toy.vouchers import PROVIDER


async def _accounts(engine: AsyncEngine) -> tuple[str, str, str]:
    """Our organization, our account, and an account of another organization."""
    await create_schema(engine)
    org, other_org = new_id("org"), new_id("org")
    async with engine.begin() as conn:
        ours = await add_account(conn, org, "Ada's Bakery")
        theirs = await add_account(conn, other_org, "Rival Bakery")
    return org, ours, theirs


def _closed(account_id: str) -> Any:
    async def mutate(conn: AsyncConnection) -> None:
        await close_account(conn, account_id)

    return mutate


def _plan_changed(account_id: str) -> Any:
    async def mutate(conn: AsyncConnection) -> None:
        await change_plan(conn, account_id, "pro")

    return mutate


def _case(
    engine: AsyncEngine,
    accounts: tuple[str, str, str],
    request: dict[str, Any],
    more_facts: dict[str, Any] | None = None,
    **hooks: Any,
) -> ConformanceCase:
    org, ours, theirs = accounts
    return ConformanceCase(
        scope=account_scope(org, ours),
        manager=Actor(user_id=new_id("usr"), organization_id=org, role="manager"),
        viewer=Actor(user_id=new_id("usr"), organization_id=org, role="viewer"),
        out_of_scope_requests={
            "another_organizations_account": {**request, "account_id": theirs},
            "unknown_account": {**request, "account_id": new_id("acc")},
        },
        stale_facts={"account_closed": _closed(ours), **(more_facts or {})},
        valid_request=request,
        engine=engine,
        **hooks,
    )


class GrantCreditCase:
    @pytest.fixture
    async def case(self, engine: AsyncEngine) -> ConformanceCase:
        accounts = await _accounts(engine)
        ours = accounts[1]
        request = grant_request(ours, note="loyal customer since 2019")

        async def count_effects() -> int:
            async with engine.connect() as conn:
                return int(
                    await conn.scalar(
                        text("SELECT count(*) FROM conformance_toy.credits WHERE account_id = :a"),
                        {"a": ours},
                    )
                    or 0
                )

        return _case(
            engine,
            accounts,
            request,
            count_effects=count_effects,
            more_facts={"plan_changed": _plan_changed(ours)},
        )


class VoucherCase:
    reconcile_within = 1.0

    @pytest.fixture
    async def case(self, engine: AsyncEngine) -> ConformanceCase:
        accounts = await _accounts(engine)
        ours = accounts[1]
        request = {"account_id": ours}

        async def count_effects() -> int:
            return PROVIDER.count(ours)

        async def lose_next_response() -> None:
            PROVIDER.lose_next = True

        async def attempt_exists(conn: AsyncConnection, attempt: AttemptRef) -> bool:
            found = await conn.scalar(
                text("SELECT 1 FROM conformance_toy.voucher_attempts WHERE id = :id"),
                {"id": attempt.attempt_id},
            )
            return found is not None

        return _case(
            engine,
            accounts,
            request,
            count_effects=count_effects,
            lose_next_response=lose_next_response,
            attempt_exists=attempt_exists,
        )
