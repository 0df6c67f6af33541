"""``wait_for_approval``'s arguments: what goes back to the model as an error, and why."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from signoff_agent import pausing
from signoff_agent.pausing import PauseInvalid, WaitForApprovalArgs, check
from signoff_contracts import pause_requests
from signoff_contracts.assistants import strict_input, strict_parameters

FORM = {
    "type": "object",
    "properties": {"season": {"type": "string", "enum": ["fall"]}, "n": {"type": "integer"}},
    "required": ["season"],
}


def _args(**fields: Any) -> WaitForApprovalArgs:
    base: dict[str, Any] = {
        "title": "Go on?",
        "description": "**Why**",
        "options": None,
        "payload": None,
        "kind": None,
        "form_schema": None,
    }
    return strict_input(WaitForApprovalArgs, {**base, **fields})


def test_kinds_default_from_the_options() -> None:
    assert check(_args()).kind == "approval"
    assert check(_args(options=["A", "B"])).kind == "choice"
    data = check(_args(kind="data_entry", form_schema=json.dumps(FORM)))
    assert data.kind == "data_entry" and data.form_schema == FORM


def test_payload_is_a_json_object_in_a_string() -> None:
    assert check(_args(payload='{"a": 1}')).payload == {"a": 1}
    with pytest.raises(PauseInvalid, match="payload"):
        check(_args(payload="[1, 2]"))
    with pytest.raises(PauseInvalid, match="payload"):
        check(_args(payload="{not json"))


@pytest.mark.parametrize(
    "fields",
    [
        {"title": "T" * 81},
        {"options": [f"o{i}" for i in range(9)]},
        {"kind": "vote"},
        {"title": ""},
        {"surprise": 1},
    ],
)
def test_what_pydantic_refuses(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _args(**fields)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"options": ["A", "A"]}, "options"),
        ({"kind": "choice", "options": ["only"]}, "options"),
        ({"kind": "data_entry"}, "form_schema"),
        ({"kind": "approval", "form_schema": json.dumps(FORM)}, "form_schema"),
        ({"kind": "data_entry", "form_schema": '{"type": "array"}'}, "form_schema"),
        (
            {
                "kind": "data_entry",
                "form_schema": json.dumps(
                    {"type": "object", "properties": {"x": {"type": "object"}}}
                ),
            },
            "form_schema",
        ),
        (
            {
                "kind": "data_entry",
                "form_schema": json.dumps({**FORM, "required": ["nope"]}),
            },
            "form_schema",
        ),
    ],
)
def test_what_the_agent_refuses(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(PauseInvalid) as raised:
        check(_args(**fields))
    assert raised.value.field == field


def test_the_tool_schema_is_strict_and_steers_changes_to_the_propose_tools() -> None:
    schema = strict_parameters(WaitForApprovalArgs)
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(WaitForApprovalArgs.model_fields)
    assert schema["properties"]["payload"]["anyOf"][0]["type"] == "string"
    assert "propose_" in pausing.DESCRIPTION and "NO side effect" in pausing.DESCRIPTION


@pytest.mark.parametrize(
    "field_spec",
    [
        {"card_number": {"type": "string"}},
        {"cvv": {"type": "string", "maxLength": 4}},
        {"code": {"type": "string", "title": "Your PIN"}},
        {"secret": {"type": "string", "format": "password"}},
        {"value": {"type": "string", "writeOnly": True}},
    ],
)
def test_a_form_asking_for_a_secret_is_a_tool_error_naming_the_field(
    field_spec: dict[str, Any],
) -> None:
    schema = {"type": "object", "properties": {"email": {"type": "string"}, **field_spec}}
    with pytest.raises(PauseInvalid) as raised:
        check(_args(kind="data_entry", form_schema=json.dumps(schema)))
    [name] = field_spec
    assert raised.value.field == "form_schema"
    assert repr(name) in raised.value.problem and "secret" in raised.value.problem
    # the tool's description says so before the model tries
    assert "card number" in pausing.DESCRIPTION and "password" in pausing.DESCRIPTION


def test_the_tool_s_limits_are_the_contract_s() -> None:
    schema = WaitForApprovalArgs.model_json_schema()["properties"]
    assert schema["title"]["maxLength"] == pause_requests.MAX_TITLE
    assert schema["description"]["maxLength"] == pause_requests.MAX_DESCRIPTION
    assert schema["options"]["maxItems"] == pause_requests.MAX_OPTIONS
    assert schema["options"]["items"]["maxLength"] == pause_requests.MAX_OPTION


def test_a_payload_over_the_byte_limit_is_refused_before_asking() -> None:
    # under the limit in characters, over it in UTF-8 bytes: the proposals service would refuse it
    wide = json.dumps({"x": "€" * (pause_requests.MAX_PAYLOAD_BYTES // 3)}, ensure_ascii=False)
    assert len(wide) < pause_requests.MAX_PAYLOAD_BYTES
    with pytest.raises(PauseInvalid) as raised:
        check(_args(payload=wide))
    assert raised.value.field == "payload" and "bytes" in raised.value.problem
