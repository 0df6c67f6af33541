"""The money rules: rounding, caps, destinations, formatting."""

from __future__ import annotations

import pytest
from signoff_club.domain import (
    concrete_destination,
    destination_fits,
    discount_cents,
    format_money,
    refundable_cents,
)


@pytest.mark.parametrize(
    ("gross", "basis_points", "expected"),
    [
        (34_999, 1_000, 3_500),  # 3 499.9 → 3 500
        (125, 1_000, 13),  # 12.5 → 13: half rounds up
        (124, 1_000, 12),  # 12.4 → 12
        (115, 1_000, 12),  # 11.5 → 12
        (10_000, 10_000, 10_000),
        (1, 1, 0),  # 0.0001 of a cent is nothing
    ],
)
def test_percentage_rounds_half_up_to_the_cent(
    gross: int, basis_points: int, expected: int
) -> None:
    worth = discount_cents(
        "percentage", basis_points, quantity=1, unit_price_cents=gross, line_cents=gross
    )
    assert worth == expected


def test_percentage_is_of_the_gross_line_amount() -> None:
    # 3 x 1 005 = 3 015 gross; 15 % = 452.25 → 452 (not 3 x 150.75 rounded per unit = 453)
    assert (
        discount_cents("percentage", 1_500, quantity=3, unit_price_cents=1_005, line_cents=3_015)
        == 452
    )


def test_a_discount_never_takes_a_line_below_zero() -> None:
    assert (
        discount_cents("fixed", 2_500, quantity=1, unit_price_cents=3_000, line_cents=1_000)
        == 1_000
    )
    assert (
        discount_cents("percentage", 5_000, quantity=1, unit_price_cents=3_000, line_cents=500)
        == 500
    )


def test_refundable_is_bounded_by_payment_and_order() -> None:
    assert (
        refundable_cents(paid=10_000, refunded=2_000, reserved=1_000, order_total=50_000) == 7_000
    )
    assert refundable_cents(paid=10_000, refunded=0, reserved=0, order_total=4_000) == 4_000
    assert refundable_cents(paid=10_000, refunded=10_000, reserved=0, order_total=4_000) == 0


@pytest.mark.parametrize(
    ("method", "requested", "expected"),
    [
        ("card", "original_payment_method", "card_refund"),
        ("e_transfer", "original_payment_method", "e_transfer_return"),
        ("cash", "original_payment_method", None),
        ("card", "account_credit", "account_credit"),
        ("cash", "account_credit", "account_credit"),
        ("e_transfer", "account_credit", "account_credit"),
    ],
)
def test_destinations(method: str, requested: str, expected: str | None) -> None:
    assert concrete_destination(method, requested) == expected  # type: ignore[arg-type]
    if expected is not None:
        assert destination_fits(method, expected)  # type: ignore[arg-type]


def test_a_card_refund_does_not_fit_a_cash_payment() -> None:
    assert not destination_fits("cash", "card_refund")
    assert not destination_fits("card", "e_transfer_return")


def test_money_is_formatted_per_locale_without_floats() -> None:
    assert format_money(3_500, "CAD", "en") == "35.00 CAD"
    assert format_money(44_499, "CAD", "fr") == "444,99 CAD"
    assert format_money(-5, "CAD", "en") == "-0.05 CAD"
