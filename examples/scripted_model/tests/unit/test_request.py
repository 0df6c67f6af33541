"""Parsing a body into the typed view scripts read."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_scripted_model.request import ChatRequest, InvalidRequest

CALL = {"id": "call_9", "type": "function", "function": {"name": "find", "arguments": '{"q": 1}'}}


def test_a_conversation_with_tools_and_results() -> None:
    request = ChatRequest.from_body(
        {
            "model": "scripted:x",
            "stream": True,
            "messages": [
                {
                    "role": "developer",
                    "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}],
                },
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_9", "content": '{"ok": true}'},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "find", "strict": True, "parameters": {"type": "object"}},
                },
                {"type": "custom", "custom": {"name": "free_text"}},
            ],
            "temperature": 0.2,
        }
    )

    assert request.model == "scripted:x" and request.stream
    assert request.messages[0].content == "be brief"
    [call] = request.messages[2].tool_calls
    assert (call.id, call.name, call.parsed_arguments()) == ("call_9", "find", {"q": 1})
    assert request.messages[3].tool_call_id == "call_9"
    assert [(t.name, t.strict) for t in request.tools] == [("find", True)]


def test_arguments_that_are_not_json_stay_text() -> None:
    broken = {**CALL, "function": {"name": "find", "arguments": "{oops"}}
    request = ChatRequest.from_body(
        {"model": "m", "messages": [{"role": "assistant", "tool_calls": [broken]}]}
    )

    assert request.messages[0].tool_calls[0].parsed_arguments() == "{oops"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": [{"role": "user", "content": "x"}]}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": 1}]}]},
            "messages[0].tool_calls[0]",
        ),
        (
            {"model": "m", "messages": [{"role": "user"}], "tools": [{"type": "function"}]},
            "tools[0].function",
        ),
    ],
)
def test_what_cannot_be_a_request_names_the_param(body: Any, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as caught:
        ChatRequest.from_body(body)

    assert caught.value.param == param
