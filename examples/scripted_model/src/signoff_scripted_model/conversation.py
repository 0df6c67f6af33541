"""A small kit for writing scripts that react to the conversation instead of replaying a tape.

==========================  ===========================================================
``last_user_message(r)``    text of the latest user message ("" if none)
``offered_tools(r)``        names of the function tools offered, in order
``tool_history(r)``         every tool result with the call it answers, oldest first
``tool_results(r, name)``   parsed results of calls to ``name``, oldest first
``latest_results(r)``       the results answering the latest assistant turn
``last_tool_error(r)``      the error among ``latest_results`` (None if all went well)
``steps_since_user(r)``     assistant turns since the latest user message
``ScriptedConversation``    a script as a list of steps, one per assistant turn
==========================  ===========================================================

A tool result counts as an error when its JSON is an object with an ``"error"`` member:
a string (the message) or an object with ``message`` and/or ``code``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest
from signoff_scripted_model.script import ScriptExhausted

Step = Callable[[ChatRequest], Reply] | Reply


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool message and the call it answers."""

    name: str
    call_id: str
    arguments: Any
    content: str
    value: Any  # the content parsed as JSON, or the content itself when it is not JSON


@dataclass(frozen=True, slots=True)
class ToolError:
    """A tool result that reports a failure."""

    result: ToolResult
    message: str
    code: str | None
    details: Mapping[str, Any]  # the error object ({} when the error is a plain string)


def last_user_message(request: ChatRequest) -> str:
    """The latest user message's text; "" when there is none."""
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content or ""
    return ""


def offered_tools(request: ChatRequest) -> list[str]:
    """Names of the function tools the client offered, in its order."""
    return [tool.name for tool in request.tools]


def tool_history(request: ChatRequest) -> list[ToolResult]:
    """Every tool result in the conversation, joined to its call by ``tool_call_id``."""
    calls = {call.id: call for message in request.messages for call in message.tool_calls}
    history = []
    for message in request.messages:
        if message.role != "tool" or message.tool_call_id is None:
            continue
        call = calls.get(message.tool_call_id)
        content = message.content or ""
        history.append(
            ToolResult(
                name=call.name if call else (message.name or ""),
                call_id=message.tool_call_id,
                arguments=call.parsed_arguments() if call else None,
                content=content,
                value=_parsed(content),
            )
        )
    return history


def tool_results(request: ChatRequest, name: str) -> list[Any]:
    """The parsed results of every call to ``name``, oldest first."""
    return [result.value for result in tool_history(request) if result.name == name]


def latest_results(request: ChatRequest) -> list[ToolResult]:
    """The tool results after the latest assistant message: what the model is told right now."""
    trailing = 0
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        trailing += 1
    return tool_history(request)[-trailing:] if trailing else []


def last_tool_error(request: ChatRequest) -> ToolError | None:
    """The (last) failed result among ``latest_results``; earlier, since-corrected ones are
    history, not news."""
    for result in reversed(latest_results(request)):
        error = _error(result)
        if error is not None:
            return error
    return None


def steps_since_user(request: ChatRequest) -> int:
    """How many assistant turns came after the latest user message."""
    steps = 0
    for message in reversed(request.messages):
        if message.role == "user":
            break
        steps += message.role == "assistant"
    return steps


@dataclass(frozen=True, slots=True)
class ScriptedConversation:
    """Step ``n`` answers the ``n``-th assistant turn after each user message.

    A step is a ``Reply`` or a function of the request (to read tool results). Running past
    the last step raises ``ScriptExhausted``, so a loop in the client fails loudly.
    """

    name: str
    steps: Sequence[Step]

    def step(self, request: ChatRequest) -> Reply:
        """Pick the step by the number of assistant turns since the user spoke."""
        index = steps_since_user(request)
        if index >= len(self.steps):
            raise ScriptExhausted(
                f"script {self.name!r} has {len(self.steps)} step(s) per user message; "
                f"asked for step {index + 1}"
            )
        chosen = self.steps[index]
        return chosen if isinstance(chosen, Reply) else chosen(request)


def _parsed(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


def _error(result: ToolResult) -> ToolError | None:
    if not isinstance(result.value, dict) or "error" not in result.value:
        return None
    error = result.value["error"]
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message") or error.get("detail") or str(code or "error")
        return ToolError(result, str(message), None if code is None else str(code), error)
    return ToolError(result, str(error), None, {})
