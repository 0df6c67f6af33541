"""The API's own rules, checked before a script runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest, InvalidRequest
from signoff_scripted_model.script import ScriptError
from signoff_scripted_model.validation import (
    check_reply,
    check_request,
    strict_schema_problems,
)


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class Refund(BaseModel):
    """A model-facing request as an operation declares it."""

    model_config = ConfigDict(extra="forbid")

    order_id: str
    notes: list[Note]
    reason: str | None


def _request(messages: list[Any], tools: list[Any] | None = None) -> ChatRequest:
    return ChatRequest.from_body({"model": "m", "messages": messages, "tools": tools or []})


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_a_pydantic_schema_with_forbidden_extras_and_no_defaults_is_strict() -> None:
    assert list(strict_schema_problems(Refund.model_json_schema())) == []


def test_open_objects_and_optional_properties_are_not() -> None:
    class Open(BaseModel):
        text: str

    class Loose(BaseModel):
        note: Open
        limit: int = 10

    problems = list(strict_schema_problems(Loose.model_json_schema()))

    assert problems == [
        "In context=(), 'additionalProperties' is required to be supplied and to be false.",
        "In context=(), 'required' is required to be supplied and to be an array including "
        "every key in properties. Missing 'limit'.",
        "In context=('$defs', 'Open'), 'additionalProperties' is required to be supplied and "
        "to be false.",
    ]


def test_a_non_object_root_is_not_strict() -> None:
    assert len(list(strict_schema_problems({"type": "string"}))) == 1


def test_loose_schemas_are_fine_without_strict() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}

    check_request(_request([{"role": "user", "content": "x"}], [tool]))


@pytest.mark.parametrize("name", ["order.refund", "with space", "x" * 65, ""])
def test_tool_names_outside_the_pattern_are_refused(name: str) -> None:
    tool = {"type": "function", "function": {"name": name}}

    with pytest.raises(InvalidRequest, match="does not match pattern"):
        check_request(_request([{"role": "user", "content": "x"}], [tool]))


def test_every_call_answered_in_any_order_is_fine() -> None:
    check_request(
        _request(
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [_call("a"), _call("b")]},
                {"role": "tool", "tool_call_id": "b", "content": "{}"},
                {"role": "tool", "tool_call_id": "a", "content": "{}"},
                {"role": "assistant", "content": "done"},
            ]
        )
    )


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        (
            [
                {"role": "assistant", "tool_calls": [_call("a"), _call("b")]},
                {"role": "tool", "tool_call_id": "a", "content": "{}"},
            ],
            "messages.[0].role",
        ),
        ([{"role": "tool", "tool_call_id": "a", "content": "{}"}], "messages.[0].role"),
        (
            [
                {"role": "assistant", "tool_calls": [_call("a")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "2"},
            ],
            "messages.[2].role",
        ),
    ],
)
def test_unpaired_calls_and_results_are_refused(messages: list[Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_request(_request(messages))

    assert caught.value.param == param


def _with(**body: Any) -> ChatRequest:
    return ChatRequest.from_body(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], **body}
    )


TWO = Reply.calls([("f", {}), ("g", {})])


@pytest.mark.parametrize(
    ("body", "reply", "problem"),
    [
        ({"parallel_tool_calls": False}, TWO, "2 tool calls, but parallel_tool_calls is false"),
        ({"tool_choice": "none"}, Reply.call("f"), "tool_choice is 'none'"),
        ({"tool_choice": "required"}, Reply.say("x"), "tool_choice is 'required'"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "g"}}},
            Reply.call("f"),
            "tool_choice names 'g'",
        ),
    ],
)
def test_replies_the_request_did_not_allow_are_script_errors(
    body: dict[str, Any], reply: Reply, problem: str
) -> None:
    with pytest.raises(ScriptError, match=problem):
        check_reply(_with(**body), reply)


@pytest.mark.parametrize(
    ("body", "reply"),
    [
        ({}, TWO),
        ({"parallel_tool_calls": True}, TWO),
        ({"tool_choice": "auto"}, Reply.say("x")),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, Reply.call("f")),
    ],
)
def test_replies_within_what_was_allowed_pass(body: dict[str, Any], reply: Reply) -> None:
    check_reply(_with(**body), reply)
