"""The test domain's tables: boards that notes are added to (local) and charges (external), and
the members who may approve them (the directory the executor re-checks approvers with)."""

from __future__ import annotations

import secrets

from signoff_contracts.ids import new_id
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

SCHEMA = "exectest"
DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.boards (id text PRIMARY KEY, "
    "organization_id text NOT NULL, open boolean NOT NULL DEFAULT true)",
    # no unique key on contract_id: a second effect must be countable, not an error
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.notes (id bigserial PRIMARY KEY, "
    "contract_id text NOT NULL, board_id text NOT NULL, body text NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.members (user_id text NOT NULL, "
    "organization_id text NOT NULL, role text NOT NULL, PRIMARY KEY (user_id, organization_id))",
    f"INSERT INTO {SCHEMA}.members VALUES ('usr_approver', 'org_test', 'manager') "
    "ON CONFLICT DO NOTHING",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.charges (attempt_id text PRIMARY KEY, "
    "proposal_id text NOT NULL UNIQUE, idempotency_key text NOT NULL UNIQUE, "
    "board_id text NOT NULL, amount integer NOT NULL, status text NOT NULL, provider_ref text)",
    # Fault injection: a note whose body names a sequence kills its own connection during the
    # COMMIT that would store it — the first time only (sequences ignore rollbacks).
    f"CREATE OR REPLACE FUNCTION {SCHEMA}.die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN IF nextval(NEW.body::regclass) = 1 THEN "
    "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN NULL; END $$",
    f"DROP TRIGGER IF EXISTS die_at_commit ON {SCHEMA}.notes",
    f"CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON {SCHEMA}.notes "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
    f"WHEN (NEW.body LIKE '{SCHEMA}.die\\_%') EXECUTE FUNCTION {SCHEMA}.die_at_commit()",
)
ORG = "org_test"


async def create(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(4242)"))
        for statement in DDL:
            await conn.execute(text(statement))


async def commit_killer(engine: AsyncEngine) -> str:
    """A note body that makes the first COMMIT storing it lose its connection."""
    name = f"{SCHEMA}.die_{secrets.token_hex(4)}"
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE SEQUENCE {name}"))
    return name


async def new_board(engine: AsyncEngine, *, open_: bool = True) -> str:
    board_id = new_id("brd")
    async with engine.begin() as conn:
        await conn.execute(
            text(f"INSERT INTO {SCHEMA}.boards (id, organization_id, open) VALUES (:id, :org, :o)"),
            {"id": board_id, "org": ORG, "o": open_},
        )
    return board_id


async def close_board(engine: AsyncEngine, board_id: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text(f"UPDATE {SCHEMA}.boards SET open = false WHERE id = :id"), {"id": board_id}
        )


async def notes_of(engine: AsyncEngine, contract_id: str) -> int:
    async with engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    text(f"SELECT count(*) FROM {SCHEMA}.notes WHERE contract_id = :c"),
                    {"c": contract_id},
                )
            ).scalar_one()
        )


async def charge_status(engine: AsyncEngine, proposal_id: str) -> str | None:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text(f"SELECT status FROM {SCHEMA}.charges WHERE proposal_id = :p"),
                {"p": proposal_id},
            )
        ).scalar_one_or_none()


async def new_member(engine: AsyncEngine, role: str = "manager") -> str:
    """A person of the test organization with ``role``, for one test to change."""
    user_id = new_id("usr")
    async with engine.begin() as conn:
        await conn.execute(
            text(f"INSERT INTO {SCHEMA}.members VALUES (:u, :org, :r)"),
            {"u": user_id, "org": ORG, "r": role},
        )
    return user_id


async def set_role(engine: AsyncEngine, user_id: str, role: str | None) -> None:
    """Change the person's role, or (``None``) end their membership."""
    async with engine.begin() as conn:
        if role is None:
            await conn.execute(
                text(f"DELETE FROM {SCHEMA}.members WHERE user_id = :u"), {"u": user_id}
            )
        else:
            await conn.execute(
                text(f"UPDATE {SCHEMA}.members SET role = :r WHERE user_id = :u"),
                {"u": user_id, "r": role},
            )
