"""Insider, database side: each service's role can do what its service needs and nothing else.

Every service connects as its own PostgreSQL role (``signoff_runtime.roles``), set up by the
migration step that made this test's database. For each role, a probe of every table of the
managed schemas — read, insert, update, delete — must succeed exactly where the table below
allows it and fail with ``insufficient_privilege`` everywhere else. The table is written out by
hand, not derived from ``roles.ACCESS``, so a change to the policy has to change it too.

Negative control: connected as the superuser — what every service did before it had a role, and
what ``Stack(own_roles=False)`` still does — the same attacks go through.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import AsyncIterator
from typing import Literal

import asyncpg
import pytest
import pytest_asyncio
from signoff_runtime import roles
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.settings import DatabaseSettings
from signoff_runtime.testing.processes import as_own_role
from sqlalchemy.engine import make_url

pytestmark = pytest.mark.integration

Probe = Literal["select", "insert", "update", "delete"]
PROBES: tuple[Probe, ...] = ("select", "insert", "update", "delete")
MANAGED = ("agent", "proposals", "executor", "reconciler", "club", "web")
#: what the club's operations change (refunds, their attempts, account credits, broadcast forms)
OPERATION_TABLES = {
    "refund_attempts",
    "payments",
    "refunds",
    "account_credits",
    "line_items",
    "line_item_discounts",
    "orders",
    "broadcast_forms",
    "late_fees",
}
DIRECTORY = {"organizations", "users", "memberships"}


def expected(service: str, schema: str, table: str) -> set[Probe]:
    """The policy, by hand (see the module docstring)."""
    if schema == service:
        return {"select"} if table == "alembic_version" else set(PROBES)
    if schema != "club":
        return set()
    if service == "web":
        return {"select"} if table in DIRECTORY else set()  # sign-in, nothing more
    allowed: set[Probe] = {"select"} if table != "users" else set()  # users: password_hash
    if service in ("executor", "reconciler") and table in OPERATION_TABLES:
        allowed |= {"insert", "update"}
    return allowed


def statement(probe: Probe, schema: str, table: str, first_column: str) -> str:
    """A statement the privilege check applies to, which changes nothing if allowed."""
    t = f'"{schema}"."{table}"'
    return {
        "select": f"SELECT * FROM {t} LIMIT 0",
        "insert": f"INSERT INTO {t} SELECT * FROM {t} WHERE false",
        "update": f'UPDATE {t} SET "{first_column}" = "{first_column}" WHERE false',
        "delete": f"DELETE FROM {t} WHERE false",
    }[probe]


async def allowed(conn: asyncpg.Connection, sql: str) -> bool:
    """Run ``sql`` and roll it back: ``True`` if it ran, ``False`` if refused for privilege."""
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute(sql)
        return True
    except asyncpg.InsufficientPrivilegeError:
        return False
    finally:
        await tx.rollback()


def as_role(database_url: str, service: str) -> str:
    """The URL the service's process gets (``as_own_role``: what e2e stacks and ``service_env``
    start it with); the stack's ``own_roles=False`` gives it ``database_url`` itself."""
    own = as_own_role({"SIGNOFF_DB__URL": database_url}, service)["SIGNOFF_DB__URL"]
    return asyncpg_dsn(own)


@pytest_asyncio.fixture(loop_scope="session")
async def catalog(database_url: str) -> dict[tuple[str, str], str]:
    """(schema, table) → its first column, for every table of the managed schemas."""
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        rows = await conn.fetch(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = ANY($1::text[]) AND ordinal_position = 1",
            list(MANAGED),
        )
    finally:
        await conn.close()
    return {(r["table_schema"], r["table_name"]): r["column_name"] for r in rows}


@pytest_asyncio.fixture(loop_scope="session")
async def connect(database_url: str) -> AsyncIterator[object]:
    opened: list[asyncpg.Connection] = []

    async def open_as(service: str | None) -> asyncpg.Connection:
        dsn = as_role(database_url, service) if service else asyncpg_dsn(database_url)
        conn = await asyncpg.connect(dsn)
        opened.append(conn)
        return conn

    yield open_as
    for conn in opened:
        await conn.close()


