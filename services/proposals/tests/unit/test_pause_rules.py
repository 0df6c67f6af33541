"""The pure rules of pause points: the flat form-schema subset, the data, the answers per kind."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from signoff_contracts import forms, pause_requests
from signoff_contracts.v2 import PausePointRequested
from signoff_proposals.pause_points import rules as pause_rules
from signoff_proposals.pause_points.rules import Resolution

FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "E-mail", "maxLength": 20},
        "seats": {"type": "integer", "minimum": 1, "maximum": 4},
        "share": {"type": "number", "minimum": 0.5},
        "tier": {"type": "string", "enum": ["bronze", "gold"]},
        "agree": {"type": "boolean"},
    },
    "required": ["email"],
}


def field(**spec: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"f": spec}}


def test_the_documented_shape_is_accepted():
    assert forms.check_schema(FORM) is None
    assert forms.check_schema(field(type="boolean")) is None  # "required" is optional


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ([], "not_an_object_schema"),
        ({"type": "array", "items": {}}, "not_an_object_schema"),
        ({"type": "object", "properties": {}}, "no_fields"),
        (FORM | {"additionalProperties": False}, "unsupported_keyword"),
        (field(type="object", properties={}), "unsupported_type"),
        (field(type="array", items={"type": "string"}), "unsupported_type"),
        (field(type="string", format="email"), "unsupported_keyword"),
        (field(type="string", **{"$ref": "#/x"}), "unsupported_keyword"),
        (field(**{"$ref": "#/x"}), "unsupported_type"),
        (field(type="string", maxLength=0), "bad_max_length"),
        (field(type="string", maxLength=8001), "bad_max_length"),
        (field(type="integer", maxLength=3), "bad_max_length"),
        (field(type="string", minimum=1), "bad_bounds"),
        (field(type="integer", minimum=5, maximum=1), "bad_bounds"),
        (field(type="integer", minimum=True), "bad_bounds"),
        (field(type="string", enum=[]), "bad_enum"),
        (field(type="string", enum=["a", "a"]), "bad_enum"),
        (field(type="integer", enum=[1, "2"]), "bad_enum"),
        (field(type="string", title=3), "bad_title"),
        ({"type": "object", "properties": {"1st": {"type": "string"}}}, "bad_field_name"),
        ({"type": "object", "properties": {"f": "string"}}, "not_a_field"),
        (
            {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(21)}},
            "too_many_fields",
        ),
        (field(type="string") | {"required": ["g"]}, "required_not_declared"),
        (field(type="string") | {"required": ["f", "f"]}, "bad_required"),
        (field(type="string") | {"required": "f"}, "bad_required"),
        ({"type": "object", "properties": {"card_number": {"type": "string"}}}, "secret_field"),
        ({"type": "object", "properties": {"pin": {"type": "integer"}}}, "secret_field"),
        (field(type="string", title="Your password"), "secret_field"),
        (field(type="string", format="password"), "secret_field"),
        (field(type="string", writeOnly=True), "secret_field"),
    ],
)
def test_anything_outside_the_subset_is_refused_with_why(schema, why):
    reason = forms.check_schema(schema)
    assert reason is not None and reason.code == "invalid_form_schema"
    assert reason.params["why"] == why


@pytest.mark.parametrize(
    ("data", "field_name", "why"),
    [
        ([], None, "not_an_object"),
        ({}, "email", "required"),
        ({"email": "a", "other": 1}, "other", "unknown_field"),
        ({"email": 5}, "email", "wrong_type"),
        ({"email": "a" * 21}, "email", "too_long"),
        ({"email": "a", "seats": True}, "seats", "wrong_type"),
        ({"email": "a", "seats": 2.0}, "seats", "wrong_type"),
        ({"email": "a", "seats": 0}, "seats", "below_minimum"),
        ({"email": "a", "seats": 5}, "seats", "above_maximum"),
        ({"email": "a", "share": float("nan")}, "share", "wrong_type"),
        ({"email": "a", "share": 0.25}, "share", "below_minimum"),
        ({"email": "a", "tier": "silver"}, "tier", "not_in_enum"),
        ({"email": "a", "agree": 1}, "agree", "wrong_type"),
    ],
)
def test_data_must_fill_in_the_form_exactly(data, field_name, why):
    reason = forms.check_data(FORM, data)
    assert reason is not None and reason.code == "invalid_data"
    assert reason.params.get("field") == field_name and reason.params["why"] == why


def test_data_that_fills_in_the_form_passes():
    assert forms.check_data(FORM, {"email": "a@b.c"}) is None
    full = {"email": "a@b.c", "seats": 4, "share": 1, "tier": "gold", "agree": False}
    assert forms.check_data(FORM, full) is None


def request(**fields: Any) -> PausePointRequested:
    return PausePointRequested(
        pause_point_id="pp_01abc",
        token="a-token",
        title=fields.pop("title", "Go?"),
        description="",
        **fields,
    )


def test_the_model_s_own_limits_become_reason_codes():
    def code_for(**fields: Any) -> str:
        with pytest.raises(ValidationError) as caught:
            request(**fields)
        return pause_rules.reason_for_invalid(caught.value).code

    assert code_for(title="x" * 81) == "title_too_long"
    assert code_for(options=[str(i) for i in range(9)], kind="choice") == "too_many_options"
    assert code_for(kind="poll") == "unknown_kind"
    assert code_for(options=[1, 2], kind="choice") == "invalid_message"


@pytest.mark.parametrize(
    ("kind", "answer", "code"),
    [
        ("approval", Resolution("approve"), None),
        ("approval", Resolution("decline", reply="no"), None),
        ("approval", Resolution("option", option="a"), "action_not_allowed"),
        ("choice", Resolution("option", option="a"), None),
        ("choice", Resolution("option", option="c"), "option_not_offered"),
        ("choice", Resolution("decline", option="a"), "unexpected_option"),
        ("data_entry", Resolution("data", data={"email": "x"}), None),
        ("data_entry", Resolution("approve"), "action_not_allowed"),
        ("data_entry", Resolution("data"), "data_required"),
    ],
)
def test_an_answer_must_fit_the_kind(kind, answer, code):
    options = ["a", "b"] if kind == "choice" else []
    schema = FORM if kind == "data_entry" else None
    reason = pause_rules.check_resolution(kind, options, schema, answer)
    assert (reason.code if reason else None) == code


def test_the_stored_resolution_leaves_out_what_was_not_given():
    assert Resolution("approve").stored() == {"action": "approve"}
    assert Resolution("option", option="a", reply="ok").stored() == {
        "action": "option",
        "option": "a",
        "reply": "ok",
    }


PAYLOAD = {"draft_id": "d_1", "subject": "Spring news"}


@pytest.mark.parametrize(
    ("kind", "form", "stored", "answer", "code"),
    [
        # no payload to edit, or a decline (which carries nothing on)
        ("approval", None, None, Resolution("approve", payload={"x": 1}), "unexpected_payload"),
        ("approval", None, PAYLOAD, Resolution("decline", payload=PAYLOAD), "unexpected_payload"),
        (
            "approval",
            None,
            PAYLOAD,
            Resolution("approve", payload={"x": "y" * pause_requests.MAX_PAYLOAD_BYTES}),
            "payload_too_large",
        ),
        # with a schema, the edit must fill it in
        (
            "data_entry",
            FORM,
            {"email": "a@b.c"},
            Resolution("data", data={"email": "a@b.c"}, payload={"seats": "many"}),
            "invalid_data",
        ),
    ],
)
def test_an_edited_payload_is_refused_where_it_does_not_fit(kind, form, stored, answer, code):
    reason = pause_rules.check_resolution(kind, [], form, answer, payload=stored)
    assert reason is not None and reason.code == code


def test_an_edited_payload_that_fits_travels_in_the_stored_resolution():
    edited = {**PAYLOAD, "subject": "Spring news (final)"}
    answer = Resolution("approve", reply="ok", payload=edited)
    assert pause_rules.check_resolution("approval", [], None, answer, payload=PAYLOAD) is None
    assert answer.stored() == {"action": "approve", "reply": "ok", "payload": edited}
    fits = Resolution("data", data={"email": "a@b.c"}, payload={"email": "x@y.z", "seats": 2})
    assert pause_rules.check_resolution("data_entry", [], FORM, fits, payload={}) is None
