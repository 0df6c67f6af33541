"""LangGraph adapter: tools that only propose, and a node that pauses the graph for a person.

    tools = await signoff_tools(client, kinds=["order.refund_missing_discount"])
    graph = StateGraph(SignoffState)  # your model node offers ``tools.tools``
    graph.add_node("tools", ToolNode(tools.tools))
    graph.add_node("signoff", wait_for_decision)  # edges: model → tools → signoff → model
    app = graph.compile(checkpointer=InMemorySaver())
    paused = await app.ainvoke({"messages": [...]}, config)   # stops at ``interrupt()``
    done = await resume_when_decided(app, config, client, timeout=600)

Each tool's input is the catalogue's: ``resource_id`` and the operation's strict ``Request``
schema. Calling one stores a proposal and answers "waiting for approval: <preview>" with the
proposal id as the tool message's artifact; it never executes. ``wait_for_decision`` runs after
the tools: for the proposals just stored it calls LangGraph's ``interrupt()``, so the graph
pauses in its checkpointer for as long as a person takes. ``resume_when_decided`` waits for each
decision (the proposal's event stream) and resumes the graph with ``Command(resume=…)`` carrying
signoff's record: the node adds signoff's account of each decision to the messages and the
proposal itself to ``decisions``. The node holds no side effect, so LangGraph re-running it on
resume is harmless; the proposal was stored — once — by the tool node before the pause.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import MessagesState
from langgraph.types import Command, interrupt

from signoff_client.agents_sdk import parameters, tool_name
from signoff_client.client import AsyncSignoffClient
from signoff_client.errors import SignoffError
from signoff_client.handback import decision_text, offered, waiting_text
from signoff_client.models import Operation, Proposal

__all__ = [
    "Decision",
    "SignoffState",
    "SignoffTools",
    "decided",
    "decision_of",
    "resume_when_decided",
    "signoff_tools",
    "tool_name",
    "wait_for_decision",
]


class Decision(TypedDict):
    """What a person decided, as the graph state keeps it (JSON, so any checkpointer can)."""

    proposal_id: str
    status: str
    #: signoff's account of the decision and its outcome (``handback.decision_text``)
    text: str
    #: the proposal as signoff recorded it (``Proposal``, JSON)
    proposal: dict[str, Any]


class SignoffState(MessagesState):
    """The messages, and every decision the graph was resumed with (oldest first)."""

    decisions: Annotated[list[Decision], operator.add]


def decided(decision: Decision) -> Proposal:
    """The typed proposal behind a decision in the state."""
    return Proposal.model_validate(decision["proposal"])


@dataclass
class SignoffTools:
    """The LangChain tools, and the proposals they stored (oldest first)."""

    client: AsyncSignoffClient
    tools: list[BaseTool] = field(default_factory=list)
    proposed: list[str] = field(default_factory=list)

    def _tool(self, op: Operation, locale: str) -> BaseTool:
        async def propose(resource_id: str, request: dict[str, Any]) -> tuple[str, str | None]:
            try:
                proposed = await self.client.propose(op.kind, resource_id, dict(request))
            except SignoffError as exc:  # the model may correct its request and try again
                return f"not proposed: {exc.code} ({exc.title})", None
            self.proposed.append(proposed.proposal.id)
            return waiting_text(proposed), proposed.proposal.id

        return StructuredTool.from_function(
            coroutine=propose,
            name=tool_name(op.kind),
            description=(
                f"{op.description.get(locale) or op.kind} Proposes only: a person approves it "
                "in signoff before anything happens."
            ),
            args_schema=parameters(op),
            response_format="content_and_artifact",
        )


async def signoff_tools(
    client: AsyncSignoffClient, kinds: Iterable[str] | None = None, locale: str = "en"
) -> SignoffTools:
    """Tools for the operations the client's person may propose (or only ``kinds``)."""
    tools = SignoffTools(client)
    tools.tools.extend(tools._tool(op, locale) for op in await offered(client, kinds))
    return tools


def _just_proposed(messages: Sequence[AnyMessage]) -> list[str]:
    """Proposal ids the tools stored since the model's last turn."""
    ids: list[str] = []
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            break
        if (
            isinstance(message, ToolMessage)
            and (message.name or "").startswith("propose_")
            and isinstance(message.artifact, str)
        ):
            ids.append(message.artifact)
    return ids[::-1]


def wait_for_decision(state: SignoffState) -> dict[str, Any]:
    """A graph node: pause until every proposal just stored has been decided.

    The interrupt's value is ``{"proposal_ids": [...]}``; the resume value maps each id to a
    ``Decision`` (what ``resume_when_decided`` sends). Without new proposals it passes through.
    """
    pending = _just_proposed(state["messages"])
    if not pending:
        return {}
    answers: dict[str, Decision] = interrupt({"proposal_ids": pending})
    decisions = [answers[pid] for pid in pending]
    return {
        "messages": [HumanMessage(content=d["text"], name="signoff") for d in decisions],
        "decisions": decisions,
    }


def decision_of(proposal: Proposal) -> Decision:
    """The state's record of a decided proposal."""
    return {
        "proposal_id": proposal.id,
        "status": proposal.status.value,
        "text": decision_text(proposal),
        "proposal": proposal.model_dump(mode="json"),
    }


async def resume_when_decided(
    graph: Any, config: Any, client: AsyncSignoffClient, timeout: float
) -> Any:
    """Wait for the decisions the paused graph waits on, then resume it; its new state.

    ``graph`` is a compiled graph with a checkpointer and ``config`` names its thread.
    Raises ``WaitTimeout`` when a person has not decided within ``timeout`` seconds; the graph
    stays paused and this may be called again.
    """
    snapshot = await graph.aget_state(config)
    waiting = [
        pid
        for task in snapshot.tasks
        for pause in task.interrupts
        if isinstance(pause.value, dict)
        for pid in pause.value.get("proposal_ids", ())
    ]
    answers = {pid: decision_of(await client.wait(pid, timeout)) for pid in waiting}
    return await graph.ainvoke(Command(resume=answers), config)