@pytest.mark.parametrize("service", sorted(roles.ACCESS))
async def test_each_role_may_do_exactly_what_its_service_needs(
    service: str, catalog: dict[tuple[str, str], str], connect: object
) -> None:
    assert {s for s, _ in catalog} >= {"agent", "proposals", "executor", "reconciler", "club"}
    conn = await connect(service)  # type: ignore[operator]
    assert await conn.fetchval("SELECT current_user") == f"signoff_{service}"
    wrong = []
    for (schema, table), first in sorted(catalog.items()):
        for probe in PROBES:
            ran = await allowed(conn, statement(probe, schema, table, first))
            if ran != (probe in expected(service, schema, table)):
                wrong.append(f"{probe} {schema}.{table}: {'allowed' if ran else 'refused'}")
    assert wrong == [], f"{service}: {wrong}"


async def test_only_the_web_reads_password_hashes(connect: object) -> None:
    for service in ("agent", "proposals", "executor", "reconciler"):
        conn = await connect(service)  # type: ignore[operator]
        assert await allowed(conn, "SELECT id, email, display_name, locale FROM club.users")
        assert not await allowed(conn, "SELECT password_hash FROM club.users")
    web = await connect("web")  # type: ignore[operator]
    assert await allowed(web, "SELECT id, password_hash FROM club.users")


#: what a taken-over service would try, by hand: (service, statement)
ATTACKS = (
    # the agent publishes a contract of its own making through the proposals outbox …
    (
        "agent",
        "INSERT INTO proposals.outbox (message_id, exchange, routing_key, message_type, body) "
        "VALUES ('msg_forged', 'contracts', 'execution.contract', 'execution.contract', "
        "'\\x7b7d'::bytea)",
    ),
    # … or approves by writing the proposal's status …
    ("agent", "UPDATE proposals.proposals SET status = 'executing'"),
    # … or reads the contracts (arguments of everyone's proposals) waiting in the outbox
    ("agent", "SELECT body FROM proposals.outbox"),
    # the web makes its person a manager
    ("web", "UPDATE club.memberships SET role = 'manager'"),
    ("web", "SELECT * FROM agent.messages"),
    # the executor reports an outcome for another service or writes the audit
    (
        "executor",
        "INSERT INTO proposals.audit (proposal_id, actor, action) "
        "SELECT id, 'usr_nobody', 'approved' FROM proposals.proposals",
    ),
    ("executor", "UPDATE club.memberships SET role = 'manager'"),
    ("reconciler", "DELETE FROM executor.outbox"),
    ("proposals", "UPDATE club.payments SET refunded_cents = 0"),
    # a service cannot lift the protections of its own tables: the audit stays append-only
    ("proposals", "ALTER TABLE proposals.audit DISABLE TRIGGER audit_append_only"),
    ("proposals", "TRUNCATE proposals.audit"),
    ("agent", "DROP TABLE agent.messages"),
    ("proposals", "SELECT * FROM executor.executions"),
)


@pytest.mark.parametrize(("service", "sql"), ATTACKS)
async def test_an_attack_is_refused_for_privilege(service: str, sql: str, connect: object) -> None:
    conn = await connect(service)  # type: ignore[operator]
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await conn.execute(sql)


async def test_negative_control_as_the_superuser_the_attacks_go_through(connect: object) -> None:
    """Without its own role (one shared superuser, as before), each attack runs. The forged
    outbox row is rolled back: it would otherwise be published by the proposals relay."""
    conn = await connect(None)  # type: ignore[operator]
    for service, sql in ATTACKS:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute(sql)  # no InsufficientPrivilegeError
        except asyncpg.PostgresError as exc:
            raise AssertionError(f"{service}'s attack failed for another reason: {exc}") from exc
        finally:
            await tx.rollback()


async def test_tables_a_later_migration_adds_follow_the_policy(
    database_url: str, connect: object
) -> None:
    """Default privileges: a table the migrating role creates later in the agent's schema is the
    agent's to write and nobody else's to read, before the roles are applied again."""
    admin = await connect(None)  # type: ignore[operator]
    table = f"agent.later_{secrets.token_hex(3)}"
    await admin.execute(f"CREATE TABLE {table} (id text PRIMARY KEY)")
    try:
        agent = await connect("agent")  # type: ignore[operator]
        await agent.execute(f"INSERT INTO {table} VALUES ('x')")
        proposals = await connect("proposals")  # type: ignore[operator]
        assert not await allowed(proposals, f"SELECT * FROM {table}")
        club = f"club.later_{secrets.token_hex(3)}"
        await admin.execute(f"CREATE TABLE {club} (id text PRIMARY KEY)")
        try:
            assert await allowed(proposals, f"SELECT * FROM {club}")
            assert not await allowed(proposals, f"INSERT INTO {club} VALUES ('x')")
        finally:
            await admin.execute(f"DROP TABLE {club}")
    finally:
        await admin.execute(f"DROP TABLE {table}")


