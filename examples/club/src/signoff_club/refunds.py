"""The refund ledger: the facts a refund rests on, and the rows a refund attempt writes.

``order.refund_missing_discount`` decides (what to check, which outcome); this module reads
and writes the club tables for it. Every query is bounded by the organization and the order,
so an id from elsewhere reads as "not found", whichever table it names.

It is longer than 300 lines because it is every query of one table family (facts, attempts,
the refund and its reservation); split, each half would need the other's row shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from signoff_contracts.ids import new_id
from signoff_contracts.operations import AttemptRef, Rejected, StrandedAttempt
from signoff_contracts.outcomes import OperationOutcome, outcome_adapter
from sqlalchemy import Interval, and_, exists, func, literal, select, update
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
    order_q = (
        select(t.orders.c.currency, t.orders.c.total_cents, t.participants.c.name)
        .join_from(t.orders, t.participants, t.orders.c.participant_id == t.participants.c.id)
        .where(t.orders.c.id == order_id, t.orders.c.organization_id == organization_id)
    )
    order = (await conn.execute(order_q.with_for_update(of=t.orders) if lock else order_q)).first()
    if order is None:
        raise Rejected("order_not_found")
    pay_q = select(t.payments).where(
        t.payments.c.id == payment_id, t.payments.c.order_id == order_id
    )
    payment = (await conn.execute(pay_q.with_for_update() if lock else pay_q)).first()
    if payment is None:
        raise Rejected("payment_not_found")
    line_q = (
        select(
            t.line_items,
            t.products.c.name,
            t.products.c.unit_price_cents.label("catalog_price"),
        )
        .join_from(t.line_items, t.products, t.line_items.c.product_id == t.products.c.id)
        .where(t.line_items.c.id == line_item_id, t.line_items.c.order_id == order_id)
    )
    line = (await conn.execute(line_q)).first()
    if line is None:
        raise Rejected("line_item_not_found")
    evidence = t.line_item_discounts
    discount = (
        await conn.execute(
            select(t.discounts, evidence.c.applied)
            .select_from(
                t.discounts.outerjoin(
                    evidence,
                    and_(
                        evidence.c.discount_id == t.discounts.c.id,
                        evidence.c.line_item_id == line_item_id,
                    ),
                )
            )
            .where(
                t.discounts.c.id == discount_id, t.discounts.c.organization_id == organization_id
            )
        )
    ).first()
    if discount is None:
        raise Rejected("discount_not_found")
    return Facts(
        currency=order.currency,
        order_total=order.total_cents,
        participant_name=order.name,
        method=payment.method,
        paid=payment.amount_cents,
        refunded=payment.refunded_cents,
        reserved=payment.reserved_cents,
        payment_ref=payment.provider_ref,
        product_id=line.product_id,
        product_name=line.name,
        catalog_price=line.catalog_price,
        discount_id=discount.id,
        quantity=line.quantity,
        unit_price=line.unit_price_cents,
        line_cents=line.amount_cents,
        discount_name=discount.name,
        kind=discount.kind,
        value=discount.value,
        evidence_applied=discount.applied,
        attempt_in_progress=await _attempt_in_progress(conn, payment_id),
    )


async def _attempt_in_progress(conn: AsyncConnection, payment_id: str) -> bool:
    a = t.refund_attempts
    query = select(
        exists().where(a.c.payment_id == payment_id, a.c.status.in_(t.UNRESOLVED_ATTEMPT_STATUSES))
    )
    return bool((await conn.execute(query)).scalar_one())


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
    lease = literal(timedelta(seconds=lease_s), Interval())
    await conn.execute(
        t.refund_attempts.insert().values(
            id=attempt_id,
            proposal_id=proposal_id,
            organization_id=organization_id,
            order_id=arguments.order_id,
            payment_id=arguments.payment_id,
            line_item_id=arguments.line_item_id,
            discount_id=arguments.discount_id,
            destination=arguments.destination,
            amount_cents=arguments.amount_cents,
            currency=arguments.currency,
            idempotency_key=key,
            status="pending",
            lease_until=func.now() + lease,
            client_timeout_s=client_timeout_s,
            request={
                "payment_ref": arguments.payment_ref,
                "amount_cents": arguments.amount_cents,
                "currency": arguments.currency,
                "destination": arguments.destination,
                "contract_id": contract_id,
            },
        )
    )
    evidence = t.line_item_discounts
    marked = await conn.execute(
        update(evidence)
        .where(
            evidence.c.line_item_id == arguments.line_item_id,
            evidence.c.discount_id == arguments.discount_id,
            evidence.c.applied.is_(False),
        )
        .values(applied=True, applied_proposal_id=proposal_id)
    )
    if marked.rowcount != 1:
        raise RuntimeError("begin_attempt without a successful revalidate in this transaction")
    await _adjust_payment(conn, arguments.payment_id, reserved=arguments.amount_cents)
    return AttemptRef(attempt_id=attempt_id, idempotency_key=key, lease_s=lease_s)


async def get_attempt(conn: AsyncConnection, attempt_id: str, *, lock: bool = False) -> Attempt:
    a = t.refund_attempts
    deadline = a.c.lease_until + func.make_interval(0, 0, 0, 0, 0, 0, a.c.client_timeout_s)
    # the statement's own clock, not the transaction's start: read after the row lock, it is the
    # latest instant this transaction can vouch for
    past = (func.clock_timestamp() > deadline).label("past_deadline")
    query = select(a, past).where(a.c.id == attempt_id)
    row = (await conn.execute(query.with_for_update(of=a) if lock else query)).first()
    if row is None:
        raise LookupError(f"no refund attempt {attempt_id}")
    outcome = None if row.outcome is None else outcome_adapter.validate_python(row.outcome)
    return Attempt(
        id=row.id,
        proposal_id=row.proposal_id,
        order_id=row.order_id,
        payment_id=row.payment_id,
        line_item_id=row.line_item_id,
        discount_id=row.discount_id,
        destination=row.destination,
        amount_cents=row.amount_cents,
        currency=row.currency,
        idempotency_key=row.idempotency_key,
        status=row.status,
        outcome=outcome,
        past_deadline=bool(row.past_deadline),
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
    await conn.execute(
        t.refunds.insert().values(
            id=refund_id,
            proposal_id=attempt.proposal_id,
            order_id=attempt.order_id,
            payment_id=attempt.payment_id,
            amount_cents=attempt.amount_cents,
            currency=attempt.currency,
            destination=attempt.destination,
            status=status,
            provider_refund_id=provider_refund_id,
        )
    )
    amount = attempt.amount_cents
    await _adjust_payment(conn, attempt.payment_id, reserved=-amount, refunded=amount)
    await conn.execute(
        update(t.line_items)
        .where(t.line_items.c.id == attempt.line_item_id)
        .values(amount_cents=t.line_items.c.amount_cents - amount)
    )
    order = (
        await conn.execute(
            update(t.orders)
            .where(t.orders.c.id == attempt.order_id)
            .values(total_cents=t.orders.c.total_cents - amount)
            .returning(t.orders.c.total_cents, t.orders.c.participant_id)
        )
    ).one()
    if attempt.destination == "account_credit":
        await conn.execute(
            t.account_credits.insert().values(
                id=new_id("crd"),
                participant_id=order.participant_id,
                refund_id=refund_id,
                amount_cents=amount,
                currency=attempt.currency,
            )
        )
    card_last4 = None
    if attempt.destination == "card_refund":
        card_last4 = await conn.scalar(
            select(t.payments.c.card_last4).where(t.payments.c.id == attempt.payment_id)
        )
    return Applied(refund_id, int(order.total_cents), card_last4)


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
    a = t.refund_attempts
    await conn.execute(
        update(a)
        .where(a.c.id == attempt_id)
        .values(
            status=status,
            response=response,
            outcome=outcome_adapter.dump_python(outcome, mode="json"),
            updated_at=func.now(),
        )
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
