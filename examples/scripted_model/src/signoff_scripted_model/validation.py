"""The request rules OpenAI enforces that an agent loop most often breaks.

An offline server that accepted what the real API refuses would let bugs through to the
first real run, so these are checked before any script runs and answered with a 400 shaped
like OpenAI's: tool names must match ``^[a-zA-Z0-9_-]{1,64}$`` (an operation kind such as
``order.refund_missing_discount`` does not); a ``strict`` tool's schema must close every
object (``additionalProperties: false``) and require every property; every ``tool``
message must answer a ``tool_call_id`` of the assistant message just before it; and every
tool call of an assistant message must be answered before the conversation goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest, InvalidRequest
from signoff_scripted_model.script import ScriptError

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_request(request: ChatRequest) -> None:
    """Raise ``InvalidRequest`` for the first rule the request breaks."""
    for index, tool in enumerate(request.tools):
        if not _TOOL_NAME.fullmatch(tool.name):
            raise InvalidRequest(
                f"Invalid 'tools[{index}].function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"tools[{index}].function.name",
            )
        if tool.strict:
            problem = next(strict_schema_problems(tool.parameters), None)
            if problem is not None:
                raise InvalidRequest(
                    f"Invalid schema for function '{tool.name}': {problem}",
                    f"tools[{index}].function.parameters",
                )
    _check_tool_messages(request)


def check_reply(request: ChatRequest, reply: Reply) -> None:
    """Raise ``ScriptError`` when ``reply`` is one the request did not allow a model."""
    calls = [call.name for call in reply.tool_calls]
    choice = request.tool_choice
    if request.parallel_tool_calls is False and len(calls) > 1:
        raise ScriptError(f"{len(calls)} tool calls, but parallel_tool_calls is false")
    if choice == "none" and calls:
        raise ScriptError("a tool call, but tool_choice is 'none'")
    if choice == "required" and not calls:
        raise ScriptError("text, but tool_choice is 'required'")
    if choice not in (None, "none", "auto", "required") and calls != [choice]:
        raise ScriptError(f"tool_choice names {choice!r}, but the reply calls {calls}")


def strict_schema_problems(schema: Mapping[str, Any]) -> Iterator[str]:
    """Why a schema is not usable with ``strict: true``, outermost problem first."""
    if schema.get("type") != "object":
        yield "In context=(), schema must be a JSON Schema of 'type: \"object\"'."
        return
    yield from _walk(schema, ())


def _walk(node: Any, context: tuple[str, ...]) -> Iterator[str]:
    if not isinstance(node, Mapping):
        return
    if node.get("type") == "object" or "properties" in node:
        yield from _object_problems(node, context)
    for key in ("properties", "$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            yield from _walk(child, (*context, key, name))
    if isinstance(node.get("items"), Mapping):
        yield from _walk(node["items"], (*context, "items"))
    for key in ("anyOf", "allOf", "oneOf"):
        for index, child in enumerate(node.get(key) or []):
            yield from _walk(child, (*context, key, str(index)))


def _object_problems(node: Mapping[str, Any], context: tuple[str, ...]) -> Iterator[str]:
    where = f"In context={context!r}"
    if node.get("additionalProperties") is not False:
        yield f"{where}, 'additionalProperties' is required to be supplied and to be false."
    properties = list(node.get("properties") or {})
    missing = [name for name in properties if name not in (node.get("required") or [])]
    if missing:
        yield (
            f"{where}, 'required' is required to be supplied and to be an array including "
            f"every key in properties. Missing '{missing[0]}'."
        )


def _check_tool_messages(request: ChatRequest) -> None:
    """Tool calls and their answers pair up, in order, as the API demands."""
    open_calls: set[str] = set()
    opened_at = -1
    for index, message in enumerate(request.messages):
        if message.role == "tool":
            if message.tool_call_id not in open_calls:
                raise InvalidRequest(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            _unanswered(opened_at, open_calls)
        open_calls = {call.id for call in message.tool_calls}
        opened_at = index
    if open_calls:
        _unanswered(opened_at, open_calls)


def _unanswered(index: int, ids: set[str]) -> None:
    raise InvalidRequest(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(sorted(ids)),
        f"messages.[{index}].role",
    )
