"""One PostgreSQL role per service, and exactly what each may read and write.

A service taken over must not be able to write another's outbox or proposals, nor the domain
where it only reads. So every service connects as its own role (``<prefix>_<service>``): it may
read and write the tables of its own schema (the migrating role keeps ownership, so a service
cannot drop a table or the trigger that keeps the audit append-only), read the domain where it
needs to, and — the executor and the reconciler — write the domain tables the operations change.
``ACCESS`` is the whole policy, one line per service; the domain says which of its tables are its
directory and which its operations write (entry point ``signoff.privileges``, a
``DomainPrivileges``).

``apply`` runs after the migrations (``upgrade_all``): it creates or updates the roles (cluster
wide: idempotent, and retried when a concurrent migrator of another database races it), then, in
one transaction of this database, revokes what each role holds on the managed schemas and grants
the policy afresh, so a grant removed from ``ACCESS`` is removed from the database too. Default
privileges cover tables a later migration creates before ``apply`` runs again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Literal

import asyncpg
from sqlalchemy.engine import make_url

from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.settings import DatabaseSettings

DomainReads = Literal["all", "sign_in", "none"]


@dataclass(frozen=True, slots=True)
class Access:
    """What one service's role may do. ``owns``: its schema (read and write; skipped while the
    schema does not exist). ``domain``: ``all`` of the domain's tables, read-only (private columns
    excepted); ``sign_in``: the directory with its private columns (the web reads nothing else:
    what it shows comes from the services' APIs); ``none``. ``writes_domain``: the tables the
    domain's operations change."""

    owns: str
    domain: DomainReads = "none"
    writes_domain: bool = False


#: the policy (DESIGN.md, "Trust boundary"); a new owner is one line here (and its password)
ACCESS: dict[str, Access] = {
    "agent": Access(owns="agent", domain="all"),
    "proposals": Access(owns="proposals", domain="all"),
    "executor": Access(owns="executor", domain="all", writes_domain=True),
    "reconciler": Access(owns="reconciler", domain="all", writes_domain=True),
    "web": Access(owns="web", domain="sign_in"),
}


@dataclass(frozen=True, slots=True)
class DomainPrivileges:
    """A domain's part of the policy (entry point ``signoff.privileges``)."""

    schema: str
    #: the tables the directory reads (who belongs where, with which role)
    directory: tuple[str, ...]
    #: tables the operations' ``execute`` / ``begin_attempt`` / ``record`` / ``reconcile`` write
    #: (and lock: ``FOR UPDATE`` needs the UPDATE privilege)
    operations_write: tuple[str, ...] = ()
    #: columns only the sign-in may read (password hashes), by table
    private_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class RolesRefused(ValueError):
    """The roles cannot be set up as configured (a production role without its password)."""


def role_name(prefix: str, service: str) -> str:
    return f"{prefix}_{service}"


def dev_password(service: str) -> str:
    return f"{service}-dev-password"


def role_url(url: str, service: str, db: DatabaseSettings) -> str:
    """``url`` (the migrating role's) as ``service``'s own role, with its password."""
    password = db.passwords.model_dump().get(service)
    secret = password.get_secret_value() if password is not None else dev_password(service)
    target = make_url(url).set(username=role_name(db.role_prefix, service), password=secret)
    return target.render_as_string(hide_password=False)


def passwords(db: DatabaseSettings, env: str) -> dict[str, str]:
    """Each service's password; the development default is refused in production."""
    out: dict[str, str] = {}
    given = dict(db.passwords)
    for service in ACCESS:
        secret = given.get(service)
        value = secret.get_secret_value() if secret is not None else dev_password(service)
        if env == "prod" and (value == dev_password(service) or len(value) < 16):
            raise RolesRefused(
                f"SIGNOFF_DB__PASSWORDS__{service.upper()} must be set (16 characters or more, "
                "not the development default) when SIGNOFF_ENV=prod"
            )
        out[service] = value
    return out


def domains(group: str = "signoff.privileges") -> list[DomainPrivileges]:
    """Every domain's declaration. A migrations owner that is neither a service nor declared is
    refused: no service could read its tables, and nobody would notice before production."""
    found = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        declared = ep.load()
        if not isinstance(declared, DomainPrivileges):
            raise TypeError(f"entry point {group}:{ep.name} is not a DomainPrivileges")
        found.append(declared)
    owners = {ep.name for ep in entry_points(group="signoff.migrations")}
    undeclared = sorted(owners - set(ACCESS) - {ep.name for ep in entry_points(group=group)})
    if undeclared:
        raise RolesRefused(
            f"{', '.join(undeclared)}: a schema owner with no `{group}` entry point "
            "(declare its directory and the tables its operations write: DomainPrivileges)"
        )
    return found


def scram_verifier(password: str, iterations: int = 4096, salt: bytes | None = None) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores: the password itself never reaches the server
    (nor its statement log)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    stored_key = hashlib.sha256(client_key).digest()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


# -- applying it ---------------------------------------------------------------------------------

#: errors of two migrators creating or altering the same (cluster-wide) role at once
_RACES = (asyncpg.UniqueViolationError, asyncpg.DuplicateObjectError, asyncpg.InternalServerError)


async def apply(url: str, db: DatabaseSettings, env: str) -> list[str]:
    """Create or update every service's role and grant the policy in ``url``'s database (as the
    role of ``url``, which owns the schemas). Returns the roles, for the console."""
    secret, declared = passwords(db, env), domains()
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        for service in ACCESS:
            await _ensure_role(conn, role_name(db.role_prefix, service), secret[service])
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('signoff.roles'))")
            migrator = await conn.fetchval("SELECT current_user")
            statements = plan(db.role_prefix, declared, await _tables(conn), migrator)
            for statement in statements:
                await conn.execute(statement)
    finally:
        await conn.close()
    return [role_name(db.role_prefix, s) for s in ACCESS]


