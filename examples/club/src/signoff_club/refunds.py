"""The refund ledger: the facts a refund rests on, and the rows a refund attempt writes.

``order.refund_missing_discount`` decides (what to check, which outcome); this module reads
and writes the club tables for it. Every query is bounded by the organization and the order,
so an id from elsewhere reads as "not found", whichever table it names.

The statements an executor runs for every refund (the facts it revalidates, the attempt it
begins, the refund it applies and concludes) are hot ones (``signoff_runtime.hot``: fixed SQL,
prepared once per connection), each round trip doing as much as one statement can; the cold
paths (a release, the reconciler's scan, an attempt marked unknown) stay SQLAlchemy Core.

It is longer than 300 lines because it is every query of one table family (facts, attempts,
the refund and its reservation); split, each half would need the other's row shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from signoff_contracts.ids import new_id
from signoff_contracts.operations import AttemptRef, Rejected, StrandedAttempt
from signoff_contracts.outcomes import OperationOutcome, outcome_adapter
from signoff_runtime import hot
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_club import tables as t
from signoff_club.domain import (
    Destination,
    DiscountKind,
    PaymentMethod,
    discount_cents,
    product_configuration,
    refundable_cents,
)


@dataclass(frozen=True, slots=True)
class Refunded:
    """The provider made the refund."""

    provider_refund_id: str
    amount_cents: int


@dataclass(frozen=True, slots=True)
class AppliedLocally:
    """A local destination: nothing was asked of anyone; ``record`` applies it."""


@dataclass(frozen=True, slots=True)
class Declined:
    """The provider refused; nothing moved."""

    code: str


@dataclass(frozen=True, slots=True)
class NotApplied:
    """Definitely never applied; ``code`` is the revision reason to give."""

    code: str


@dataclass(frozen=True, slots=True)
class GivenUp:
    """An operator ended the attempt as not applied (the provider's API could not tell)."""

    correlation_id: str


Answer = Refunded | AppliedLocally | Declined | NotApplied


@dataclass(frozen=True, slots=True)
class Facts:
    """One order's facts behind one refund, as read (and, in revalidation, locked) now."""

    currency: str
    order_total: int
    participant_name: str
    method: PaymentMethod
    paid: int
    refunded: int
    reserved: int
    payment_ref: str | None
    product_id: str
    product_name: str
    #: the product's catalog price now (the line keeps the price it was sold at)
    catalog_price: int
    discount_id: str
    quantity: int
    unit_price: int
    line_cents: int
    discount_name: str
    kind: DiscountKind
    value: int
    evidence_applied: bool | None
    attempt_in_progress: bool

    def require_discount_owed(self) -> None:
        if self.evidence_applied is None:
            raise Rejected("discount_not_applicable")
        if self.evidence_applied:
            raise Rejected("discount_already_applied")

    def product_configuration(self) -> str:
        """The product's configuration fingerprint (``signoff_club.domain``)."""
        return product_configuration(
            product_id=self.product_id,
            name=self.product_name,
            unit_price_cents=self.catalog_price,
            discount_id=self.discount_id,
            kind=self.kind,
            value=self.value,
        )

    def product_unchanged_since_sale(self) -> bool:
        """The catalog still sells the product at the price this line was bought at."""
        return self.catalog_price == self.unit_price

    def amount_cents(self) -> int:
        return discount_cents(
            self.kind,
            self.value,
            quantity=self.quantity,
            unit_price_cents=self.unit_price,
            line_cents=self.line_cents,
        )

    def refundable_cents(self) -> int:
        return refundable_cents(
            paid=self.paid,
            refunded=self.refunded,
            reserved=self.reserved,
            order_total=self.order_total,
        )


async def load_facts(
    conn: AsyncConnection,
    organization_id: str,
    order_id: str,
    payment_id: str,
    line_item_id: str,
    discount_id: str,
    *,
    lock: bool,
) -> Facts:
    """Read the facts, or raise ``Rejected`` naming the first id not found in this order.

    With ``lock``, the order row and then the payment row are locked ``FOR UPDATE``: every
    refund of an order takes them in this order, so two refunds serialize without deadlock.
    The product and discount rows are read, not locked: ``FOR SHARE`` needs a write grant the
    executor's role does not hold on the catalog, so their configuration is proved as of the
    revalidating read (as the discount rule always was).
    """
    order = await hot.fetchrow(conn, _ORDER[lock], order_id, organization_id)
    if order is None:
        raise Rejected("order_not_found")
    payment = await hot.fetchrow(conn, _PAYMENT[lock], payment_id, order_id)
    if payment is None:
        raise Rejected("payment_not_found")
    rest = await hot.fetchrow(
        conn, _REST, line_item_id, order_id, discount_id, organization_id, payment_id
    )
    assert rest is not None  # one row whatever was found: the ids are joined to a constant row
    if rest["product_id"] is None:
        raise Rejected("line_item_not_found")
    if rest["discount_id"] is None:
        raise Rejected("discount_not_found")
    return Facts(
        currency=order["currency"],
        order_total=order["total_cents"],
        participant_name=order["name"],
        method=payment["method"],
        paid=payment["amount_cents"],
        refunded=payment["refunded_cents"],
        reserved=payment["reserved_cents"],
        payment_ref=payment["provider_ref"],
        product_id=rest["product_id"],
        product_name=rest["product_name"],
        catalog_price=rest["catalog_price"],
        discount_id=rest["discount_id"],
        quantity=rest["quantity"],
        unit_price=rest["unit_price_cents"],
        line_cents=rest["line_cents"],
        discount_name=rest["discount_name"],
        kind=rest["kind"],
        value=rest["value"],
        evidence_applied=rest["applied"],
        attempt_in_progress=rest["attempt_in_progress"],
    )


class AttemptArguments(Protocol):
    """What ``begin`` needs of the operation's ``Arguments``."""

    @property
    def order_id(self) -> str: ...
    @property
    def payment_id(self) -> str: ...
    @property
    def line_item_id(self) -> str: ...
    @property
    def discount_id(self) -> str: ...
    @property
    def amount_cents(self) -> int: ...
    @property
    def currency(self) -> str: ...
    @property
    def destination(self) -> Destination: ...
    @property
    def payment_ref(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Attempt:
    id: str
    proposal_id: str
    order_id: str
    payment_id: str
    line_item_id: str
    discount_id: str
    destination: Destination
    amount_cents: int
    currency: str
    idempotency_key: str
    status: str
    outcome: OperationOutcome | None
    #: the lease and the client timeout have both passed (by the database clock)
    past_deadline: bool


async def begin(
    conn: AsyncConnection,
    arguments: AttemptArguments,
    organization_id: str,
    proposal_id: str,
    *,
    lease_s: int,
    client_timeout_s: float,
    contract_id: str | None = None,
) -> AttemptRef:
    """Record the attempt, mark the discount applied and reserve the amount, in the caller's
    (revalidating) transaction; a second attempt for the proposal violates a unique key.
    ``contract_id`` rides along in ``request`` so the reconciler's scan can name the contract of
    an attempt whose executor died (``stranded``)."""
    attempt_id = new_id("att")
    key = f"signoff-refund-{proposal_id}"
    request = {
        "payment_ref": arguments.payment_ref,
        "amount_cents": arguments.amount_cents,
        "currency": arguments.currency,
        "destination": arguments.destination,
        "contract_id": contract_id,
    }
    marked = await hot.fetchrow(
        conn,
        _BEGIN,
        attempt_id,
        proposal_id,
        organization_id,
        arguments.order_id,
        arguments.payment_id,
        arguments.line_item_id,
        arguments.discount_id,
        arguments.destination,
        arguments.amount_cents,
        arguments.currency,
        key,
        float(lease_s),
        client_timeout_s,
        hot.json_param(request),
    )
    if marked is None or marked["marked"] != 1:
        raise RuntimeError("begin_attempt without a successful revalidate in this transaction")
    return AttemptRef(attempt_id=attempt_id, idempotency_key=key, lease_s=lease_s)


async def get_attempt(conn: AsyncConnection, attempt_id: str, *, lock: bool = False) -> Attempt:
    row = await hot.fetchrow(conn, _ATTEMPT[lock], attempt_id)
    if row is None:
        raise LookupError(f"no refund attempt {attempt_id}")
    stored = row["outcome"]
    return Attempt(
        id=row["id"],
        proposal_id=row["proposal_id"],
        order_id=row["order_id"],
        payment_id=row["payment_id"],
        line_item_id=row["line_item_id"],
        discount_id=row["discount_id"],
        destination=row["destination"],
        amount_cents=row["amount_cents"],
        currency=row["currency"],
        idempotency_key=row["idempotency_key"],
        status=row["status"],
        outcome=None if stored is None else outcome_adapter.validate_python(stored),
        past_deadline=bool(row["past_deadline"]),
    )


@dataclass(frozen=True, slots=True)
class Applied:
    """What ``apply`` wrote: the refund, the order's total after it, the card it went to."""

    refund_id: str
    order_total_cents: int
    card_last4: str | None


async def apply(conn: AsyncConnection, attempt: Attempt, provider_refund_id: str | None) -> Applied:
    """Turn the reservation into a refund, and say what it became."""
    refund_id = new_id("rfd")
    status = "recorded" if attempt.destination == "e_transfer_return" else "succeeded"
    row = await hot.fetchrow(
        conn,
        _APPLY,
        refund_id,
        attempt.proposal_id,
        attempt.order_id,
        attempt.payment_id,
        attempt.amount_cents,
        attempt.currency,
        attempt.destination,
        status,
        provider_refund_id,
        attempt.line_item_id,
    )
    if row is None:
        raise LookupError(f"the order of refund attempt {attempt.id} vanished")
    if attempt.destination == "account_credit":
        await hot.execute(
            conn,
            _CREDIT,
            new_id("crd"),
            row["participant_id"],
            refund_id,
            attempt.amount_cents,
            attempt.currency,
        )
    card_last4 = row["card_last4"] if attempt.destination == "card_refund" else None
    return Applied(refund_id, int(row["total_cents"]), card_last4)


async def release(conn: AsyncConnection, attempt: Attempt) -> None:
    """Undo what ``begin`` held: the discount is owed again and the amount refundable."""
    evidence = t.line_item_discounts
    await conn.execute(
        update(evidence)
        .where(
            evidence.c.line_item_id == attempt.line_item_id,
            evidence.c.discount_id == attempt.discount_id,
            evidence.c.applied_proposal_id == attempt.proposal_id,
        )
        .values(applied=False, applied_proposal_id=None)
    )
    await _adjust_payment(conn, attempt.payment_id, reserved=-attempt.amount_cents)


async def conclude(
    conn: AsyncConnection,
    attempt_id: str,
    status: str,
    response: dict[str, Any],
    outcome: OperationOutcome,
) -> None:
    await hot.execute(
        conn,
        _CONCLUDE,
        attempt_id,
        status,
        hot.json_param(response),
        hot.json_param(outcome_adapter.dump_python(outcome, mode="json")),
    )


async def stranded(
    conn: AsyncConnection, older_than_s: float, limit: int = 500
) -> list[StrandedAttempt]:
    """Attempts still pending or unknown ``older_than_s`` after their lease and client timeout
    ran out, oldest first: no executor can still be calling the provider for them."""
    a = t.refund_attempts
    deadline = a.c.lease_until + func.make_interval(
        0, 0, 0, 0, 0, 0, a.c.client_timeout_s + older_than_s
    )
    rows = await conn.execute(
        select(a.c.id, a.c.proposal_id, a.c.organization_id, a.c.request["contract_id"].astext)
        .where(a.c.status.in_(t.UNRESOLVED_ATTEMPT_STATUSES), deadline < func.now())
        .order_by(a.c.created_at)
        .limit(limit)
        # an executor recording its answer holds the row: wait for it, and skip the attempt if
        # that answer concluded it (the condition is checked again on the row it committed)
        .with_for_update(of=a)
    )
    return [
        StrandedAttempt(
            attempt_id=row[0], proposal_id=row[1], organization_id=row[2], contract_id=row[3]
        )
        for row in rows
    ]


async def mark_unknown(conn: AsyncConnection, attempt_id: str) -> None:
    a = t.refund_attempts
    await conn.execute(
        update(a)
        .where(a.c.id == attempt_id, a.c.status == "pending")
        .values(status="unknown", updated_at=func.now())
    )


async def _adjust_payment(
    conn: AsyncConnection, payment_id: str, *, reserved: int = 0, refunded: int = 0
) -> None:
    p = t.payments
    await conn.execute(
        update(p)
        .where(p.c.id == payment_id)
        .values(
            reserved_cents=p.c.reserved_cents + reserved,
            refunded_cents=p.c.refunded_cents + refunded,
        )
    )


# The hot statements (``signoff_runtime.hot``). Each text is fixed, so asyncpg prepares it once
# per connection; ``lock`` picks a text, it is never a parameter.
_O, _PA, _P = t.orders.fullname, t.participants.fullname, t.payments.fullname
_L, _PR, _D = t.line_items.fullname, t.products.fullname, t.discounts.fullname
_E, _A, _R = t.line_item_discounts.fullname, t.refund_attempts.fullname, t.refunds.fullname
_C = t.account_credits.fullname
#: as the partial index ``refund_attempts_unresolved`` says it, so the planner can use it
_UNRESOLVED = "a.status IN (" + ", ".join(f"'{s}'" for s in t.UNRESOLVED_ATTEMPT_STATUSES) + ")"

#: the order (``$1``) in the organization (``$2``) and its participant's name; by ``lock``
_ORDER = {
    lock: (
        f"SELECT o.currency, o.total_cents, pa.name FROM {_O} o "  # noqa: S608
        f"JOIN {_PA} pa ON pa.id = o.participant_id "
        "WHERE o.id = $1 AND o.organization_id = $2" + (" FOR UPDATE OF o" if lock else "")
    )
    for lock in (False, True)
}

#: the payment (``$1``) of the order (``$2``); by ``lock``
_PAYMENT = {
    lock: (
        "SELECT method, amount_cents, refunded_cents, reserved_cents, provider_ref "  # noqa: S608
        f"FROM {_P} WHERE id = $1 AND order_id = $2" + (" FOR UPDATE" if lock else "")
    )
    for lock in (False, True)
}

#: the line (``$1``) of the order (``$2``) with its product, the discount (``$3``) of the
#: organization (``$4``) with its evidence on that line, and whether an attempt on the payment
#: (``$5``) is unresolved: always one row, its line or discount columns null where not found
_REST = (
    "SELECT l.product_id, l.quantity, l.unit_price_cents, l.amount_cents AS line_cents, "  # noqa: S608
    "pr.name AS product_name, pr.unit_price_cents AS catalog_price, "
    "d.id AS discount_id, d.name AS discount_name, d.kind, d.value, e.applied, "
    f"EXISTS (SELECT 1 FROM {_A} a WHERE a.payment_id = $5 AND {_UNRESOLVED}) "
    "AS attempt_in_progress "
    "FROM (VALUES (1)) AS one (x) "
    f"LEFT JOIN ({_L} l JOIN {_PR} pr ON pr.id = l.product_id) "
    "ON l.id = $1 AND l.order_id = $2 "
    f"LEFT JOIN {_D} d ON d.id = $3 AND d.organization_id = $4 "
    f"LEFT JOIN {_E} e ON e.discount_id = d.id AND e.line_item_id = $1"
)

#: the attempt (``$1``…``$14``), the evidence marked applied by the proposal (``$2``), the
#: amount reserved on the payment; ``marked``: the evidence rows marked (1 after a revalidation)
_BEGIN = (
    f"WITH attempt AS (INSERT INTO {_A} (id, proposal_id, organization_id, order_id, "  # noqa: S608
    "payment_id, line_item_id, discount_id, destination, amount_cents, currency, "
    "idempotency_key, status, lease_until, client_timeout_s, request) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', "
    "now() + make_interval(secs => $12), $13, $14::jsonb)), "
    f"marked AS (UPDATE {_E} SET applied = true, applied_proposal_id = $2 "
    "WHERE line_item_id = $6 AND discount_id = $7 AND applied = false RETURNING 1), "
    f"reserved AS (UPDATE {_P} SET reserved_cents = reserved_cents + $9 WHERE id = $5) "
    "SELECT count(*) AS marked FROM marked"
)

#: the attempt (``$1``) and whether its lease and client timeout have both passed, by the
#: statement's own clock: read after the row lock, the latest instant the transaction can vouch
#: for; by ``lock``
_ATTEMPT = {
    lock: (
        "SELECT a.*, clock_timestamp() > "  # noqa: S608
        "a.lease_until + make_interval(secs => a.client_timeout_s) AS past_deadline "
        f"FROM {_A} a WHERE a.id = $1" + (" FOR UPDATE OF a" if lock else "")
    )
    for lock in (False, True)
}

#: the refund (``$1``…``$9``) and what it changes: the payment's reservation (``$4``) becomes
#: refunded, the line (``$10``) and the order (``$3``) lose the amount (``$5``); the order's total
#: after it, its participant, and the payment's card
_APPLY = (
    f"WITH refund AS (INSERT INTO {_R} (id, proposal_id, order_id, payment_id, amount_cents, "  # noqa: S608
    "currency, destination, status, provider_refund_id) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)), "
    f"paid AS (UPDATE {_P} SET reserved_cents = reserved_cents - $5, "
    "refunded_cents = refunded_cents + $5 WHERE id = $4 RETURNING card_last4), "
    f"line AS (UPDATE {_L} SET amount_cents = amount_cents - $5 WHERE id = $10), "
    f"ord AS (UPDATE {_O} SET total_cents = total_cents - $5 WHERE id = $3 "
    "RETURNING total_cents, participant_id) "
    "SELECT ord.total_cents, ord.participant_id, paid.card_last4 FROM ord LEFT JOIN paid ON true"
)

#: the account credit (``$1``) for the participant (``$2``) that a refund (``$3``) became
_CREDIT = (
    f"INSERT INTO {_C} (id, participant_id, refund_id, amount_cents, currency) "  # noqa: S608
    "VALUES ($1, $2, $3, $4, $5)"
)

#: the attempt (``$1``) concluded: its status, the provider's answer and the outcome
_CONCLUDE = (
    f"UPDATE {_A} SET status = $2, response = $3::jsonb, outcome = $4::jsonb, "  # noqa: S608
    "updated_at = now() WHERE id = $1"
)