async def test_setting_up_roles_is_idempotent_and_survives_racing_migrators(
    database_url: str,
) -> None:
    """Roles are cluster-wide: two migrators (two test workers, two fresh databases) create and
    alter the same roles at once, twice over; none fails."""
    server = make_url(database_url)
    names = [f"signoff_roles_{secrets.token_hex(4)}" for _ in range(2)]
    admin = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        for name in names:
            await admin.execute(f'CREATE DATABASE "{name}"')
        urls = [server.set(database=n).render_as_string(hide_password=False) for n in names]
        db = DatabaseSettings()
        done = await asyncio.gather(*(roles.apply(u, db, "test") for u in urls * 2))
        assert all(d == [f"signoff_{s}" for s in roles.ACCESS] for d in done)
    finally:
        for name in names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def test_production_refuses_development_role_passwords() -> None:
    with pytest.raises(roles.RolesRefused, match="SIGNOFF_DB__PASSWORDS__AGENT"):
        roles.passwords(DatabaseSettings(), "prod")
    given = {s: f"{s}-a-long-production-secret" for s in roles.ACCESS}
    production = DatabaseSettings.model_validate({"passwords": given})
    assert roles.passwords(production, "prod") == given
    assert roles.passwords(DatabaseSettings(), "dev")["web"] == "web-dev-password"


async def test_a_password_is_sent_as_the_verifier_postgresql_itself_computes(
    connect: object,
) -> None:
    """The migration step sends a SCRAM verifier, never the password; PostgreSQL, given the
    password, stores the same verifier (same salt), so the role logs in with the password."""
    admin = await connect(None)  # type: ignore[operator]
    role = f"signoff_scram_{secrets.token_hex(3)}"
    await admin.execute("SET password_encryption = 'scram-sha-256'")
    await admin.execute(f"CREATE ROLE {role} PASSWORD 'executor-dev-password'")
    try:
        stored = await admin.fetchval("SELECT rolpassword FROM pg_authid WHERE rolname = $1", role)
    finally:
        await admin.execute(f"DROP ROLE {role}")
    salt = base64.b64decode(stored.split(":")[1].split("$")[0])
    assert roles.scram_verifier("executor-dev-password", salt=salt) == stored
    assert "executor-dev-password" not in roles.scram_verifier("executor-dev-password")


def test_the_migration_step_refuses_production_without_role_passwords(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``signoff db migrate`` with SIGNOFF_ENV=prod and no role passwords: one line, exit 2,
    before anything is migrated (the database named does not even exist)."""
    import typer
    from signoff_cli.database import migrate_all
    from signoff_runtime.settings import ServiceSettings

    # built unvalidated: only the roles' own refusal is under test here
    settings = ServiceSettings.model_construct(
        env="prod", db=DatabaseSettings(url="postgresql+asyncpg://nobody@127.0.0.1:1/none")
    )
    with pytest.raises(typer.Exit) as exited:
        migrate_all(settings)
    assert exited.value.exit_code == 2
    assert "SIGNOFF_DB__PASSWORDS__AGENT must be set" in capsys.readouterr().err


def test_make_run_starts_each_service_as_its_own_role() -> None:
    from signoff_cli.dev import procfile_lines
    from signoff_runtime.settings import ServiceSettings

    settings = ServiceSettings(
        db=DatabaseSettings(url="postgresql+asyncpg://postgres@127.0.0.1:5432/signoff")
    )
    table = {name: (f"signoff serve {name}", "") for name in (*roles.ACCESS, "provider")}
    lines = dict(line.split(": ", 1) for line in procfile_lines(table, settings).splitlines())
    for service in roles.ACCESS:
        own = f"postgresql+asyncpg://signoff_{service}:{service}-dev-password@127.0.0.1:5432"
        assert lines[service].startswith(f"env SIGNOFF_DB__URL={own}/signoff "), lines[service]
    assert lines["provider"] == "signoff serve provider"