async def _ensure_role(conn: asyncpg.Connection, name: str, password: str) -> None:
    verifier = scram_verifier(password)
    attributes = f"LOGIN NOCREATEDB NOCREATEROLE PASSWORD '{verifier}'"
    for attempt in range(8):
        try:
            async with conn.transaction():
                exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name)
                verb = "ALTER" if exists else "CREATE"
                await conn.execute(f'{verb} ROLE "{name}" {attributes}')
            return
        except _RACES as exc:
            if isinstance(exc, asyncpg.InternalServerError) and "concurrently" not in str(exc):
                raise
            if attempt == 7:
                raise
            await asyncio.sleep(0.05 * (attempt + 1) + secrets.randbelow(50) / 1000)


async def _tables(conn: asyncpg.Connection) -> Catalog:
    """Every schema, its tables (and views), and their columns."""
    rows = await conn.fetch(
        "SELECT n.nspname, c.relname, a.attname FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1, 2, a.attnum"
    )
    found: dict[str, dict[str, list[str]]] = {
        row["nspname"]: {} for row in await conn.fetch("SELECT nspname FROM pg_namespace")
    }
    for row in rows:
        found[row["nspname"]].setdefault(row["relname"], []).append(row["attname"])
    return found


#: schema → table → columns
Catalog = Mapping[str, Mapping[str, list[str]]]


def plan(
    prefix: str, domain: Iterable[DomainPrivileges], catalog: Catalog, migrator: str
) -> list[str]:
    """The statements that make the database hold exactly ``ACCESS`` (no I/O: tested alone)."""
    domain = [d for d in domain if d.schema in catalog]
    managed = [a.owns for a in ACCESS.values() if a.owns in catalog] + [d.schema for d in domain]
    out: list[str] = []
    for service in ACCESS:
        role = _q(role_name(prefix, service))
        for schema in map(_q, managed):
            out += [
                f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}",
                f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}",
                f"REVOKE ALL ON SCHEMA {schema} FROM {role}",
                f"ALTER DEFAULT PRIVILEGES FOR ROLE {_q(migrator)} IN SCHEMA {schema} "
                f"REVOKE ALL ON TABLES FROM {role}",
                f"ALTER DEFAULT PRIVILEGES FOR ROLE {_q(migrator)} IN SCHEMA {schema} "
                f"REVOKE ALL ON SEQUENCES FROM {role}",
            ]
    for service, access in ACCESS.items():
        role = _q(role_name(prefix, service))
        if access.owns in catalog:
            out += _own(role, access.owns, catalog[access.owns], _q(migrator))
        for d in domain:
            out += _domain(role, access, d, catalog[d.schema], _q(migrator))
    return out


def _q(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


_READ_WRITE = "SELECT, INSERT, UPDATE, DELETE"


def _own(role: str, schema: str, tables: Mapping[str, list[str]], migrator: str) -> list[str]:
    s = _q(schema)
    out = [f"GRANT USAGE ON SCHEMA {s} TO {role}"]
    for table in tables:
        # the migrations' bookkeeping is the migrator's: a service only reads it
        rights = "SELECT" if table == "alembic_version" else _READ_WRITE
        out.append(f"GRANT {rights} ON {s}.{_q(table)} TO {role}")
    return [
        *out,
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {role}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA {s} "
        f"GRANT {_READ_WRITE} ON TABLES TO {role}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA {s} "
        f"GRANT USAGE, SELECT ON SEQUENCES TO {role}",
    ]


def _domain(
    role: str, access: Access, d: DomainPrivileges, tables: Mapping[str, list[str]], migrator: str
) -> list[str]:
    if access.domain == "none" and not access.writes_domain:
        return []
    s = _q(d.schema)
    out = [f"GRANT USAGE ON SCHEMA {s} TO {role}"]
    if access.domain == "all":
        for table, columns in tables.items():
            private = set(d.private_columns.get(table, ()))
            if not private:
                out.append(f"GRANT SELECT ON {s}.{_q(table)} TO {role}")
            elif public := [c for c in columns if c not in private]:
                names = ", ".join(map(_q, public))
                out.append(f"GRANT SELECT ({names}) ON {s}.{_q(table)} TO {role}")
        # tables a later migration adds are readable at once (re-applying narrows private ones)
        out.append(
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} IN SCHEMA {s} "
            f"GRANT SELECT ON TABLES TO {role}"
        )
    elif access.domain == "sign_in":
        for table in sorted(set(d.directory) & set(tables)):
            out.append(f"GRANT SELECT ON {s}.{_q(table)} TO {role}")
    if access.writes_domain:
        for table in sorted(set(d.operations_write) & set(tables)):
            out.append(f"GRANT SELECT, INSERT, UPDATE ON {s}.{_q(table)} TO {role}")
        out.append(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {role}")
    return out
