"""The model loop of one turn: call the model, run its tool calls, stop on a halt.

The loop is bounded three ways: model calls per turn, invalid tool calls per turn (the model
is told what was wrong each time; after the last try the person is told instead), and the
size of what goes back to the model. It never calls the model after a proposal or a pause
point is stored, and never to confirm, execute or paraphrase anything: the application
writes what the person reads after a halt.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from signoff_agent.model import ChatModel, ModelReply, ModelUnavailable
from signoff_agent.toolbox import HALTS, Paused, Proposed, Stopped, ToolError, ToolOutcome


@dataclass(frozen=True, slots=True)
class Answered:
    text: str


Ending = Answered | Proposed | Paused | Stopped
Progress = Callable[[str, dict[str, Any]], Awaitable[None]]


class Tools(Protocol):
    def specs(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, raw_arguments: str) -> ToolOutcome: ...


@dataclass(frozen=True, slots=True)
class Limits:
    max_model_calls: int = 8
    max_invalid_calls: int = 3
    reply_chars: int = 8000


async def _quiet(_: str, __: dict[str, Any]) -> None:
    return None


async def run(
    model: ChatModel,
    tools: Tools,
    messages: list[dict[str, Any]],
    limits: Limits,
    progress: Progress = _quiet,
) -> Ending:
    """Run until the model answers in text or a tool halts; ``messages`` grows in place."""
    invalid = 0
    specs = tools.specs()
    for _ in range(limits.max_model_calls):
        try:
            reply = await model.complete(messages, specs)
        except ModelUnavailable as exc:
            return Stopped("model_unavailable", {"cause": exc.code})
        if not reply.tool_calls:
            return Answered((reply.content or "").strip()[: limits.reply_chars])
        messages.append(_assistant(reply))
        for call in reply.tool_calls:
            await progress("tool", {"name": call.name})
            outcome = await tools.call(call.name, call.arguments)
            if isinstance(outcome, HALTS):
                return outcome
            if isinstance(outcome, ToolError):
                invalid += 1
                if invalid >= limits.max_invalid_calls:
                    return _exhausted(invalid, outcome)
                content = {**outcome.as_content(), "tries_left": limits.max_invalid_calls - invalid}
            else:
                content = outcome.data
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": json.dumps(content, default=str),
                }
            )
    return Stopped("turn_limit", {})


def _assistant(reply: ModelReply) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": reply.content,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ],
    }


def _exhausted(tries: int, error: ToolError) -> Stopped:
    reason = {"code": error.code, "params": {}}
    return Stopped(
        "invalid_calls_exhausted", {"tries": tries, "reason": reason, "kind": error.kind}
    )
