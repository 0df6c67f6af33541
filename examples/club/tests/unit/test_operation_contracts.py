"""The club's operations as contracts: well-formed, strict requests, fixed previews per locale.

That every reason code has a text in every locale is a check of the conformance kit
(``test_every_reason_code_has_a_text_in_every_locale``), run for each operation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_club.operations.apply_broadcast_draft import ApplyBroadcastDraft
from signoff_club.operations.refund_missing_discount import RefundMissingDiscount
from signoff_contracts.operations import LOCALES, Actor, AnyOperation, Scope, check_operation
from signoff_runtime.registry import load_operations

REFUND_REQUEST = {
    "payment_id": "pay_1",
    "line_item_id": "lin_1",
    "discount_id": "dsc_1",
    "destination": "original_payment_method",
}


#: every registered operation, found by entry point (a new one is checked without an edit here)
REGISTERED = sorted((type(op) for op in load_operations()), key=lambda cls: cls.kind)


@pytest.mark.parametrize("cls", REGISTERED, ids=lambda cls: cls.kind)
def test_operations_are_complete(cls: type) -> None:
    check_operation(cls)


def test_the_model_cannot_name_an_amount() -> None:
    with pytest.raises(ValidationError, match="amount_cents"):
        RefundMissingDiscount().parse_request({**REFUND_REQUEST, "amount_cents": 1})


def test_the_refund_request_schema_is_only_the_four_choices() -> None:
    schema = RefundMissingDiscount.Request.model_json_schema()
    assert set(schema["properties"]) == {"payment_id", "line_item_id", "discount_id", "destination"}
    assert schema["additionalProperties"] is False
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert schema["properties"]["destination"]["enum"] == [
        "original_payment_method",
        "account_credit",
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"segment_ids": []},
        {"segment_ids": [f"seg_{i}" for i in range(21)]},
        {"segment_ids": ["seg_1", "seg_1"]},
        {"subject": "x" * 201},
        {"body": "x" * 20_001},
        {"audience_count": 3},
    ],
)
def test_broadcast_request_bounds(change: dict[str, object]) -> None:
    request = {"segment_ids": ["seg_1"], "subject": "Hi", "body": "Hello"}
    with pytest.raises(ValidationError):
        ApplyBroadcastDraft().parse_request({**request, **change})


@pytest.mark.parametrize("cls", REGISTERED, ids=lambda cls: cls.kind)
def test_only_a_manager_of_the_same_organization_may(cls: type[AnyOperation]) -> None:
    op = cls()
    scope = Scope(organization_id="org_a", section=cls.section, resource_id="x_1")
    assert op.authorize(Actor(user_id="usr_1", organization_id="org_a", role="manager"), scope)
    assert not op.authorize(Actor(user_id="usr_1", organization_id="org_a", role="viewer"), scope)
    assert not op.authorize(Actor(user_id="usr_1", organization_id="org_b", role="manager"), scope)


def test_refund_preview_renders_in_both_locales() -> None:
    op = RefundMissingDiscount()
    preview = op.parse_preview(
        {
            "participant_name": "Alex Tremblay",
            "product_name": "Adult league",
            "discount_name": "Early-bird 10 %",
            "payment_method": "card",
            "amount_cents": 3_500,
            "currency": "CAD",
            "current_order_total_cents": 44_499,
            "resulting_order_total_cents": 40_999,
            "destination": "card_refund",
            "product_configuration_unchanged": True,
        }
    )
    en, fr = op.render_preview(preview, "en"), op.render_preview(preview, "fr")
    assert {line.value for line in en.lines} >= {"35.00 CAD", "444.99 CAD", "409.99 CAD", "Card"}
    assert {line.value for line in fr.lines} >= {
        "35,00 CAD",
        "409,99 CAD",
        "Carte",
        "Inchangée depuis la vente",
    }
    assert en.title != fr.title and len(en.lines) == len(fr.lines) == 9


def test_broadcast_preview_shows_the_draft_as_given() -> None:
    op = ApplyBroadcastDraft()
    body = "**Bold** <script>x</script>"
    preview = op.parse_preview(
        {
            "broadcast_name": "Spring",
            "segment_names": ["Adults", "Juniors"],
            "audience_count": 3,
            "subject": "Hi",
            "body": body,
        }
    )
    for locale in LOCALES:
        rendered = op.render_preview(preview, locale)
        values = [line.value for line in rendered.lines]
        assert body in values and "Adults, Juniors" in values
    assert "3 people" in [line.value for line in op.render_preview(preview, "en").lines]
