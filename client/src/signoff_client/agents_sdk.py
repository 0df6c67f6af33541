"""OpenAI Agents SDK adapter: signoff's operations as function tools that only propose.

    tools = await signoff_tools(client, kinds=["order.refund_missing_discount"])
    agent = Agent(name="support", instructions="…", tools=tools.tools)
    first = await Runner.run(agent, "Refund the missing discount on order ord_…")
    # a person approves in signoff; then the run goes on with signoff's own words:
    text = await tools.handback(tools.proposed[-1], timeout=600)
    done = await Runner.run(agent, first.to_input_list() + [{"role": "user", "content": text}])

Each tool's parameters are the catalogue's: ``resource_id`` and the operation's strict
``Request`` schema. Calling one stores a proposal and answers the model "waiting for approval:
<preview>"; it never executes. ``handback`` waits for the decision (the proposal's event
stream) and returns what signoff recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext

from signoff_client.client import AsyncSignoffClient
from signoff_client.errors import SignoffError
from signoff_client.handback import decision_text, offered, waiting_text
from signoff_client.models import Operation


def tool_name(kind: str) -> str:
    """A function name every model API accepts (no dots)."""
    return "propose_" + kind.replace(".", "__")


def parameters(op: Operation) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "resource_id": {"type": "string", "description": f"The {op.resource}'s id."},
            "request": op.request_schema,
        },
        "required": ["resource_id", "request"],
        "additionalProperties": False,
    }


@dataclass
class SignoffTools:
    """The function tools, and the proposals they stored (oldest first)."""

    client: AsyncSignoffClient
    #: ``agents.Tool`` (not ``FunctionTool``): an ``Agent(tools=…)`` takes the list as it is
    tools: list[Tool] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)

    async def handback(self, proposal_id: str, timeout: float) -> str:
        """Wait for the person's decision and its outcome; signoff's account of it."""
        return decision_text(await self.client.wait(proposal_id, timeout))

    def _tool(self, op: Operation, locale: str) -> FunctionTool:
        async def propose(_: ToolContext[Any], arguments: str) -> str:
            args = json.loads(arguments or "{}")
            try:
                proposed = await self.client.propose(
                    op.kind, str(args.get("resource_id", "")), dict(args.get("request") or {})
                )
            except SignoffError as exc:  # the model may correct its request and try again
                return f"not proposed: {exc.code} ({exc.title})"
            self.proposed.append(proposed.proposal.id)
            return waiting_text(proposed)

        return FunctionTool(
            name=tool_name(op.kind),
            description=(
                f"{op.description.get(locale) or op.kind} Proposes only: a person approves it "
                "in signoff before anything happens."
            ),
            params_json_schema=parameters(op),
            on_invoke_tool=propose,
            strict_json_schema=True,
        )


async def signoff_tools(
    client: AsyncSignoffClient, kinds: Iterable[str] | None = None, locale: str = "en"
) -> SignoffTools:
    """Function tools for the operations the client's person may propose (or only ``kinds``)."""
    tools = SignoffTools(client)
    tools.tools.extend(tools._tool(op, locale) for op in await offered(client, kinds))
    return tools
