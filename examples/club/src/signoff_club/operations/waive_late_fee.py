"""``order.waive_late_fee``: take a late fee off an order, as a manager approved it.

A late fee is charged onto an order (``club.late_fees``, its own table, declared here beside the
only operation that changes it). Waiving it marks the fee ``waived`` and lowers the order's total
by the fee, in the executor's transaction: a local operation, the change commits with its
outcome. The model names only the fee; the amount, the order's totals and the person it is for
come from the rows. The preview rests on the fee still being charged, at that amount, on an order
whose total has not moved since — each re-checked, locked, before anything changes
(``late_fee_already_waived``, ``amount_changed``, ``order_total_changed``).

Waiving is idempotent by proposal id: the fee remembers ``waived_proposal_id``, and a repeated
execute returns the same result without lowering the total again.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
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
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Table,
    Text,
    func,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t
from signoff_club.domain import format_money

late_fees = Table(
    "late_fees",
    t.metadata,
    Column("id", Text, primary_key=True),
    Column("order_id", Text, ForeignKey("club.orders.id"), nullable=False),
    Column("description", Text, nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("status", Text, nullable=False, server_default="charged"),
    Column("waived_proposal_id", Text, nullable=True, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint("amount_cents > 0", name="late_fees_amount"),
    CheckConstraint("status IN ('charged', 'waived')", name="late_fees_status"),
    Index("late_fees_order", "order_id"),
)
RECHECKED = ("late_fee_charged", "late_fee_amount", "order_total")


class WaiveRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    late_fee_id: str = Field(
        min_length=1, max_length=72, description="The late fee (lfe_…) on this order to waive."
    )


class WaiveArguments(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    order_id: str
    late_fee_id: str
    amount_cents: int = Field(gt=0)
    currency: str
    order_total_cents: int = Field(ge=0)


class WaivePreview(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    participant_name: str
    description: str
    amount_cents: int
    currency: str
    current_order_total_cents: int
    resulting_order_total_cents: int


class WaiveResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    late_fee_id: str
    amount_cents: int
    currency: str
    resulting_order_total_cents: int
    rechecked: tuple[str, ...] = ()


_TEXT: dict[Locale, dict[str, str]] = {
    "en": {
        "title": "Waive a late fee",
        "participant": "Participant",
        "fee": "Late fee",
        "amount": "Amount waived",
        "current_total": "Order total now",
        "resulting_total": "Order total after",
        "done": "Waived the late fee of {amount} ({fee}); the order total is now {total}.",
    },
    "fr": {
        "title": "Annuler des frais de retard",
        "participant": "Participant",
        "fee": "Frais de retard",
        "amount": "Montant annulé",
        "current_total": "Total actuel de la commande",
        "resulting_total": "Total de la commande après",
        "done": "Frais de retard de {amount} annulés ({fee}) ; le total est maintenant {total}.",
    },
}

REASONS: dict[str, dict[Locale, str]] = {
    "late_fee_not_found": {
        "en": "This late fee was not found on the order.",
        "fr": "Ces frais de retard sont introuvables sur la commande.",
    },
    "late_fee_already_waived": {
        "en": "This late fee has already been waived.",
        "fr": "Ces frais de retard ont déjà été annulés.",
    },
    "amount_changed": {
        "en": "The late fee is now {current_cents} cents instead of {previous_cents}.",
        "fr": "Les frais sont maintenant de {current_cents} cents au lieu de {previous_cents}.",
    },
    "order_total_changed": {
        "en": "The order total changed after this was prepared.",
        "fr": "Le total de la commande a changé depuis la préparation.",
    },
}


class WaiveLateFee(LocalOperation[WaiveRequest, WaiveArguments, WaivePreview, WaiveResult]):
    kind: ClassVar[str] = "order.waive_late_fee"
    version: ClassVar[int] = 1
    section: ClassVar[str] = "orders"
    resource: ClassVar[str] = "order"
    summary: ClassVar[str] = "Waive a late fee charged on an order, lowering its total."
    Request = WaiveRequest
    Arguments = WaiveArguments
    Preview = WaivePreview
    Result = WaiveResult
    reasons = REASONS
    #: granted to the executor (privileges.py)
    writes: ClassVar[tuple[str, ...]] = (late_fees.name, t.orders.name)

    async def resolve(
        self, request: WaiveRequest, scope: Scope, conn: AsyncConnection
    ) -> Resolved[WaiveArguments, WaivePreview]:
        fee = await _fee(conn, scope, request.late_fee_id, lock=False)
        if fee is None:
            raise Rejected("late_fee_not_found")
        if fee.status != "charged":
            raise Rejected("late_fee_already_waived")
        arguments = WaiveArguments(
            order_id=fee.order_id,
            late_fee_id=fee.id,
            amount_cents=fee.amount_cents,
            currency=fee.currency,
            order_total_cents=fee.total_cents,
        )
        preview = WaivePreview(
            participant_name=fee.participant_name,
            description=fee.description,
            amount_cents=fee.amount_cents,
            currency=fee.currency,
            current_order_total_cents=fee.total_cents,
            resulting_order_total_cents=max(0, fee.total_cents - fee.amount_cents),
        )
        return Resolved(arguments, preview)

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role == "manager" and actor.organization_id == scope.organization_id

    async def revalidate(
        self, arguments: WaiveArguments, scope: Scope, conn: AsyncConnection
    ) -> Reason | None:
        fee = await _fee(conn, scope, arguments.late_fee_id, lock=True)
        if fee is None or fee.order_id != arguments.order_id:
            return Reason(code="late_fee_not_found")
        if fee.status != "charged":
            return Reason(code="late_fee_already_waived")
        if fee.amount_cents != arguments.amount_cents:
            return Reason(
                code="amount_changed",
                params={
                    "previous_cents": arguments.amount_cents,
                    "current_cents": fee.amount_cents,
                },
            )
        if fee.total_cents != arguments.order_total_cents:
            return Reason(code="order_total_changed")
        return None

    async def execute(
        self, arguments: WaiveArguments, scope: Scope, ctx: ExecutionContext, conn: AsyncConnection
    ) -> WaiveResult:
        f, o = late_fees, t.orders
        waived = await conn.execute(
            update(f)
            .where(f.c.id == arguments.late_fee_id, f.c.status == "charged")
            .values(status="waived", waived_proposal_id=ctx.proposal_id)
            .returning(f.c.id)
        )
        if waived.first() is not None:
            await conn.execute(
                update(o)
                .where(o.c.id == arguments.order_id)
                .values(total_cents=func.greatest(o.c.total_cents - arguments.amount_cents, 0))
            )
        total = await conn.scalar(select(o.c.total_cents).where(o.c.id == arguments.order_id))
        return WaiveResult(
            late_fee_id=arguments.late_fee_id,
            amount_cents=arguments.amount_cents,
            currency=arguments.currency,
            resulting_order_total_cents=int(total or 0),
            rechecked=RECHECKED,
        )

    def render_preview(self, preview: WaivePreview, locale: Locale) -> RenderedPreview:
        text = _TEXT[locale]
        values = {
            "participant": preview.participant_name,
            "fee": preview.description,
            "amount": format_money(preview.amount_cents, preview.currency, locale),
            "current_total": format_money(
                preview.current_order_total_cents, preview.currency, locale
            ),
            "resulting_total": format_money(
                preview.resulting_order_total_cents, preview.currency, locale
            ),
        }
        lines = [PreviewLine(label=text[key], value=value) for key, value in values.items()]
        return RenderedPreview(title=text["title"], lines=lines)

    def render_result(self, result: WaiveResult, locale: Locale) -> str:
        return _TEXT[locale]["done"].format(
            amount=format_money(result.amount_cents, result.currency, locale),
            fee=result.late_fee_id,
            total=format_money(result.resulting_order_total_cents, result.currency, locale),
        )


async def _fee(conn: AsyncConnection, scope: Scope, late_fee_id: str, *, lock: bool) -> Any:
    """The fee on the scope's order, within the scope's organization (locked with its order)."""
    f, o, p = late_fees, t.orders, t.participants
    query = (
        select(
            f.c.id,
            f.c.order_id,
            f.c.description,
            f.c.amount_cents,
            f.c.status,
            o.c.currency,
            o.c.total_cents,
            p.c.name.label("participant_name"),
        )
        .join(o, o.c.id == f.c.order_id)
        .join(p, p.c.id == o.c.participant_id)
        .where(
            f.c.id == late_fee_id,
            o.c.id == scope.resource_id,
            o.c.organization_id == scope.organization_id,
        )
    )
    if lock:
        query = query.with_for_update(of=[f, o])
    return (await conn.execute(query)).first()
