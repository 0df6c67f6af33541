"""What each operation says it did: ``render_result`` from the stored result, in each locale,
and the product-configuration fingerprint a refund's preview rests on."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_club.domain import product_configuration
from signoff_club.operations.apply_broadcast_draft import ApplyBroadcastDraft
from signoff_club.operations.refund_missing_discount import RECHECKED, RefundMissingDiscount
from signoff_contracts.operations import LOCALES

CARD_RESULT: dict[str, Any] = {
    "refund_id": "rfd_1",
    "amount_cents": 3_500,
    "currency": "CAD",
    "destination": "card_refund",
    "resulting_order_total_cents": 40_999,
    "provider_refund_id": "re_123",
    "card_last4": "4242",
    "rechecked": list(RECHECKED),
}
#: a result stored before the card, the provider's id and the re-checked facts were kept
OLD_RESULT = {
    key: CARD_RESULT[key]
    for key in (
        "refund_id",
        "amount_cents",
        "currency",
        "destination",
        "resulting_order_total_cents",
    )
}


def test_a_card_refund_says_how_much_to_which_card_and_the_new_total() -> None:
    op = RefundMissingDiscount()
    result = op.parse_result(CARD_RESULT)
    assert op.render_result(result, "en") == (
        "Refunded 35.00 CAD to the card ending 4242 (refund re_123); "
        "the order total is now 409.99 CAD."
    )
    fr = op.render_result(result, "fr")
    assert "35,00 CAD" in fr and "4242" in fr and "re_123" in fr and "409,99 CAD" in fr
    assert "product_configuration" in result.rechecked


@pytest.mark.parametrize("destination", ["account_credit", "e_transfer_return"])
def test_a_local_refund_names_where_it_went_and_the_club_refund(destination: str) -> None:
    op = RefundMissingDiscount()
    data = {**CARD_RESULT, "destination": destination, "provider_refund_id": None}
    data["card_last4"] = None
    for locale in LOCALES:
        said = op.render_result(op.parse_result(data), locale)
        assert "rfd_1" in said and "4242" not in said
    expected = {"account_credit": "participant's account", "e_transfer_return": "e-transfer"}
    assert expected[destination] in op.render_result(op.parse_result(data), "en")


def test_a_result_stored_before_the_new_fields_still_renders() -> None:
    op = RefundMissingDiscount()
    result = op.parse_result(OLD_RESULT)
    assert result.card_last4 is None and result.rechecked == ()
    assert op.render_result(result, "en") == (
        "Refunded 35.00 CAD to the card that paid (refund rfd_1); "
        "the order total is now 409.99 CAD."
    )
    assert "la carte qui a payé" in op.render_result(result, "fr")


def test_the_broadcast_says_which_form_subject_and_audience() -> None:
    op = ApplyBroadcastDraft()
    result = op.parse_result(
        {
            "broadcast_id": "brd_1",
            "audience_count": 3,
            "broadcast_name": "Spring",
            "subject": "Season opener",
            "rechecked": ["audience_count"],
        }
    )
    assert op.render_result(result, "en") == (
        "Copied the draft into the form “Spring”: subject “Season opener”, 3 recipients. "
        "Nothing was sent."
    )
    assert "« Spring »" in op.render_result(result, "fr")
    old = op.parse_result({"broadcast_id": "brd_1", "audience_count": 3})
    for locale in LOCALES:
        assert "brd_1" in op.render_result(old, locale)


BASE = {
    "product_id": "prd_1",
    "name": "Adult league",
    "unit_price_cents": 34_999,
    "discount_id": "dsc_1",
    "kind": "percentage",
    "value": 1_000,
}


def test_the_configuration_fingerprint_is_stable() -> None:
    first = product_configuration(**BASE)  # type: ignore[arg-type]
    assert first == product_configuration(**BASE)  # type: ignore[arg-type]
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"name": "Adult league (winter)"},
        {"unit_price_cents": 29_999},
        {"kind": "fixed"},
        {"value": 1_500},
        {"product_id": "prd_2"},
        {"discount_id": "dsc_2"},
    ],
)
def test_any_stored_configuration_change_moves_the_fingerprint(change: dict[str, Any]) -> None:
    assert product_configuration(**{**BASE, **change}) != product_configuration(**BASE)  # type: ignore[arg-type]


def test_a_contract_frozen_before_the_fingerprint_still_parses() -> None:
    arguments = RefundMissingDiscount().parse_arguments(
        {
            "order_id": "ord_1",
            "payment_id": "pay_1",
            "line_item_id": "lin_1",
            "discount_id": "dsc_1",
            "amount_cents": 3_500,
            "currency": "CAD",
            "destination": "card_refund",
            "payment_ref": "ch_1",
            "order_total_cents": 44_499,
        }
    )
    assert arguments.product_configuration is None
