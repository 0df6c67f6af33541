"""The club's money rules, pure and synchronous: what a discount is worth, where a refund goes.

Operations call these from ``resolve`` (to compute what a person will approve) and again from
``revalidate`` (to prove it still holds), so one rule cannot be computed two ways.

Rounding: a percentage discount is ``value`` basis points of the line's gross amount
(quantity x unit price), rounded half up to the cent (``12.5`` cents → ``13``). A fixed
discount is ``value`` cents. Either is capped at what the line still costs, so a line never
goes below zero however many discounts are corrected on it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

PaymentMethod = Literal["card", "cash", "e_transfer"]
DiscountKind = Literal["percentage", "fixed"]
RequestedDestination = Literal["original_payment_method", "account_credit"]
Destination = Literal["card_refund", "account_credit", "e_transfer_return"]

BASIS_POINTS = 10_000

#: where "the original payment method" leads per method; cash has no way back (see README)
_ORIGINAL: dict[str, Destination] = {"card": "card_refund", "e_transfer": "e_transfer_return"}


def discount_cents(
    kind: DiscountKind, value: int, *, quantity: int, unit_price_cents: int, line_cents: int
) -> int:
    """What ``kind``/``value`` takes off one line, in cents (rounding: module docstring)."""
    gross = quantity * unit_price_cents
    if kind == "percentage":
        worth = (gross * value + BASIS_POINTS // 2) // BASIS_POINTS
    else:
        worth = value
    return max(0, min(worth, line_cents))


def refundable_cents(*, paid: int, refunded: int, reserved: int, order_total: int) -> int:
    """What may still go back against a payment: neither more than it has left, nor more
    than the order still costs."""
    return max(0, min(paid - refunded - reserved, order_total))


def concrete_destination(
    method: PaymentMethod, requested: RequestedDestination
) -> Destination | None:
    """Resolve the person's phrase to where money actually goes, or ``None`` if unsupported.

    Cash cannot be returned "to the original payment method" by the system: a cash refund is
    an account credit.
    """
    if requested == "account_credit":
        return "account_credit"
    return _ORIGINAL.get(method)


def destination_fits(method: PaymentMethod, destination: Destination) -> bool:
    return destination == "account_credit" or _ORIGINAL.get(method) == destination


def format_money(cents: int, currency: str, locale: Literal["en", "fr"]) -> str:
    """``12.34 CAD`` in English, ``12,34 CAD`` in French; integers only, never floats."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    separator = "," if locale == "fr" else "."
    return f"{sign}{whole}{separator}{part:02d} {currency}"


def product_configuration(
    *, product_id: str, name: str, unit_price_cents: int, discount_id: str, kind: str, value: int
) -> str:
    """A fingerprint of a product's configuration as the club stores it, for one discount.

    In the club, a product's configuration is what its catalog row says it is — its name and
    its unit price now — together with the discount rule a refund corrects on it (the
    discount's kind and value). A refund's preview is a claim about that configuration; the
    fingerprint (sha256 of the canonical JSON) lets execution prove the claim still holds.
    """
    facts = {
        "product_id": product_id,
        "name": name,
        "unit_price_cents": unit_price_cents,
        "discount": {"id": discount_id, "kind": kind, "value": value},
    }
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
