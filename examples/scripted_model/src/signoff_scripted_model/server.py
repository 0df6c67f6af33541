"""The server's state: which scripts exist, which one is forced, faults, and the request log.

One instance per process, held by the app. The log keeps every chat-completion request
body as received, in order — tests count model calls and read the context an agent sent.
"""

from __future__ import annotations

from typing import Any

from signoff_scripted_model.faults import FaultPlan, FaultRule
from signoff_scripted_model.registry import ScriptRegistry, UnknownScript, selected_name
from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest
from signoff_scripted_model.script import Script, ScriptError


class ModelServer:
    """Scripts, the admin override, the fault plan and the request log."""

    def __init__(self, registry: ScriptRegistry, default_script: str) -> None:
        self.registry = registry
        self.default_script = default_script
        self.override: str | None = None
        self.faults = FaultPlan()
        self.requests: list[dict[str, Any]] = []

    def reset(self) -> None:
        """Forget requests, faults and the override (the default script stays)."""
        self.override = None
        self.faults = FaultPlan()
        self.requests = []

    def set_faults(self, rule: FaultRule) -> None:
        """Replace the fault plan."""
        self.faults = FaultPlan(rule)

    def force(self, name: str | None) -> None:
        """Make ``name`` answer every request (None: back to per-request selection)."""
        if name is not None and not self.registry.knows(name):
            raise UnknownScript(name)
        self.override = name

    def record(self, body: Any, stream: bool) -> dict[str, Any]:
        """Log a request on arrival; the route fills in what happened to it."""
        entry: dict[str, Any] = {
            "seq": len(self.requests) + 1,
            "body": body,
            "stream": stream,
            "fault": None,
            "script": None,
            "status": None,
            "response": None,
        }
        self.requests.append(entry)
        return entry

    def script_name(self, request: ChatRequest) -> str:
        """The name of the script that answers ``request``."""
        return selected_name(request.model, self.override, self.default_script)

    @staticmethod
    def run(script: Script, request: ChatRequest) -> Reply:
        """One step; anything but a ``Reply`` is the script's bug."""
        reply = script.step(request)
        if not isinstance(reply, Reply):
            raise ScriptError(f"script {script.name!r} returned {type(reply).__name__}, not Reply")
        return reply
