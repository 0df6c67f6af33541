"""The club's part of the database policy (``signoff_runtime.roles``), entry point
``signoff.privileges``: which tables are its directory, which its operations write, which
columns only the sign-in reads.

Each operation declares the tables it writes (its ``writes``); the executor and the reconciler
are granted exactly their union.

Every service role that reads the domain reads it whole, except ``users.password_hash``: only the
web, which signs people in, reads that. The executor and the reconciler write exactly the tables
the operations declare; the end-to-end tests run every service as its own role, so a table an
operation starts writing without declaring it fails there, not in production.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from signoff_runtime.roles import DomainPrivileges

from signoff_club import tables as t


def _written_by_operations() -> tuple[str, ...]:
    """The tables the club's registered operations declare they write (``writes``), so a new
    operation's own table is granted to the executor without an edit here."""
    found: dict[str, None] = {}
    for ep in entry_points(group="signoff.operations"):
        if ep.value.startswith("signoff_club."):
            found |= dict.fromkeys(getattr(ep.load(), "writes", ()))
    return tuple(found)


PRIVILEGES = DomainPrivileges(
    schema=t.SCHEMA,
    directory=(t.organizations.name, t.users.name, t.memberships.name),
    operations_write=_written_by_operations(),
    private_columns={t.users.name: ("password_hash",)},
)
