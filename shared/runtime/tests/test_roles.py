"""The database policy as statements, without a database (the insider suite runs them for real:
``tests/security/insider/test_database.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from signoff_runtime import roles
from signoff_runtime.roles import DomainPrivileges

SHOP = DomainPrivileges(
    schema="shop",
    directory=("members",),
    operations_write=("orders",),
    private_columns={"members": ("secret",)},
)
CATALOG = {
    "agent": {"alembic_version": ["version_num"], "messages": ["id"]},
    "proposals": {"outbox": ["id"]},
    "shop": {"members": ["id", "role", "secret"], "orders": ["id"], "products": ["id"]},
    "public": {},
}


def test_every_grant_follows_the_revocation_of_what_was_there() -> None:
    statements = roles.plan("p", [SHOP], CATALOG, "owner")
    last_revoke = max(i for i, s in enumerate(statements) if " REVOKE " in f" {s}")
    first_grant = min(i for i, s in enumerate(statements) if s.startswith("GRANT"))
    assert last_revoke < first_grant
    assert not any('"public"' in s for s in statements), "only the managed schemas"
    assert not any('"executor"' in s or '"web"' in s for s in statements), "absent: skipped"


def test_owners_write_their_schema_readers_skip_private_columns_writers_their_tables() -> None:
    grants = [s for s in roles.plan("p", [SHOP], CATALOG, "owner") if s.startswith("GRANT")]
    assert 'GRANT SELECT, INSERT, UPDATE, DELETE ON "agent"."messages" TO "p_agent"' in grants
    assert 'GRANT SELECT ON "agent"."alembic_version" TO "p_agent"' in grants
    assert 'GRANT SELECT ("id", "role") ON "shop"."members" TO "p_proposals"' in grants
    assert 'GRANT SELECT ON "shop"."members" TO "p_proposals"' not in grants
    assert 'GRANT SELECT ON "shop"."members" TO "p_web"' in grants
    # the web signs people in and reads nothing else of the domain
    assert not any('"shop"."products" TO "p_web"' in g for g in grants)
    assert not any('"shop"."orders" TO "p_web"' in g for g in grants)
    writes = {g for g in grants if "INSERT" in g and '"shop"' in g}
    assert writes == {
        f'GRANT SELECT, INSERT, UPDATE ON "shop"."orders" TO "p_{s}"'
        for s in ("executor", "reconciler")
    }


def test_a_schema_owner_without_privileges_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(group: str) -> list[Any]:
        if group == "signoff.migrations":
            return [SimpleNamespace(name=n) for n in ("agent", "club", "shop")]
        return [SimpleNamespace(name="club", load=lambda: SHOP)]

    monkeypatch.setattr(roles, "entry_points", lambda group: fake(group))
    with pytest.raises(roles.RolesRefused, match="shop: a schema owner"):
        roles.domains()
