"""The club's part of the database policy (``signoff_runtime.roles``), entry point
``signoff.privileges``: which tables are its directory, which its operations write, which
columns only the sign-in reads.

Every service role that reads the domain reads it whole, except ``users.password_hash``: only the
web, which signs people in, reads that. The executor and the reconciler write exactly the tables
below; the end-to-end tests run every service as its own role, so a table an operation starts
writing without being listed here fails there, not in production.
"""

from __future__ import annotations

from signoff_runtime.roles import DomainPrivileges

from signoff_club import tables as t

PRIVILEGES = DomainPrivileges(
    schema=t.SCHEMA,
    directory=(t.organizations.name, t.users.name, t.memberships.name),
    operations_write=(
        # refund_missing_discount: the attempt, its reservation and what it changes
        t.refund_attempts.name,
        t.payments.name,
        t.refunds.name,
        t.account_credits.name,
        t.line_items.name,
        t.line_item_discounts.name,
        t.orders.name,
        # apply_broadcast_draft
        t.broadcast_forms.name,
    ),
    private_columns={t.users.name: ("password_hash",)},
)
