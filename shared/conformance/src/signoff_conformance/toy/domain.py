"""The kit's toy domain: accounts that can be granted a plan credit (and, in ``vouchers``, sent a
voucher through a provider), and the members who may decide (``directory``) — one small domain
with a correct local and a correct external operation, for the kit's own tests, signoff's
services' tests, and as a worked example for adopters.

Its tables live in schema ``conformance_toy``, created with plain SQL by ``create_schema`` (no
registered migration and no entry point: the toy must never reach a real service). The kit's
self-test breaks each operation one promise at a time (``shared/conformance/tests``) and shows
that exactly the matching check fails.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    Actor,
    ExecutionContext,
    Locale,
    LocalOperation,
    PreviewLine,
    Rejected,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.reasons import Reason
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

SCHEMA_SQL = (
    "CREATE SCHEMA IF NOT EXISTS conformance_toy",
    """CREATE TABLE IF NOT EXISTS conformance_toy.accounts (
        id text PRIMARY KEY, organization_id text NOT NULL, name text NOT NULL,
        plan text NOT NULL, status text NOT NULL DEFAULT 'open')""",
    """CREATE TABLE IF NOT EXISTS conformance_toy.credits (
        id text PRIMARY KEY, dedup_key text NOT NULL UNIQUE,
        account_id text NOT NULL REFERENCES conformance_toy.accounts (id),
        amount_cents integer NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS conformance_toy.voucher_attempts (
        id text PRIMARY KEY, proposal_id text NOT NULL UNIQUE, idempotency_key text NOT NULL,
        account_id text NOT NULL, status text NOT NULL, code text,
        created_at timestamptz NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS conformance_toy.members (
        user_id text NOT NULL, organization_id text NOT NULL, role text NOT NULL,
        PRIMARY KEY (user_id, organization_id))""",
)
#: the roles that may ask for and decide the toy's operations (a viewer may only look)
APPROVER_ROLES = frozenset({"admin", "manager"})
SECTION = "billing"
AMOUNTS = {
    ("basic", "goodwill"): 500,
    ("basic", "outage"): 1000,
    ("pro", "goodwill"): 2000,
    ("pro", "outage"): 4000,
}
LABELS: dict[Locale, dict[str, str]] = {
    "en": {
        "title": "Credit {amount} to {name}",
        "plan": "Plan",
        "occasion": "Occasion",
        "goodwill": "Goodwill gesture",
        "outage": "Service outage",
    },
    "fr": {
        "title": "Crédit de {amount} pour {name}",
        "plan": "Formule",
        "occasion": "Motif",
        "goodwill": "Geste commercial",
        "outage": "Panne de service",
    },
}


async def create_schema(engine: AsyncEngine) -> None:
    """The toy's tables, created if missing (safe to call from every test and process)."""
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(4242)"))
        for statement in SCHEMA_SQL:
            await conn.execute(text(statement))


async def add_account(conn: AsyncConnection, organization_id: str, name: str) -> str:
    account_id = new_id("acc")
    await conn.execute(
        text(
            "INSERT INTO conformance_toy.accounts (id, organization_id, name, plan) "
            "VALUES (:id, :org, :name, 'basic')"
        ),
        {"id": account_id, "org": organization_id, "name": name},
    )
    return account_id


async def open_account(
    engine: AsyncEngine, organization_id: str, name: str = "Ada's Bakery"
) -> str:
    """A new open ``basic`` account of ``organization_id``, committed."""
    async with engine.begin() as conn:
        return await add_account(conn, organization_id, name)


async def close_account(conn: AsyncConnection, account_id: str) -> None:
    """A stale fact for a pending proposal: the account closed since."""
    await conn.execute(
        text("UPDATE conformance_toy.accounts SET status = 'closed' WHERE id = :id"),
        {"id": account_id},
    )


async def change_plan(conn: AsyncConnection, account_id: str, plan: str) -> None:
    """A stale fact for a pending credit: the plan (and with it the amount) changed since."""
    await conn.execute(
        text("UPDATE conformance_toy.accounts SET plan = :plan WHERE id = :id"),
        {"id": account_id, "plan": plan},
    )


def account_scope(organization_id: str, account_id: str) -> Scope:
    """Where a toy proposal about ``account_id`` acts."""
    return Scope(organization_id=organization_id, section=SECTION, resource_id=account_id)


def grant_request(account_id: str, /, **fields: Any) -> dict[str, Any]:
    """A ``GrantCredit`` request (JSON-shaped): a goodwill credit, ``fields`` changed."""
    return {"account_id": account_id, "occasion": "goodwill", **fields}


def may_decide(actor: Actor, scope: Scope) -> bool:
    return actor.organization_id == scope.organization_id and actor.role in APPROVER_ROLES


async def find_account(
    conn: AsyncConnection, account_id: str, organization_id: str | None, *, lock: bool = False
) -> Any:
    """The account, looked up within ``organization_id`` (``None`` = anywhere: a leak)."""
    where = "id = :id" + (" AND organization_id = :org" if organization_id else "")
    result = await conn.execute(
        text(
            f"SELECT * FROM conformance_toy.accounts WHERE {where}"  # noqa: S608 (two fixed forms)
            + (" FOR UPDATE" if lock else "")
        ),
        {"id": account_id, "org": organization_id},
    )
    return result.mappings().first()


def euros(cents: int) -> str:
    return f"€{cents // 100}.{cents % 100:02d}"


class GrantCredit(LocalOperation[Any, Any, Any, Any]):
    kind = "account.grant_credit"
    version = 1
    section = SECTION
    resource = "account"
    summary = "Grant an account the credit its plan gives for an occasion."
    #: decided while the customer is still on the line, or not at all
    ttl: ClassVar[timedelta] = timedelta(hours=1)
    #: "credits over €10 need two managers"
    policy_facts: ClassVar[tuple[str, ...]] = ("amount_cents",)
    reasons: ClassVar[dict[str, dict[Locale, str]]] = {
        "account_not_found": {"en": "No such account.", "fr": "Compte introuvable."},
        "account_closed": {"en": "The account is closed.", "fr": "Le compte est fermé."},
        "plan_changed": {"en": "The plan changed.", "fr": "La formule a changé."},
    }

    class Request(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        account_id: str
        occasion: Literal["goodwill", "outage"]
        note: str = ""

    class Arguments(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")
        account_id: str
        occasion: Literal["goodwill", "outage"]
        plan: str
        amount_cents: int

    class Preview(BaseModel):
        model_config = ConfigDict(frozen=True)
        account_name: str
        plan: str
        occasion: Literal["goodwill", "outage"]
        amount_cents: int

    class Result(BaseModel):
        model_config = ConfigDict(frozen=True)
        credit_id: str
        amount_cents: int

    lookup_organization: ClassVar[bool] = True

    async def resolve(self, request: Any, scope: Scope, conn: Any) -> Resolved[Any, Any]:
        org = scope.organization_id if self.lookup_organization else None
        account = await find_account(conn, request.account_id, org)
        if account is None:
            # the id the request named, so the model can say which; the same answer whether it
            # exists in another organization or nowhere
            raise Rejected("account_not_found", account_id=request.account_id)
        if account["status"] != "open":
            raise Rejected("account_closed")
        amount = AMOUNTS[(account["plan"], request.occasion)]
        return Resolved(
            arguments=self.Arguments(
                account_id=account["id"],
                occasion=request.occasion,
                plan=account["plan"],
                amount_cents=amount,
            ),
            preview=self.Preview(
                account_name=account["name"],
                plan=account["plan"],
                occasion=request.occasion,
                amount_cents=amount,
            ),
        )

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return may_decide(actor, scope)

    async def revalidate(self, arguments: Any, scope: Scope, conn: Any) -> Reason | None:
        account = await find_account(conn, arguments.account_id, scope.organization_id, lock=True)
        if account is None:
            return Reason(code="account_not_found")
        if account["status"] != "open":
            return Reason(code="account_closed")
        if account["plan"] != arguments.plan:
            return Reason(code="plan_changed", params={"plan": account["plan"]})
        return None

    def dedup_key(self, ctx: ExecutionContext) -> str:
        return ctx.proposal_id

    async def execute(self, arguments: Any, scope: Scope, ctx: ExecutionContext, conn: Any) -> Any:
        key = self.dedup_key(ctx)
        await conn.execute(
            text(
                "INSERT INTO conformance_toy.credits (id, dedup_key, account_id, amount_cents) "
                "VALUES (:id, :key, :account, :amount) ON CONFLICT (dedup_key) DO NOTHING"
            ),
            {
                "id": new_id("crd"),
                "key": key,
                "account": arguments.account_id,
                "amount": arguments.amount_cents,
            },
        )
        credit_id = await conn.scalar(
            text("SELECT id FROM conformance_toy.credits WHERE dedup_key = :key"), {"key": key}
        )
        return self.Result(credit_id=credit_id, amount_cents=arguments.amount_cents)

    def render_preview(self, preview: Any, locale: Locale) -> RenderedPreview:
        labels = LABELS[locale]
        title = labels["title"].format(
            amount=euros(preview.amount_cents), name=preview.account_name
        )
        return RenderedPreview(
            title=title,
            lines=[
                PreviewLine(label=labels["plan"], value=preview.plan),
                PreviewLine(label=labels["occasion"], value=labels[preview.occasion]),
            ],
        )

    def render_result(self, result: Any, locale: Locale) -> str:
        said = {"en": "Granted {amount} ({id}).", "fr": "Crédit de {amount} accordé ({id})."}
        return said[locale].format(amount=euros(result.amount_cents), id=result.credit_id)
