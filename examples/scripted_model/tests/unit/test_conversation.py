"""The script authors' kit, and the sample script, on hand-made conversations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from signoff_scripted_model import (
    ChatRequest,
    Reply,
    ScriptedConversation,
    ScriptExhausted,
    last_tool_error,
    last_user_message,
    latest_results,
    offered_tools,
    steps_since_user,
    tool_history,
    tool_results,
)
from signoff_scripted_model.samples import LOOKUP_THEN_ACT


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


def _result(call_id: str, value: Any) -> dict[str, Any]:
    content = value if isinstance(value, str) else json.dumps(value)
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _request(*messages: dict[str, Any], tools: tuple[str, ...] = ()) -> ChatRequest:
    offered = [{"type": "function", "function": {"name": name}} for name in tools]
    return ChatRequest.from_body({"model": "m", "messages": list(messages), "tools": offered})


USER = {"role": "user", "content": "refund ord_1"}
FIND = {"role": "assistant", "tool_calls": [_call("c1", "find_orders", {"query": "q"})]}
FOUND = _result("c1", {"items": [{"id": "ord_1"}]})
REFUND = {
    "role": "assistant",
    "tool_calls": [
        _call("c2", "refund_order", {"order_id": "ord_1", "reason": "missing_discount"})
    ],
}


def test_reading_the_conversation() -> None:
    request = _request(
        {"role": "user", "content": "earlier"}, USER, FIND, FOUND, tools=("find_orders", "x")
    )

    assert last_user_message(request) == "refund ord_1"
    assert offered_tools(request) == ["find_orders", "x"]
    assert tool_results(request, "find_orders") == [{"items": [{"id": "ord_1"}]}]
    assert tool_results(request, "refund_order") == []
    [result] = tool_history(request)
    assert (result.name, result.call_id, result.arguments) == ("find_orders", "c1", {"query": "q"})
    assert latest_results(request) == [result]
    assert steps_since_user(request) == 1
    assert last_user_message(_request({"role": "system", "content": "s"})) == ""


def test_only_the_latest_results_are_news() -> None:
    answered = _request(USER, FIND, FOUND, {"role": "assistant", "content": "ok"})

    assert latest_results(answered) == []
    assert len(tool_history(answered)) == 1


@pytest.mark.parametrize(
    ("value", "message", "code"),
    [
        ({"error": "gone"}, "gone", None),
        ({"error": {"code": "stale", "message": "order changed"}}, "order changed", "stale"),
        ({"error": {"code": "stale"}}, "stale", "stale"),
    ],
)
def test_tool_errors_are_objects_with_an_error_member(
    value: Any, message: str, code: str | None
) -> None:
    error = last_tool_error(_request(USER, FIND, _result("c1", value)))

    assert error is not None
    assert (error.message, error.code, error.result.name) == (message, code, "find_orders")


def test_an_error_already_answered_is_not_the_last_error() -> None:
    failed = _request(USER, FIND, _result("c1", {"error": "x"}))
    recovered = _request(USER, FIND, _result("c1", {"error": "x"}), REFUND, _result("c2", "ok"))

    assert last_tool_error(failed) is not None
    assert last_tool_error(recovered) is None
    assert last_tool_error(_request(USER, FIND, _result("c1", "plain text"))) is None


def test_scripted_conversation_steps_per_assistant_turn() -> None:
    script = ScriptedConversation(
        "two",
        [
            Reply.call("find_orders", {"query": "q"}),
            lambda request: Reply.say(
                str(tool_results(request, "find_orders")[-1]["items"][0]["id"])
            ),
        ],
    )

    assert script.step(_request(USER)) == Reply.call("find_orders", {"query": "q"})
    assert script.step(_request(USER, FIND, FOUND)) == Reply.say("ord_1")
    assert script.step(
        _request(USER, FIND, FOUND, {"role": "assistant", "content": "ord_1"}, USER)
    ).tool_calls
    with pytest.raises(ScriptExhausted, match="asked for step 3"):
        script.step(_request(USER, FIND, FOUND, {"role": "assistant", "content": "x"}))


def test_the_sample_finds_then_refunds_the_found_id() -> None:
    assert LOOKUP_THEN_ACT.step(_request(USER)) == Reply.call(
        "find_orders", {"query": "refund ord_1"}
    )
    assert LOOKUP_THEN_ACT.step(_request(USER, FIND, FOUND)) == Reply.call(
        "refund_order", {"order_id": "ord_1", "reason": "missing_discount"}
    )
    nothing = _request(USER, FIND, _result("c1", {"items": []}))
    assert LOOKUP_THEN_ACT.step(nothing) == Reply.say("No order matches 'q'.")


def test_the_sample_retries_once_with_an_allowed_reason_then_gives_up() -> None:
    refusal = {"error": {"code": "unsupported_reason", "message": "no", "allowed": ["goodwill"]}}
    first = _request(USER, FIND, FOUND, REFUND, _result("c2", refusal))
    retry = {
        "role": "assistant",
        "tool_calls": [_call("c3", "refund_order", {"order_id": "ord_1", "reason": "goodwill"})],
    }
    again = _request(
        USER, FIND, FOUND, REFUND, _result("c2", refusal), retry, _result("c3", refusal)
    )

    assert LOOKUP_THEN_ACT.step(first) == Reply.call(
        "refund_order", {"order_id": "ord_1", "reason": "goodwill"}
    )
    assert LOOKUP_THEN_ACT.step(again) == Reply.say("I could not do that: no")
