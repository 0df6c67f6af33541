"""The script contract: a named, pure function from the request the server got to a reply.

A script keeps no state between requests: everything it knows comes from the conversation
the client sent (that is how a real model works, and it lets one server run many
conversations at once). So a script reacts — it finds ids in tool results and corrects
itself after tool errors — instead of replaying a fixed tape.

Errors a script may raise (anything else is a bug in the script; both answer 500)::

    ScriptError            the script cannot answer this request, with a reason
     └── ScriptExhausted   a ScriptedConversation ran out of steps
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest


@runtime_checkable
class Script(Protocol):
    """What the server runs: ``name`` for logs, ``step`` for the next assistant turn."""

    @property
    def name(self) -> str:
        """The script's name, as in ``scripted:<name>``."""
        ...

    def step(self, request: ChatRequest) -> Reply:
        """The next assistant turn for this conversation; pure (no I/O, no state)."""
        ...


class ScriptError(Exception):
    """A script refuses this request; the message reaches the client in a 500."""


class ScriptExhausted(ScriptError):
    """The conversation went on past the script's last step."""


@dataclass(frozen=True, slots=True)
class FunctionScript:
    """A plain function as a script; see ``script``."""

    name: str
    function: Callable[[ChatRequest], Reply]

    def step(self, request: ChatRequest) -> Reply:
        """Call the function."""
        return self.function(request)


def script(name: str) -> Callable[[Callable[[ChatRequest], Reply]], FunctionScript]:
    """Decorate ``def f(request) -> Reply`` to make the script ``name``."""

    def wrap(function: Callable[[ChatRequest], Reply]) -> FunctionScript:
        return FunctionScript(name, function)

    return wrap
