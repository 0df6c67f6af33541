"""One set of pause-point limits, checked the same way by the agent and the proposals service."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_contracts import pause_requests
from signoff_contracts.pause_requests import (
    MAX_OPTION,
    MAX_PAYLOAD_BYTES,
    check,
    payload_bytes,
)
from signoff_contracts.v2 import PausePointRequested

FORM = {"type": "object", "properties": {"season": {"type": "string"}}, "required": ["season"]}


def _check(**parts: Any) -> str | None:
    fields: dict[str, Any] = {
        "title": "Go on?",
        "options": [],
        "kind": "approval",
        "payload": None,
        "form_schema": None,
        **parts,
    }
    reason = check(**fields)
    return None if reason is None else reason.code


@pytest.mark.parametrize(
    ("parts", "code"),
    [
        ({}, None),
        ({"title": "   "}, "title_required"),
        ({"kind": "choice", "options": ["A", "B"]}, None),
        ({"kind": "choice", "options": ["A"]}, "too_few_options"),
        ({"kind": "choice", "options": ["A", "A"]}, "duplicate_options"),
        ({"kind": "choice", "options": ["A", " "]}, "option_too_long"),
        ({"kind": "choice", "options": ["A", "x" * MAX_OPTION]}, None),
        ({"kind": "choice", "options": ["A", "x" * (MAX_OPTION + 1)]}, "option_too_long"),
        ({"kind": "approval", "options": ["A", "B"]}, "unexpected_options"),
        ({"kind": "data_entry", "form_schema": FORM}, None),
        ({"kind": "data_entry"}, "form_schema_required"),
        ({"kind": "data_entry", "form_schema": {"type": "array"}}, "invalid_form_schema"),
        ({"kind": "approval", "form_schema": FORM}, "unexpected_form_schema"),
        ({"payload": {"a": 1}}, None),
        ({"payload": {"x": "y" * MAX_PAYLOAD_BYTES}}, "payload_too_large"),
    ],
)
def test_each_rule_has_its_reason_code(parts: dict[str, Any], code: str | None) -> None:
    assert _check(**parts) == code


def test_a_payload_is_measured_in_bytes_of_compact_json() -> None:
    assert payload_bytes({"a": 1}) == len('{"a":1}')  # no spaces counted
    assert payload_bytes({"é": "€"}) == len('{"é":"€"}'.encode())  # UTF-8, not \\u escapes
    wrapper = payload_bytes({"x": ""})
    exactly = {"x": "y" * (MAX_PAYLOAD_BYTES - wrapper)}
    assert payload_bytes(exactly) == MAX_PAYLOAD_BYTES and _check(payload=exactly) is None
    over = {"x": "y" * (MAX_PAYLOAD_BYTES - wrapper + 1)}
    assert _check(payload=over) == "payload_too_large"
    # a multi-byte character counts as its bytes: under the limit in characters, over in bytes
    wide = {"x": "€" * ((MAX_PAYLOAD_BYTES - wrapper) // 3 + 1)}
    assert len(str(wide)) < MAX_PAYLOAD_BYTES and _check(payload=wide) == "payload_too_large"


def test_the_message_declares_the_same_lengths() -> None:
    schema = PausePointRequested.model_json_schema()["properties"]
    assert schema["title"]["maxLength"] == pause_requests.MAX_TITLE
    assert schema["description"]["maxLength"] == pause_requests.MAX_DESCRIPTION
    assert schema["options"]["maxItems"] == pause_requests.MAX_OPTIONS
