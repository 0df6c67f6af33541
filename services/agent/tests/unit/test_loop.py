"""The model loop: halts end it without another model call; invalid calls are bounded."""

from __future__ import annotations

import json
from typing import Any

from signoff_agent.loop import Answered, Limits, run
from signoff_agent.model import ModelReply, ModelUnavailable, ToolCall
from signoff_agent.toolbox import Paused, Proposed, Stopped, ToolError, ToolOutcome, ToolResult


class ScriptedModel:
    def __init__(self, *replies: ModelReply | Exception) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, Any]]] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        self.calls.append([dict(m) for m in messages])
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class Tools:
    def __init__(self, outcomes: dict[str, list[ToolOutcome]]) -> None:
        self.outcomes = outcomes
        self.called: list[tuple[str, str]] = []

    def specs(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": name}} for name in self.outcomes]

    async def call(self, name: str, raw_arguments: str) -> ToolOutcome:
        self.called.append((name, raw_arguments))
        return self.outcomes[name].pop(0)


def _call(name: str, args: str = "{}", call_id: str = "c1") -> ModelReply:
    return ModelReply(content=None, tool_calls=(ToolCall(call_id, name, args),))


async def test_text_ends_the_turn() -> None:
    model = ScriptedModel(ModelReply(content="  Hello  "))
    assert await run(model, Tools({}), [], Limits()) == Answered("Hello")


async def test_tool_results_go_back_and_a_proposal_halts_without_another_call() -> None:
    model = ScriptedModel(_call("read"), _call("propose", call_id="c2"), ModelReply("never"))
    tools = Tools({"read": [ToolResult({"x": 1})], "propose": [Proposed("prp_1", "a.b")]})
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    ending = await run(model, tools, messages, Limits())
    assert ending == Proposed("prp_1", "a.b")
    assert len(model.calls) == 2
    second = model.calls[1]
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"x": 1})}
    assert second[-2]["tool_calls"][0]["function"]["name"] == "read"


async def test_a_pause_halts_too() -> None:
    model = ScriptedModel(_call("wait"), ModelReply("never"))
    ending = await run(model, Tools({"wait": [Paused("pp_1")]}), [], Limits())
    assert ending == Paused("pp_1") and len(model.calls) == 1


async def test_errors_go_back_until_the_third_then_the_person_is_told() -> None:
    model = ScriptedModel(_call("propose"), _call("propose"), _call("propose"), ModelReply("no"))
    bad = ToolError("payment_not_found", "This payment is not part of the order.", kind="a.b")
    tools = Tools({"propose": [bad, bad, bad]})
    ending = await run(model, tools, [], Limits(max_invalid_calls=3))
    assert isinstance(ending, Stopped) and ending.code == "invalid_calls_exhausted"
    assert ending.params["tries"] == 3
    assert ending.params["reason"] == {"code": "payment_not_found", "params": {}}
    assert len(model.calls) == 3
    told = json.loads(model.calls[2][-1]["content"])
    assert told["error"]["code"] == "payment_not_found" and told["tries_left"] == 1


async def test_a_model_failure_stops_the_turn_with_its_cause() -> None:
    model = ScriptedModel(_call("read"), ModelUnavailable("model_timeout"))
    ending = await run(model, Tools({"read": [ToolResult({})]}), [], Limits())
    assert ending == Stopped("model_unavailable", {"cause": "model_timeout"})


async def test_the_number_of_model_calls_is_bounded() -> None:
    model = ScriptedModel(*[_call("read") for _ in range(3)])
    tools = Tools({"read": [ToolResult({}) for _ in range(3)]})
    ending = await run(model, tools, [], Limits(max_model_calls=3))
    assert ending == Stopped("turn_limit", {}) and len(model.calls) == 3


async def test_a_stopped_tool_halts_and_is_not_counted_as_invalid() -> None:
    model = ScriptedModel(_call("propose"), ModelReply("never"))
    stop = Stopped("proposal_refused", {"reason": {"code": "organization_quota", "params": {}}})
    assert await run(model, Tools({"propose": [stop]}), [], Limits()) == stop
