"""What a script answers: text, or tool calls — never both, as a chat model's turn ends in one.

Ids of tool calls are the server's business (it makes fresh ones for every reply), so a
script names only the tool and its arguments. Arguments are a JSON object; a string is sent
verbatim instead, so a script can play a model that emits broken JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """Call the tool ``name`` with ``arguments`` (a JSON object, or raw text sent as is)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """Exactly one of ``text`` or ``tool_calls``; build it with ``say`` / ``call`` / ``calls``."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    def __post_init__(self) -> None:
        if (self.text is None) == (not self.tool_calls):
            raise ValueError("a Reply is either text or at least one tool call, not both")

    @classmethod
    def say(cls, text: str) -> Reply:
        """Answer with text (finish_reason ``stop``)."""
        return cls(text=text)

    @classmethod
    def call(cls, name: str, arguments: Mapping[str, Any] | str | None = None) -> Reply:
        """Call one tool (finish_reason ``tool_calls``)."""
        return cls(tool_calls=(ToolCall(name, {} if arguments is None else arguments),))

    @classmethod
    def calls(cls, calls: Iterable[ToolCall | tuple[str, Mapping[str, Any] | str]]) -> Reply:
        """Call several tools in one turn (parallel tool calls)."""
        return cls(
            tool_calls=tuple(
                call if isinstance(call, ToolCall) else ToolCall(*call) for call in calls
            )
        )
