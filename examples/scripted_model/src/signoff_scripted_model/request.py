"""The typed view of a chat-completions request body that scripts read.

Scripts never see raw JSON: ``ChatRequest.from_body`` flattens content parts to text, keeps
the tool calls an assistant made (with their ids) and the tool messages that answer them,
and lists the function tools offered. Everything else in the body is ignored here — the
request log keeps the body as sent, for tests that want the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
_ROLES: frozenset[str] = frozenset(Role.__args__)  # type: ignore[attr-defined]


class InvalidRequest(ValueError):
    """The body cannot be a chat-completions request; answered as OpenAI answers a 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class ToolCallMade(BaseModel):
    """A tool call an earlier assistant message made, as the client sent it back."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = Field(description="The JSON text exactly as the model produced it.")

    def parsed_arguments(self) -> Any:
        """The arguments as JSON; the raw text if they are not JSON."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments


class Message(BaseModel):
    """One message of the conversation, content flattened to text."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: tuple[ToolCallMade, ...] = ()
    tool_call_id: str | None = Field(default=None, description="Set on role=tool messages.")


class OfferedTool(BaseModel):
    """A ``type: function`` tool the client offered."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None = None
    parameters: Mapping[str, Any] = Field(default_factory=dict)
    strict: bool | None = None


class ChatRequest(BaseModel):
    """What a script decides on: the model asked for, the conversation, the tools offered."""

    model_config = ConfigDict(frozen=True)

    model: str
    messages: tuple[Message, ...]
    tools: tuple[OfferedTool, ...] = ()
    stream: bool = False
    tool_choice: str | None = Field(
        default=None, description="'none', 'auto', 'required', or the one function's name."
    )
    parallel_tool_calls: bool | None = None

    @classmethod
    def from_body(cls, body: Any) -> ChatRequest:
        """Parse a request body; ``InvalidRequest`` names the offending ``param``."""
        if not isinstance(body, Mapping):
            raise InvalidRequest("The request body must be a JSON object.")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise InvalidRequest("you must provide a model parameter", "model")
        raw_messages = body.get("messages")
        if not isinstance(raw_messages, list) or not raw_messages:
            raise InvalidRequest("'messages' must be a non-empty array.", "messages")
        messages = tuple(_message(raw, f"messages[{i}]") for i, raw in enumerate(raw_messages))
        return cls(
            model=model,
            messages=messages,
            tools=_tools(body.get("tools") or []),
            stream=bool(body.get("stream", False)),
            tool_choice=_tool_choice(body.get("tool_choice")),
            parallel_tool_calls=body.get("parallel_tool_calls"),
        )


def _message(raw: Any, param: str) -> Message:
    if not isinstance(raw, Mapping):
        raise InvalidRequest(f"Invalid '{param}': expected an object.", param)
    role = raw.get("role")
    if role not in _ROLES:
        raise InvalidRequest(f"Invalid value for '{param}.role': {role!r}.", f"{param}.role")
    return Message(
        role=role,
        content=_text(raw.get("content"), f"{param}.content"),
        name=raw.get("name"),
        tool_calls=tuple(
            _tool_call(call, f"{param}.tool_calls[{i}]")
            for i, call in enumerate(raw.get("tool_calls") or [])
        ),
        tool_call_id=raw.get("tool_call_id"),
    )


def _text(content: Any, param: str) -> str | None:
    """A string as is; content parts joined (text and refusal parts; others skipped)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(part.get("text") or part.get("refusal") or "")
            for part in content
            if isinstance(part, Mapping)
        )
    raise InvalidRequest(f"Invalid type for '{param}': expected a string or an array.", param)


def _tool_call(raw: Any, param: str) -> ToolCallMade:
    function = raw.get("function") if isinstance(raw, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(raw.get("id"), str):
        raise InvalidRequest(f"Invalid '{param}': expected id and function.", param)
    arguments = function.get("arguments")
    return ToolCallMade(
        id=raw["id"],
        name=str(function.get("name", "")),
        arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
    )


def _tools(raw_tools: Any) -> tuple[OfferedTool, ...]:
    if not isinstance(raw_tools, list):
        raise InvalidRequest("Invalid type for 'tools': expected an array.", "tools")
    tools = []
    for i, raw in enumerate(raw_tools):
        if not isinstance(raw, Mapping) or raw.get("type") != "function":
            continue  # custom tools exist; scripts only call function tools
        function = raw.get("function")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"Missing 'tools[{i}].function.name'.", f"tools[{i}].function")
        tools.append(
            OfferedTool(
                name=function["name"],
                description=function.get("description"),
                parameters=function.get("parameters") or {},
                strict=function.get("strict"),
            )
        )
    return tuple(tools)


def _tool_choice(raw: Any) -> str | None:
    """A mode as is; ``{"type": "function", "function": {"name": n}}`` as ``n``."""
    if raw is None or isinstance(raw, str):
        return raw
    function = raw.get("function") if isinstance(raw, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise InvalidRequest("Invalid 'tool_choice'.", "tool_choice")
    return str(function["name"])
