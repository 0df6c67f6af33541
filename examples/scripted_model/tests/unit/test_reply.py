"""A reply is text or tool calls, never both, never neither."""

from __future__ import annotations

import pytest
from signoff_scripted_model import Reply, ToolCall


def test_constructors() -> None:
    assert Reply.say("hi").text == "hi"
    assert Reply.call("f").tool_calls == (ToolCall("f", {}),)
    assert Reply.calls([("f", {"a": 1}), ToolCall("g", "{raw")]).tool_calls == (
        ToolCall("f", {"a": 1}),
        ToolCall("g", "{raw"),
    )
    assert Reply.say("").text == ""  # an empty answer is still an answer


@pytest.mark.parametrize("kwargs", [{}, {"text": "x", "tool_calls": (ToolCall("f"),)}])
def test_both_or_neither_is_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="either text or at least one tool call"):
        Reply(**kwargs)  # type: ignore[arg-type]
