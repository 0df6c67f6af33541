"""The club's two assistants: one on an order, one on a broadcast form.

Each is confined to its section. The order assistant reads ONE order's investigation (scoped by
the server to the conversation's organization and order) and may propose
``order.refund_missing_discount``; the email assistant lists the organization's segments,
counts an audience and may propose ``email_broadcast.apply_draft``. Neither sees the other's
tools, a tenant id, a provider reference or a segment's internal filter.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from signoff_contracts.assistants import (
    Assistant,
    NoParameters,
    ProposeTool,
    ReadTool,
    ResourceItem,
)
from signoff_contracts.operations import Locale, Scope
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import read_model
from signoff_club import tables as t
from signoff_club.domain import format_money

SegmentId = Annotated[str, StringConstraints(min_length=1, max_length=72)]


class OrderInvestigation(ReadTool[NoParameters]):
    name: ClassVar[str] = "get_order_investigation"
    description: ClassVar[str] = (
        "Read the order this conversation is about: its participant, line items, the discounts "
        "each line should have had (and whether each was applied), payments with what is left "
        "to refund, and refunds so far. Amounts are in cents."
    )

    async def run(self, conn: AsyncConnection, scope: Scope, args: NoParameters) -> dict[str, Any]:
        found = await read_model.order_investigation(conn, scope)
        return found or {"error": {"code": "order_not_found"}}


class ListSegments(ReadTool[NoParameters]):
    name: ClassVar[str] = "list_segments"
    description: ClassVar[str] = "List the club's audience segments with their member counts."

    async def run(self, conn: AsyncConnection, scope: Scope, args: NoParameters) -> dict[str, Any]:
        segments = await read_model.list_segments(conn, scope.organization_id)
        return {
            "segments": [
                {"id": s["id"], "name": s["name"], "member_count": s["member_count"]}
                for s in segments[:100]
            ]
        }


class AudienceParameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    segment_ids: list[SegmentId] = Field(
        min_length=1, max_length=20, description="The segments (seg_…) to count together."
    )


class CountAudience(ReadTool[AudienceParameters]):
    name: ClassVar[str] = "count_audience"
    description: ClassVar[str] = (
        "Count the distinct people in the given segments together (someone in two segments "
        "counts once)."
    )
    Parameters = AudienceParameters

    async def run(
        self, conn: AsyncConnection, scope: Scope, args: AudienceParameters
    ) -> dict[str, Any]:
        count = await read_model.count_audience(conn, scope.organization_id, args.segment_ids)
        return {"segment_ids": args.segment_ids, "audience_count": count}


_ORDER_INSTRUCTIONS: dict[Locale, str] = {
    "en": (
        "You help a club manager with one order. Read the order investigation first. If a "
        "line item should have had a discount that was never applied, propose refunding it "
        "with propose_payment_refund, naming the payment, the line item, the discount and the "
        "destination (the original payment method unless the manager asks for account "
        "credit). You do not compute amounts: the application does, and shows them on the card."
    ),
    "fr": (
        "Vous aidez un gestionnaire de club sur une commande. Lisez d'abord l'enquête sur la "
        "commande. Si un article aurait dû recevoir une remise jamais appliquée, proposez de la "
        "rembourser avec propose_payment_refund en nommant le paiement, l'article, la remise et "
        "la destination (le moyen de paiement d'origine, sauf si le gestionnaire demande un "
        "crédit au compte). Vous ne calculez aucun montant : l'application s'en charge."
    ),
}

_EMAIL_INSTRUCTIONS: dict[Locale, str] = {
    "en": (
        "You help a club manager prepare one email broadcast. List the segments, count the "
        "audience of the ones that fit, then propose a draft (segments, subject, body) with "
        "propose_email_broadcast_draft. Approving the draft only fills in the broadcast form: "
        "nothing is sent."
    ),
    "fr": (
        "Vous aidez un gestionnaire de club à préparer un envoi de courriel. Listez les "
        "segments, comptez l'audience de ceux qui conviennent, puis proposez un brouillon "
        "(segments, objet, message) avec propose_email_broadcast_draft. L'approbation remplit "
        "seulement le formulaire : rien n'est envoyé."
    ),
}


class OrderAssistant(Assistant):
    section: ClassVar[str] = "orders"
    resource: ClassVar[str] = "order"
    title = {"en": "Orders", "fr": "Commandes"}
    instructions = _ORDER_INSTRUCTIONS
    read_tools = (OrderInvestigation(),)
    propose_tools = (
        ProposeTool(
            name="propose_payment_refund",
            kind="order.refund_missing_discount",
            description="Propose refunding a discount that a line item of this order should "
            "have had. A manager approves the exact refund on a card; nothing happens before.",
        ),
    )

    async def exists(self, conn: AsyncConnection, scope: Scope) -> bool:
        o = t.orders
        query = select(o.c.id).where(
            o.c.id == scope.resource_id, o.c.organization_id == scope.organization_id
        )
        return (await conn.execute(query)).first() is not None

    async def context(self, conn: AsyncConnection, scope: Scope) -> str:
        o = t.orders
        row = (
            await conn.execute(
                select(o.c.id, o.c.currency, o.c.total_cents, o.c.created_at).where(
                    o.c.id == scope.resource_id, o.c.organization_id == scope.organization_id
                )
            )
        ).first()
        if row is None:
            return "The order is no longer available."
        total = format_money(row.total_cents, row.currency, "en")
        return (
            f"Order {row.id}, placed {row.created_at.date().isoformat()}, total {total}. "
            "Use get_order_investigation for its details."
        )

    async def resources(
        self, conn: AsyncConnection, organization_id: str, locale: Locale, limit: int
    ) -> list[ResourceItem]:
        o, p = t.orders, t.participants
        rows = await conn.execute(
            select(o.c.id, o.c.currency, o.c.total_cents, p.c.name)
            .join_from(o, p, p.c.id == o.c.participant_id)
            .where(o.c.organization_id == organization_id)
            .order_by(o.c.created_at.desc(), o.c.id)
            .limit(limit)
        )
        total = _TOTAL[locale]
        return [
            ResourceItem(
                id=r.id, label=f"{r.name} · {r.id} · {total} {_money(r.total_cents, r, locale)}"
            )
            for r in rows
        ]


_TOTAL: dict[Locale, str] = {"en": "Total", "fr": "Total"}


def _money(cents: int, row: Any, locale: Locale) -> str:
    return format_money(cents, row.currency, locale)


class EmailAssistant(Assistant):
    section: ClassVar[str] = "email"
    resource: ClassVar[str] = "broadcast"
    title = {"en": "Email broadcasts", "fr": "Envois de courriels"}
    instructions = _EMAIL_INSTRUCTIONS
    read_tools = (ListSegments(), CountAudience())
    propose_tools = (
        ProposeTool(
            name="propose_email_broadcast_draft",
            kind="email_broadcast.apply_draft",
            description="Propose a draft for this broadcast form: segments, subject and body. "
            "A manager approves it on a card; approval fills in the form and sends nothing.",
        ),
    )

    async def exists(self, conn: AsyncConnection, scope: Scope) -> bool:
        b = t.broadcast_forms
        query = select(b.c.id).where(
            b.c.id == scope.resource_id, b.c.organization_id == scope.organization_id
        )
        return (await conn.execute(query)).first() is not None

    async def context(self, conn: AsyncConnection, scope: Scope) -> str:
        b = t.broadcast_forms
        row = (
            await conn.execute(
                select(b.c.name, b.c.subject, b.c.audience_count).where(
                    b.c.id == scope.resource_id, b.c.organization_id == scope.organization_id
                )
            )
        ).first()
        if row is None:
            return "The broadcast form is no longer available."
        subject = (row.subject or "(none yet)")[:200]
        return (
            f"Broadcast form “{row.name[:200]}”; current subject: {subject}; current audience: "
            f"{row.audience_count or 0} people. Use list_segments and count_audience."
        )

    async def resources(
        self, conn: AsyncConnection, organization_id: str, locale: Locale, limit: int
    ) -> list[ResourceItem]:
        b = t.broadcast_forms
        rows = await conn.execute(
            select(b.c.id, b.c.name)
            .where(b.c.organization_id == organization_id)
            .order_by(b.c.name, b.c.id)
            .limit(limit)
        )
        return [ResourceItem(id=r.id, label=r.name) for r in rows]
