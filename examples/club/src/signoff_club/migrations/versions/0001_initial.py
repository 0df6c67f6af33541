"""The club schema: organizations, people, orders, payments, refunds, attempts, broadcasts.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

S = "club"
_TABLES = (
    "broadcast_forms",
    "segment_members",
    "segments",
    "refund_attempts",
    "account_credits",
    "refunds",
    "payments",
    "line_item_discounts",
    "discounts",
    "line_items",
    "orders",
    "products",
    "participants",
    "memberships",
    "users",
    "organizations",
)


def _created() -> sa.Column[object]:
    return sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    )


def _fk(table: str) -> sa.ForeignKey:
    return sa.ForeignKey(f"{S}.{table}.id")


def upgrade() -> None:
    _people()
    _sales()
    _refunds()
    _broadcasts()


def _people() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False, unique=True),
        _created(),
        schema=S,
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("email", sa.Text, nullable=False, unique=True),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("locale", sa.Text, nullable=False, server_default="en"),
        sa.Column("password_hash", sa.Text, nullable=False),
        _created(),
        sa.CheckConstraint("locale IN ('en', 'fr')", name="users_locale"),
        sa.CheckConstraint("email = lower(email)", name="users_email_lower"),
        schema=S,
    )
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.Text, _fk("users"), nullable=False),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        _created(),
        sa.PrimaryKeyConstraint("user_id", "organization_id", name="memberships_pkey"),
        sa.CheckConstraint("role IN ('manager', 'viewer')", name="memberships_role"),
        schema=S,
    )
    op.create_table(
        "participants",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("email", sa.Text, nullable=True),
        _created(),
        schema=S,
    )
    op.create_index("participants_organization", "participants", ["organization_id"], schema=S)


def _sales() -> None:
    op.create_table(
        "products",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("unit_price_cents", sa.BigInteger, nullable=False),
        sa.CheckConstraint("unit_price_cents >= 0", name="products_price"),
        schema=S,
    )
    op.create_table(
        "orders",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("participant_id", sa.Text, _fk("participants"), nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("total_cents", sa.BigInteger, nullable=False),
        _created(),
        sa.CheckConstraint("currency ~ '^[A-Z]{3}$'", name="orders_currency"),
        sa.CheckConstraint("total_cents >= 0", name="orders_total"),
        schema=S,
    )
    op.create_index("orders_organization", "orders", ["organization_id"], schema=S)
    op.create_table(
        "line_items",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("order_id", sa.Text, _fk("orders"), nullable=False),
        sa.Column("product_id", sa.Text, _fk("products"), nullable=False),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("unit_price_cents", sa.BigInteger, nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.CheckConstraint("quantity > 0", name="line_items_quantity"),
        sa.CheckConstraint(
            "unit_price_cents >= 0 AND amount_cents >= 0", name="line_items_amounts"
        ),
        schema=S,
    )
    op.create_index("line_items_order", "line_items", ["order_id"], schema=S)
    op.create_table(
        "discounts",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("value", sa.BigInteger, nullable=False),
        sa.CheckConstraint("kind IN ('percentage', 'fixed')", name="discounts_kind"),
        sa.CheckConstraint(
            "(kind = 'percentage' AND value BETWEEN 1 AND 10000) OR (kind = 'fixed' AND value > 0)",
            name="discounts_value",
        ),
        schema=S,
    )
    op.create_table(
        "line_item_discounts",
        sa.Column("line_item_id", sa.Text, _fk("line_items"), nullable=False),
        sa.Column("discount_id", sa.Text, _fk("discounts"), nullable=False),
        sa.Column("applied", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("applied_proposal_id", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("line_item_id", "discount_id", name="line_item_discounts_pkey"),
        schema=S,
    )
    op.create_table(
        "payments",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("order_id", sa.Text, _fk("orders"), nullable=False),
        sa.Column("method", sa.Text, nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("provider_ref", sa.Text, nullable=True),
        sa.Column("refunded_cents", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("reserved_cents", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        _created(),
        sa.CheckConstraint("method IN ('card', 'cash', 'e_transfer')", name="payments_method"),
        sa.CheckConstraint(
            "(method = 'card') = (provider_ref IS NOT NULL)", name="payments_card_ref"
        ),
        sa.CheckConstraint(
            "amount_cents > 0 AND refunded_cents >= 0 AND reserved_cents >= 0 "
            "AND refunded_cents + reserved_cents <= amount_cents",
            name="payments_amounts",
        ),
        schema=S,
    )
    op.create_index("payments_order", "payments", ["order_id"], schema=S)


_DESTINATIONS = "destination IN ('card_refund', 'account_credit', 'e_transfer_return')"


def _refunds() -> None:
    op.create_table(
        "refunds",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("proposal_id", sa.Text, nullable=False, unique=True),
        sa.Column("order_id", sa.Text, _fk("orders"), nullable=False),
        sa.Column("payment_id", sa.Text, _fk("payments"), nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("destination", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("provider_refund_id", sa.Text, nullable=True, unique=True),
        _created(),
        sa.CheckConstraint("amount_cents > 0", name="refunds_amount"),
        sa.CheckConstraint(_DESTINATIONS, name="refunds_destination"),
        sa.CheckConstraint("status IN ('succeeded', 'recorded')", name="refunds_status"),
        schema=S,
    )
    op.create_table(
        "account_credits",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("participant_id", sa.Text, _fk("participants"), nullable=False),
        sa.Column("refund_id", sa.Text, _fk("refunds"), nullable=False, unique=True),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        _created(),
        sa.CheckConstraint("amount_cents > 0", name="account_credits_amount"),
        schema=S,
    )
    op.create_table(
        "refund_attempts",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("proposal_id", sa.Text, nullable=False, unique=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("order_id", sa.Text, _fk("orders"), nullable=False),
        sa.Column("payment_id", sa.Text, _fk("payments"), nullable=False),
        sa.Column("line_item_id", sa.Text, nullable=False),
        sa.Column("discount_id", sa.Text, nullable=False),
        sa.Column("destination", sa.Text, nullable=False),
        sa.Column("amount_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.Text, nullable=False),
        sa.Column("idempotency_key", sa.Text, nullable=False, unique=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("client_timeout_s", sa.Float, nullable=False),
        sa.Column("request", postgresql.JSONB, nullable=False),
        sa.Column("response", postgresql.JSONB, nullable=True),
        sa.Column("outcome", postgresql.JSONB, nullable=True),
        _created(),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'unknown', 'succeeded', 'failed', 'not_applied')",
            name="refund_attempts_status",
        ),
        sa.CheckConstraint(_DESTINATIONS, name="refund_attempts_destination"),
        schema=S,
    )
    op.create_index(
        "refund_attempts_unresolved",
        "refund_attempts",
        ["payment_id"],
        schema=S,
        postgresql_where=sa.text("status IN ('pending', 'unknown')"),
    )


def _broadcasts() -> None:
    op.create_table(
        "segments",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column(
            "filter", postgresql.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")
        ),
        _created(),
        schema=S,
    )
    op.create_index("segments_organization", "segments", ["organization_id"], schema=S)
    op.create_table(
        "segment_members",
        sa.Column("segment_id", sa.Text, _fk("segments"), nullable=False),
        sa.Column("participant_id", sa.Text, _fk("participants"), nullable=False),
        sa.PrimaryKeyConstraint("segment_id", "participant_id", name="segment_members_pkey"),
        schema=S,
    )
    op.create_table(
        "broadcast_forms",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("organization_id", sa.Text, _fk("organizations"), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("subject", sa.Text, nullable=False, server_default=""),
        sa.Column("body", sa.Text, nullable=False, server_default=""),
        sa.Column(
            "segment_ids",
            postgresql.ARRAY(sa.Text),
            nullable=False,
            server_default=sa.text("'{}'::text[]"),
        ),
        sa.Column(
            "filters", postgresql.JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")
        ),
        sa.Column("audience_count", sa.Integer, nullable=True),
        sa.Column("revision", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("applied_proposal_id", sa.Text, nullable=True),
        _created(),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        schema=S,
    )


def downgrade() -> None:
    for table in _TABLES:
        op.drop_table(table, schema=S)
