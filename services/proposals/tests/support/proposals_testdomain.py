"""A tiny domain for the proposals service's tests: one operation and a table-backed directory.

The service is generic; these stand in for a real domain (``examples/club``) so the service can
be tested on its own. In-process tests pass ``build()``'s parts to ``create_app``; process tests
name ``proposals_testdomain:build`` in ``SIGNOFF_PROPOSALS__TEST_PLUGIN`` with this directory on
``PYTHONPATH``. Memberships live in a table of the test database, so a test can change them
while a service process is running (a member removed after their token was issued).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    Actor,
    ExecutionContext,
    Locale,
    LocalOperation,
    Membership,
    PreviewLine,
    Rejected,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.reasons import Reason
from signoff_contracts.roster import Contact
from signoff_runtime.registry import Operations
from sqlalchemy import text

MEMBERS_DDL = (
    "CREATE SCHEMA IF NOT EXISTS proposals_testing; "
    "CREATE TABLE IF NOT EXISTS proposals_testing.members ("
    " user_id text NOT NULL, organization_id text NOT NULL, role text NOT NULL,"
    " PRIMARY KEY (user_id, organization_id))"
)
APPROVER_ROLES = frozenset({"admin", "manager"})
#: a resource the operation's ``resolve`` refuses (``Rejected("member_not_found")``)
MISSING_MEMBER = "usr_missing"
#: more points than ``resolve`` grants at once (``Rejected("points_over_budget")``)
BUDGET = 5000


class GrantRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    points: int = Field(ge=1, le=10_000)


class GrantArguments(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    member_id: str
    points: int = Field(ge=1, le=10_000)


class GrantPreview(BaseModel):
    model_config = ConfigDict(frozen=True)
    member_id: str
    points: int


class GrantResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    balance: int


class GrantPoints(LocalOperation[GrantRequest, GrantArguments, GrantPreview, GrantResult]):
    kind: ClassVar[str] = "points.grant"
    version: ClassVar[int] = 1
    section: ClassVar[str] = "members"
    resource: ClassVar[str] = "member"
    summary: ClassVar[str] = "Grant loyalty points to a member."
    ttl: ClassVar[timedelta] = timedelta(hours=1)
    Request = GrantRequest
    Arguments: ClassVar[type[GrantArguments]] = GrantArguments
    Preview: ClassVar[type[GrantPreview]] = GrantPreview
    Result = GrantResult
    policy_facts: ClassVar[tuple[str, ...]] = ("points",)

    async def resolve(
        self, request: GrantRequest, scope: Scope, conn: Any
    ) -> Resolved[GrantArguments, GrantPreview]:
        # the proposals service resolves in a read-only transaction: make every test say so
        read_only = (await conn.execute(text("SHOW transaction_read_only"))).scalar_one()
        if read_only != "on":
            raise Rejected("resolve_not_read_only")
        if scope.resource_id == MISSING_MEMBER:
            raise Rejected("member_not_found", member_id=scope.resource_id)
        if request.points > BUDGET:
            raise Rejected("points_over_budget", budget=BUDGET)
        args = GrantArguments(member_id=scope.resource_id, points=request.points)
        return Resolved(args, GrantPreview(member_id=scope.resource_id, points=request.points))

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role in APPROVER_ROLES

    async def revalidate(self, arguments: GrantArguments, scope: Scope, conn: Any) -> Reason | None:
        return None

    def render_preview(self, preview: GrantPreview, locale: Locale) -> RenderedPreview:
        return RenderedPreview(
            title=f"Grant {preview.points} points",
            lines=[PreviewLine(label="member", value=preview.member_id)],
        )

    def render_result(self, result: GrantResult, locale: Locale) -> str:
        return f"Balance: {result.balance} points"

    async def execute(
        self, arguments: GrantArguments, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> GrantResult:
        return GrantResult(balance=arguments.points)


class StampedArguments(GrantArguments):
    resolution: str


class StampedPreview(GrantPreview):
    resolution: str


class StampedGrant(GrantPoints):
    """``points.grant`` whose every ``resolve`` call stamps a fresh id into both the arguments
    and the preview: equal stamps in a stored proposal prove both came from ONE call."""

    kind: ClassVar[str] = "points.stamp"
    Arguments = StampedArguments
    Preview = StampedPreview

    async def resolve(  # type: ignore[override]
        self, request: GrantRequest, scope: Scope, conn: Any
    ) -> Resolved[StampedArguments, StampedPreview]:
        plain = await super().resolve(request, scope, conn)
        stamp = new_id("res")
        return Resolved(
            StampedArguments(**plain.arguments.model_dump(), resolution=stamp),
            StampedPreview(**plain.preview.model_dump(), resolution=stamp),
        )


class TableDirectory:
    """Memberships from ``proposals_testing.members`` on the caller's connection."""

    async def membership(self, conn: Any, user_id: str, organization_id: str) -> Membership | None:
        row = (
            await conn.execute(
                text(
                    "SELECT role FROM proposals_testing.members "
                    "WHERE user_id = :u AND organization_id = :o"
                ),
                {"u": user_id, "o": organization_id},
            )
        ).first()
        if row is None:
            return None
        return Membership(user_id=user_id, organization_id=organization_id, role=row.role)

    async def memberships(self, conn: Any, user_id: str) -> list[Membership]:
        rows = await conn.execute(
            text("SELECT organization_id, role FROM proposals_testing.members WHERE user_id = :u"),
            {"u": user_id},
        )
        return [
            Membership(user_id=user_id, organization_id=r.organization_id, role=r.role)
            for r in rows
        ]

    async def contacts(self, conn: Any, organization_id: str) -> list[Contact]:
        """Every member, reached at ``<user_id>@example.test``."""
        rows = await conn.execute(
            text(
                "SELECT user_id, role FROM proposals_testing.members "
                "WHERE organization_id = :o ORDER BY user_id"
            ),
            {"o": organization_id},
        )
        return [
            Contact(
                user_id=r.user_id,
                organization_id=organization_id,
                role=r.role,
                email=f"{r.user_id}@example.test",
            )
            for r in rows
        ]


def build() -> tuple[Operations, TableDirectory]:
    return Operations([GrantPoints(), StampedGrant()]), TableDirectory()
