"""The kit's toy domain (``signoff_conformance.toy``) as the proposals service's tests plug it in.

The service is generic; the toy stands in for a real domain (``examples/club``) so the service
can be tested on its own. In-process tests pass ``build()``'s parts to ``create_app``; process
tests name ``proposals_toy:build`` in ``SIGNOFF_PROPOSALS__TEST_PLUGIN`` with this directory on
``PYTHONPATH``. Memberships live in the toy's table, so a test can change them while a service
process is running (a member removed after their token was issued).

Two thin wrappers of the toy's ``GrantCredit``: ``ReadOnlyGrant`` refuses to resolve in a
transaction that could write (the service resolves read-only: every test that proposes says so),
and ``StampedGrant`` stamps each ``resolve`` call's own id into its arguments and preview.
"""

from __future__ import annotations

from typing import Any, ClassVar

from signoff_conformance.toy.directory import ToyDirectory
from signoff_conformance.toy.domain import GrantCredit
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Rejected, Resolved, Scope
from signoff_proposals.context import Context
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.registry import Operations
from signoff_runtime.topology import Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

STAMPED = "account.stamp_credit"


class ReadOnlyGrant(GrantCredit):
    """``GrantCredit`` that first checks it was asked in a read-only transaction."""

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        read_only = (await conn.execute(text("SHOW transaction_read_only"))).scalar_one()
        if read_only != "on":
            raise Rejected("resolve_not_read_only")
        return await super().resolve(request, scope, conn)


class StampedGrant(ReadOnlyGrant):
    """A credit whose every ``resolve`` call stamps a fresh id into both the arguments and the
    preview: equal stamps in a stored proposal prove both came from ONE call."""

    kind: ClassVar[str] = STAMPED

    class Arguments(GrantCredit.Arguments):
        resolution: str

    class Preview(GrantCredit.Preview):
        resolution: str

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        plain = await _PLAIN.resolve(request, scope, conn)  # its own models, then stamped
        stamp = new_id("res")
        return Resolved(
            self.Arguments(**plain.arguments.model_dump(), resolution=stamp),
            self.Preview(**plain.preview.model_dump(), resolution=stamp),
        )


_PLAIN = ReadOnlyGrant()


def build() -> tuple[Operations, ToyDirectory]:
    return Operations([ReadOnlyGrant(), StampedGrant()]), ToyDirectory()


def context(settings: ProposalsSettings, engine: AsyncEngine, topology: Topology) -> Context:
    """The service's context over the toy domain, for calling its code directly."""
    operations, directory = build()
    return Context(
        settings=settings,
        engine=engine,
        topology=topology,
        operations=operations,
        directory=directory,
    )
