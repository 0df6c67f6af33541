"""signoff's own OpenAI-compatible model server, answered by scripts.

A script is an object with a ``name`` and ``step(request: ChatRequest) -> Reply``; it is
pure and reacts to the conversation it is sent. Domains register theirs under the
entry-point group ``signoff.model_scripts``. Everything a script author needs is here::

    from signoff_scripted_model import ChatRequest, Reply, script, last_user_message

    @script("club.hello")
    def hello(request: ChatRequest) -> Reply:
        return Reply.say(f"You said: {last_user_message(request)}")
"""

from signoff_scripted_model.conversation import (
    ScriptedConversation,
    ToolError,
    ToolResult,
    last_tool_error,
    last_user_message,
    latest_results,
    offered_tools,
    steps_since_user,
    tool_history,
    tool_results,
)
from signoff_scripted_model.reply import Reply, ToolCall
from signoff_scripted_model.request import ChatRequest, Message, OfferedTool, ToolCallMade
from signoff_scripted_model.script import (
    FunctionScript,
    Script,
    ScriptError,
    ScriptExhausted,
    script,
)

__all__ = [
    "ChatRequest",
    "FunctionScript",
    "Message",
    "OfferedTool",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedConversation",
    "ToolCall",
    "ToolCallMade",
    "ToolError",
    "ToolResult",
    "last_tool_error",
    "last_user_message",
    "latest_results",
    "offered_tools",
    "script",
    "steps_since_user",
    "tool_history",
    "tool_results",
]
