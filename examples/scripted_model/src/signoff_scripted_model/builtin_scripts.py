"""The scripts every server has, whatever domain is installed.

``echo`` repeats the latest user message; ``call_first_tool`` calls the first offered tool
with the JSON object the user wrote, then reports the tool's answer; ``say:<text>`` always
answers ``<text>`` (the only parameterised name: everything after the first colon).
"""

from __future__ import annotations

import json

from signoff_scripted_model.conversation import last_user_message, latest_results
from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest
from signoff_scripted_model.script import FunctionScript, Script, ScriptError, script


@script("echo")
def echo(request: ChatRequest) -> Reply:
    """Repeat the latest user message (an empty one is answered with "")."""
    return Reply.say(last_user_message(request))


@script("call_first_tool")
def call_first_tool(request: ChatRequest) -> Reply:
    """Call the first tool with the user's JSON; once answered, repeat the tool's answer."""
    answered = latest_results(request)
    if answered:
        return Reply.say(answered[-1].content)
    if not request.tools:
        raise ScriptError("call_first_tool: the request offers no tools")
    text = last_user_message(request)
    try:
        arguments = json.loads(text)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        raise ScriptError("call_first_tool: the latest user message must be a JSON object")
    return Reply.call(request.tools[0].name, arguments)


def say(text: str) -> Script:
    """``say:<text>``: always answer ``text``."""
    reply = Reply.say(text)
    return FunctionScript(f"say:{text}", lambda _request: reply)


BUILTINS: dict[str, Script] = {echo.name: echo, call_first_tool.name: call_first_tool}
