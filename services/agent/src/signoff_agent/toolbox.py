"""The tools one assistant offers the model, and what each call turns into.

Three families, all scoped by the server (organization and resource come from the
conversation, never from an argument):

- read tools: the assistant's own, answering data the model may read (bounded in size);
- propose tools: the schema is generated from the operation's ``Request``; a call is parsed
  by that model (unknown fields refused) and sent through the very ``Proposer`` the
  machine-facing endpoint uses, on behalf of the turn's person (``on_behalf``: their token, or
  the pause point whose answer started the turn) — the proposals service resolves and stores it;
- ``wait_for_approval``: a pause point (``pausing``).

A call ends in a typed outcome. ``ToolResult`` and ``ToolError`` go back to the model (an error
is safe and specific, so the model can correct itself); ``Proposed``, ``Paused`` and
``Stopped`` halt the loop — the application, not the model, writes what the person reads next.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from signoff_contracts.assistants import (
    Assistant,
    ProposeTool,
    ReadTool,
    strict_input,
    strict_parameters,
)
from signoff_contracts.operations import AnyOperation, Membership, Rejected, Scope
from signoff_contracts.reasons import Reason
from signoff_runtime.rpc import Unanswered
from signoff_runtime.validation import field_errors
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_agent import pausing
from signoff_agent.metrics import TOOL_CALLS
from signoff_agent.proposing import NotStored, OnBehalf, ProposalsUnavailable, Proposer


@dataclass(frozen=True, slots=True)
class ToolResult:
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolError:
    code: str
    message: str
    fields: list[dict[str, str]] = field(default_factory=list)
    kind: str | None = None  # the operation whose reason ``code`` is, if any

    def as_content(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.fields:
            error["fields"] = self.fields
        return {"error": error}


@dataclass(frozen=True, slots=True)
class Proposed:
    proposal_id: str
    kind: str


@dataclass(frozen=True, slots=True)
class Paused:
    pause_point_id: str


@dataclass(frozen=True, slots=True)
class Stopped:
    """The call was fine but cannot go on (a quota, a service not answering): tell the person."""

    code: str
    params: dict[str, Any]


ToolOutcome = ToolResult | ToolError | Proposed | Paused | Stopped
HALTS = (Proposed, Paused, Stopped)

_PROBLEMS = {
    "extra_forbidden": "not a parameter of this tool: the application works out amounts, "
    "accounts, organizations and every other detail from the records itself",
    "missing": "required",
}


def _problems(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": err.field or "(arguments)", "problem": _PROBLEMS.get(err.type, err.message)}
        for err in field_errors(exc)
    ]


def _invalid(exc: ValidationError) -> ToolError:
    return ToolError("invalid_arguments", "The arguments do not fit the tool.", _problems(exc))


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": parameters,
            "strict": True,
        },
    }


@dataclass
class Toolbox:
    assistant: Assistant
    scope: Scope
    member: Membership
    #: who the turn's requests speak for; a token lives here, in memory, for the turn only
    on_behalf: OnBehalf
    conversation_id: str
    engine: AsyncEngine
    proposer: Proposer
    pauser: pausing.Pauser
    result_chars: int = 12_000
    #: the turn the tools run in: a pause point records it (its place in the conversation)
    turn_id: str | None = None

    def specs(self) -> list[dict[str, Any]]:
        """The tools in the chat-completions format, strict schemas throughout."""
        tools = [
            _function(t.name, t.description, strict_parameters(t.Parameters))
            for t in self.assistant.read_tools
        ]
        for tool in self.assistant.propose_tools:
            op = self.proposer.operations.latest(tool.kind)
            tools.append(_function(tool.name, tool.description, strict_parameters(op.Request)))
        tools.append(
            _function(
                pausing.NAME,
                pausing.DESCRIPTION,
                strict_parameters(pausing.WaitForApprovalArgs),
            )
        )
        return tools

    async def call(self, name: str, raw_arguments: str) -> ToolOutcome:
        outcome = await self._call(name, raw_arguments)
        result = type(outcome).__name__.lower()
        TOOL_CALLS.labels(tool=name if self._known(name) else "unknown", result=result).inc()
        return outcome

    def _known(self, name: str) -> bool:
        names = {t.name for t in self.assistant.read_tools}
        names |= {t.name for t in self.assistant.propose_tools}
        return name in names | {pausing.NAME}

    async def _call(self, name: str, raw_arguments: str) -> ToolOutcome:
        try:
            arguments = json.loads(raw_arguments or "{}")
        except ValueError:
            return ToolError("invalid_json", "The arguments are not valid JSON.")
        if not isinstance(arguments, dict):
            return ToolError("invalid_json", "The arguments must be a JSON object.")
        for read_tool in self.assistant.read_tools:
            if read_tool.name == name:
                return await self._read(read_tool, arguments)
        for propose_tool in self.assistant.propose_tools:
            if propose_tool.name == name:
                return await self._propose(propose_tool, arguments)
        if name == pausing.NAME:
            return await self._pause(arguments)
        return ToolError("unknown_tool", f"There is no tool called {name[:64]!r} here.")

    async def _read(self, tool: ReadTool[Any], arguments: dict[str, Any]) -> ToolOutcome:
        try:
            args = strict_input(tool.Parameters, arguments)
        except ValidationError as exc:
            return _invalid(exc)
        async with self.engine.connect() as conn:
            data = await tool.run(conn, self.scope, args)
        if len(json.dumps(data, default=str)) > self.result_chars:
            return ToolResult({"error": {"code": "result_too_large"}})
        return ToolResult(data)

    async def _propose(self, tool: ProposeTool, arguments: dict[str, Any]) -> ToolOutcome:
        op = self.proposer.operations.latest(tool.kind)
        try:
            request = strict_input(op.Request, arguments)
        except ValidationError as exc:
            return _invalid(exc)
        try:
            created = await self.proposer.propose(
                op,
                self.on_behalf,
                self.scope.resource_id,
                request,
                self.conversation_id,
                locale=self.member.locale,
            )
        except NotStored as exc:
            return Stopped("proposal_refused", {"reason": _reason(exc.reason), "kind": op.kind})
        except Rejected as exc:
            return ToolError(exc.reason.code, _explain(op, exc.reason), kind=op.kind)
        except ProposalsUnavailable as exc:
            return Stopped("proposals_unavailable", {"proposal_id": exc.proposal_id})
        return Proposed(proposal_id=str(created["proposal"]["id"]), kind=op.kind)

    async def _pause(self, arguments: dict[str, Any]) -> ToolOutcome:
        try:
            pause = pausing.check(strict_input(pausing.WaitForApprovalArgs, arguments))
        except ValidationError as exc:
            return _invalid(exc)
        except pausing.PauseInvalid as exc:
            return ToolError(
                "invalid_arguments",
                "The arguments do not fit the tool.",
                [{"field": exc.field, "problem": exc.problem}],
            )
        try:
            stored = await self.pauser.request(
                self.on_behalf,
                self.conversation_id,
                pause,
                turn_id=self.turn_id,
                answerable_by=self.assistant.pause_points_answerable_by,
            )
        except Unanswered:
            return Stopped("proposals_unavailable", {})
        if isinstance(stored, Reason) and stored.code.endswith("_quota_exceeded"):
            return Stopped("pause_point_refused", {"reason": _reason(stored)})
        if isinstance(stored, Reason):
            details = ", ".join(f"{k}={v}" for k, v in sorted(stored.params.items()))
            message = f"The pause point was refused ({stored.code}{': ' if details else ''}"
            return ToolError(stored.code, f"{message}{details}).")
        return Paused(pause_point_id=stored.id)


def _reason(reason: Reason) -> dict[str, Any]:
    return reason.model_dump(mode="json")


def _explain(op: AnyOperation, reason: Reason) -> str:
    """The operation's own English sentence for its reason code (safe, app-written)."""
    template = op.reasons.get(reason.code, {}).get("en")
    if template is None:
        return f"The operation refused the request ({reason.code})."
    return _fill(template, reason.params)


def _fill(template: str, params: dict[str, Any]) -> str:
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):
        return template
