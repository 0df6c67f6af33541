"""The club's tables (schema ``club``): who belongs where, what was sold, paid and refunded.

Money is integer cents in the order's currency, everywhere. Ids are opaque prefixed strings
(``signoff_contracts.ids.new_id``). Children of an order (line items, payments) carry no
organization of their own: every query reaches them through their order, which does, so a
scope check cannot be forgotten on one table and remembered on another.

A refund attempt is a domain record (see DESIGN.md, "Storage"): it lives here, beside the
payment it refunds, so the reservation it makes and the refund it becomes commit together.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

SCHEMA = "club"
metadata = MetaData(schema=SCHEMA)

ROLES = ("manager", "viewer")
PAYMENT_METHODS = ("card", "cash", "e_transfer")
DISCOUNT_KINDS = ("percentage", "fixed")
DESTINATIONS = ("card_refund", "account_credit", "e_transfer_return")
ATTEMPT_STATUSES = ("pending", "unknown", "succeeded", "failed", "not_applied")
#: attempts that may still turn into a refund: nobody may start another on the same payment
UNRESOLVED_ATTEMPT_STATUSES = ("pending", "unknown")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _created() -> Column[object]:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())


organizations = Table(
    "organizations",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    _created(),
)

users = Table(
    "users",
    metadata,
    Column("id", Text, primary_key=True),
    Column("email", Text, nullable=False, unique=True),
    Column("display_name", Text, nullable=False),
    Column("locale", Text, nullable=False, server_default="en"),
    Column("password_hash", Text, nullable=False),
    _created(),
    CheckConstraint("locale IN ('en', 'fr')", name="users_locale"),
    CheckConstraint("email = lower(email)", name="users_email_lower"),
)

memberships = Table(
    "memberships",
    metadata,
    Column("user_id", Text, ForeignKey("club.users.id"), nullable=False),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("role", Text, nullable=False),
    _created(),
    PrimaryKeyConstraint("user_id", "organization_id", name="memberships_pkey"),
    CheckConstraint(_in("role", ROLES), name="memberships_role"),
)

participants = Table(
    "participants",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("email", Text, nullable=True),
    _created(),
    Index("participants_organization", "organization_id"),
)

products = Table(
    "products",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("unit_price_cents", BigInteger, nullable=False),
    CheckConstraint("unit_price_cents >= 0", name="products_price"),
)

orders = Table(
    "orders",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("participant_id", Text, ForeignKey("club.participants.id"), nullable=False),
    Column("currency", Text, nullable=False),
    Column("total_cents", BigInteger, nullable=False),
    _created(),
    CheckConstraint("currency ~ '^[A-Z]{3}$'", name="orders_currency"),
    CheckConstraint("total_cents >= 0", name="orders_total"),
    Index("orders_organization", "organization_id"),
)

line_items = Table(
    "line_items",
    metadata,
    Column("id", Text, primary_key=True),
    Column("order_id", Text, ForeignKey("club.orders.id"), nullable=False),
    Column("product_id", Text, ForeignKey("club.products.id"), nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("unit_price_cents", BigInteger, nullable=False),
    #: what the line costs now: quantity x unit price, less the discounts applied to it
    Column("amount_cents", BigInteger, nullable=False),
    CheckConstraint("quantity > 0", name="line_items_quantity"),
    CheckConstraint("unit_price_cents >= 0 AND amount_cents >= 0", name="line_items_amounts"),
    Index("line_items_order", "order_id"),
)

discounts = Table(
    "discounts",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("kind", Text, nullable=False),
    #: basis points (1/100 of a percent) for ``percentage``, cents for ``fixed``
    Column("value", BigInteger, nullable=False),
    CheckConstraint(_in("kind", DISCOUNT_KINDS), name="discounts_kind"),
    CheckConstraint(
        "(kind = 'percentage' AND value BETWEEN 1 AND 10000) OR (kind = 'fixed' AND value > 0)",
        name="discounts_value",
    ),
)

line_item_discounts = Table(
    "line_item_discounts",
    metadata,
    Column("line_item_id", Text, ForeignKey("club.line_items.id"), nullable=False),
    Column("discount_id", Text, ForeignKey("club.discounts.id"), nullable=False),
    #: the discount is reflected in the line's amount (at sale, or by a refund since)
    Column("applied", Boolean, nullable=False, server_default=text("false")),
    Column("applied_proposal_id", Text, nullable=True),
    PrimaryKeyConstraint("line_item_id", "discount_id", name="line_item_discounts_pkey"),
)

payments = Table(
    "payments",
    metadata,
    Column("id", Text, primary_key=True),
    Column("order_id", Text, ForeignKey("club.orders.id"), nullable=False),
    Column("method", Text, nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("provider_ref", Text, nullable=True),
    #: a card's last four digits, as the provider reported them at the charge (shown only: a
    #: card refund's outcome names the card by them)
    Column("card_last4", Text, nullable=True),
    Column("refunded_cents", BigInteger, nullable=False, server_default=text("0")),
    #: held by refund attempts not yet concluded, so a concurrent refund cannot overdraw
    Column("reserved_cents", BigInteger, nullable=False, server_default=text("0")),
    _created(),
    CheckConstraint(_in("method", PAYMENT_METHODS), name="payments_method"),
    CheckConstraint("(method = 'card') = (provider_ref IS NOT NULL)", name="payments_card_ref"),
    CheckConstraint(
        "card_last4 IS NULL OR card_last4 ~ '^[0-9]{4}$'",
        name="payments_card_last4",
    ),
    CheckConstraint(
        "amount_cents > 0 AND refunded_cents >= 0 AND reserved_cents >= 0 "
        "AND refunded_cents + reserved_cents <= amount_cents",
        name="payments_amounts",
    ),
    Index("payments_order", "order_id"),
)

refunds = Table(
    "refunds",
    metadata,
    Column("id", Text, primary_key=True),
    Column("proposal_id", Text, nullable=False, unique=True),
    Column("order_id", Text, ForeignKey("club.orders.id"), nullable=False),
    Column("payment_id", Text, ForeignKey("club.payments.id"), nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("destination", Text, nullable=False),
    #: ``succeeded``: money returned or credited; ``recorded``: an e-transfer to send by hand
    Column("status", Text, nullable=False),
    Column("provider_refund_id", Text, nullable=True, unique=True),
    _created(),
    CheckConstraint("amount_cents > 0", name="refunds_amount"),
    CheckConstraint(_in("destination", DESTINATIONS), name="refunds_destination"),
    CheckConstraint("status IN ('succeeded', 'recorded')", name="refunds_status"),
)

account_credits = Table(
    "account_credits",
    metadata,
    Column("id", Text, primary_key=True),
    Column("participant_id", Text, ForeignKey("club.participants.id"), nullable=False),
    Column("refund_id", Text, ForeignKey("club.refunds.id"), nullable=False, unique=True),
    Column("amount_cents", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    _created(),
    CheckConstraint("amount_cents > 0", name="account_credits_amount"),
)

refund_attempts = Table(
    "refund_attempts",
    metadata,
    Column("id", Text, primary_key=True),
    Column("proposal_id", Text, nullable=False, unique=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("order_id", Text, ForeignKey("club.orders.id"), nullable=False),
    Column("payment_id", Text, ForeignKey("club.payments.id"), nullable=False),
    Column("line_item_id", Text, nullable=False),
    Column("discount_id", Text, nullable=False),
    Column("destination", Text, nullable=False),
    Column("amount_cents", BigInteger, nullable=False),
    Column("currency", Text, nullable=False),
    Column("idempotency_key", Text, nullable=False, unique=True),
    Column("status", Text, nullable=False),
    #: until then the executor that began the attempt may still be calling the provider
    Column("lease_until", DateTime(timezone=True), nullable=False),
    Column("client_timeout_s", Float, nullable=False),
    Column("request", JSONB, nullable=False),
    Column("response", JSONB, nullable=True),
    #: the concluded ``OperationOutcome`` as JSON, so a repeated record/reconcile returns it
    Column("outcome", JSONB, nullable=True),
    _created(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    CheckConstraint(_in("status", ATTEMPT_STATUSES), name="refund_attempts_status"),
    CheckConstraint(_in("destination", DESTINATIONS), name="refund_attempts_destination"),
    Index(
        "refund_attempts_unresolved",
        "payment_id",
        postgresql_where=text(_in("status", UNRESOLVED_ATTEMPT_STATUSES)),
    ),
)

segments = Table(
    "segments",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("name", Text, nullable=False),
    #: how the segment was defined (shown and copied; membership is materialised below)
    Column("filter", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    _created(),
    Index("segments_organization", "organization_id"),
)

segment_members = Table(
    "segment_members",
    metadata,
    Column("segment_id", Text, ForeignKey("club.segments.id"), nullable=False),
    Column("participant_id", Text, ForeignKey("club.participants.id"), nullable=False),
    PrimaryKeyConstraint("segment_id", "participant_id", name="segment_members_pkey"),
)

broadcast_forms = Table(
    "broadcast_forms",
    metadata,
    Column("id", Text, primary_key=True),
    Column("organization_id", Text, ForeignKey("club.organizations.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("subject", Text, nullable=False, server_default=""),
    Column("body", Text, nullable=False, server_default=""),
    Column("segment_ids", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
    Column("filters", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("audience_count", Integer, nullable=True),
    #: bumped by every change to the form, so a draft prepared against it can tell
    Column("revision", Integer, nullable=False, server_default=text("0")),
    Column("applied_proposal_id", Text, nullable=True),
    _created(),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
