"""A ``data_entry`` form may not ask for secrets: the one rule both services apply."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_contracts.secret_fields import secret_field, secret_fields


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "newPassword",
        "user_passwd",
        "passcode",
        "PIN",
        "pin_code",
        "cvv",
        "CVC2",
        "card_number",
        "cardNumber",
        "card-no",
        "credit_card",
        "ccn",
        "pan",
        "iban",
        "ssn",
        "social_security_number",
        "client_secret",
        "token",
        "access_token",
        "api_key",
        "apiKey",
        "private_key",
        "otp",
        "security_code",
    ],
)
def test_a_field_named_for_a_secret_is_refused(name: str) -> None:
    assert secret_field(name, {"type": "string"})


@pytest.mark.parametrize(
    "name",
    ["email", "seats", "reason", "pinned", "spin", "company", "panel", "secretary", "shipping"],
)
def test_ordinary_fields_pass(name: str) -> None:
    assert not secret_field(name, {"type": "string", "title": name.title()})


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "string", "title": "Your card number"},
        {"type": "string", "title": "Mot de passe / Password"},
        {"type": "string", "format": "password"},
        {"type": "string", "writeOnly": True},
    ],
)
def test_a_title_or_a_format_can_say_secret_too(spec: dict[str, Any]) -> None:
    assert secret_field("value", spec)


def test_secret_fields_lists_them_in_order() -> None:
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string"}, "pin": {"type": "string"}, "cvv": {}},
    }
    assert secret_fields(schema) == ["pin", "cvv"]
    assert secret_fields({"type": "object"}) == []
    assert secret_fields("nonsense") == []
