"""The kit's toy domain (``signoff_conformance.toy``) as the executor's tests use it.

``GrantCredit`` and ``SendVoucher`` run unchanged but for ``FaultyGrant``, a thin wrapper with
the knobs these tests turn (each off unless a contract's arguments turn it on): a delay inside
the transaction, an error of the operation's own, a connection killed at COMMIT. It also turns
the credit's own dedup off, so a second effect is a second row — the executor's dedup is what is
under test, and its negative control must be able to show a repeat.
"""

from __future__ import annotations

import secrets
from typing import Any

from signoff_conformance.toy.directory import add_member, remove_member
from signoff_conformance.toy.domain import (
    AMOUNTS,
    GrantCredit,
    close_account,
    create_schema,
    open_account,
)
from signoff_conformance.toy.vouchers import VOUCHER_CENTS, SendVoucher
from signoff_contracts.ids import new_id
from signoff_contracts.operations import ExecutionContext, Scope
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

ORG = "org_test"
#: a manager of ``ORG``: who approved a contract unless a test says otherwise
APPROVER = "usr_approver"
FAULTS = "executor_faults"
# A contract whose arguments name a sequence here kills its own connection during the COMMIT
# that would store its effect — the first time only (sequences ignore rollbacks).
FAULTS_DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {FAULTS}",
    f"CREATE TABLE IF NOT EXISTS {FAULTS}.commit_kills (sequence text NOT NULL)",
    f"CREATE OR REPLACE FUNCTION {FAULTS}.die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN IF nextval(NEW.sequence::regclass) = 1 THEN "
    "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN NULL; END $$",
    f"DROP TRIGGER IF EXISTS die_at_commit ON {FAULTS}.commit_kills",
    f"CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON {FAULTS}.commit_kills "
    f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {FAULTS}.die_at_commit()",
)
GRANT = GrantCredit.kind
VOUCHER = SendVoucher.kind


class FaultyGrant(GrantCredit):
    """``GrantCredit`` with test knobs, and without its own dedup (see the module)."""

    class Arguments(GrantCredit.Arguments):
        delay_s: float = 0.0
        explode: bool = False
        die_at_commit: str | None = None

    def __init__(self) -> None:
        self.executed = 0  # calls of `execute`, committed or not

    def dedup_key(self, ctx: ExecutionContext) -> str:
        return f"{ctx.contract_id}/{new_id('run')}"  # a fresh key: a repeat is a second credit

    async def execute(self, arguments: Any, scope: Scope, ctx: ExecutionContext, conn: Any) -> Any:
        self.executed += 1
        if arguments.delay_s:
            await conn.execute(text("SELECT pg_sleep(:s)"), {"s": arguments.delay_s})
        if arguments.explode:
            raise RuntimeError("the operation's own bug (secret detail)")
        if arguments.die_at_commit:
            await conn.execute(
                text(f"INSERT INTO {FAULTS}.commit_kills VALUES (:s)"),
                {"s": arguments.die_at_commit},
            )
        return await super().execute(arguments, scope, ctx, conn)


def grant_arguments(account_id: str, **knobs: Any) -> dict[str, Any]:
    """What ``GrantCredit.resolve`` freezes for a goodwill credit to a new (basic) account."""
    frozen = GrantCredit.Arguments(
        account_id=account_id,
        occasion="goodwill",
        plan="basic",
        amount_cents=AMOUNTS[("basic", "goodwill")],
    )
    return {**frozen.model_dump(), **knobs}


def voucher_arguments(account_id: str) -> dict[str, Any]:
    return SendVoucher.Arguments(account_id=account_id, amount_cents=VOUCHER_CENTS).model_dump()


async def create(engine: AsyncEngine) -> None:
    """The toy's tables, the fault knobs' and the default approver."""
    await create_schema(engine)
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(4243)"))
        for statement in FAULTS_DDL:
            await conn.execute(text(statement))
        await add_member(conn, ORG, "manager", APPROVER)


async def commit_killer(engine: AsyncEngine) -> str:
    """A ``die_at_commit`` value that makes the first COMMIT storing it lose its connection."""
    name = f"{FAULTS}.die_{secrets.token_hex(4)}"
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE SEQUENCE {name}"))
    return name


async def new_account(engine: AsyncEngine) -> str:
    return await open_account(engine, ORG)


async def close(engine: AsyncEngine, account_id: str) -> None:
    async with engine.begin() as conn:
        await close_account(conn, account_id)


async def credits_of(engine: AsyncEngine, contract_id: str) -> int:
    """How many credits the contract's executions committed."""
    async with engine.connect() as conn:
        return int(
            await conn.scalar(
                text("SELECT count(*) FROM conformance_toy.credits WHERE dedup_key LIKE :c"),
                {"c": f"{contract_id}/%"},
            )
            or 0
        )


async def voucher_status(engine: AsyncEngine, proposal_id: str) -> str | None:
    """The status of the proposal's voucher attempt, if one was stored."""
    async with engine.connect() as conn:
        return await conn.scalar(
            text("SELECT status FROM conformance_toy.voucher_attempts WHERE proposal_id = :p"),
            {"p": proposal_id},
        )


async def new_member(engine: AsyncEngine, role: str = "manager") -> str:
    """A person of ``ORG`` with ``role``, for one test to change."""
    async with engine.begin() as conn:
        return await add_member(conn, ORG, role)


async def set_role(engine: AsyncEngine, user_id: str, role: str | None) -> None:
    """Change the person's role, or (``None``) end their membership."""
    async with engine.begin() as conn:
        if role is None:
            await remove_member(conn, ORG, user_id)
        else:
            await add_member(conn, ORG, role, user_id)
