"""The words an agent reads back from signoff: what waits for a person, and what they decided.

Shared by the framework adapters and the MCP server. Built only from what signoff stored — the
operation's fixed preview and the recorded outcome — never from what the model said.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from signoff_client.client import AsyncSignoffClient
from signoff_client.models import Operation, Proposal, Proposed


async def offered(client: AsyncSignoffClient, kinds: Iterable[str] | None) -> list[Operation]:
    """The operations the client's person may propose, or only those of ``kinds``: what a
    framework adapter offers its model as tools."""
    wanted = set(kinds) if kinds is not None else None
    return [op for op in await client.operations() if wanted is None or op.kind in wanted]


def waiting_text(proposed: Proposed) -> str:
    """``waiting for approval: <preview>`` — what a propose tool answers the model."""
    rendered = proposed.rendered_preview
    lines = "; ".join(f"{line.label}: {line.value}" for line in rendered.lines) if rendered else ""
    title = rendered.title if rendered else proposed.proposal.operation_kind
    preview = f"{title} — {lines}" if lines else title
    return (
        f"waiting for approval: {preview} (proposal {proposed.proposal.id}). "
        "A person decides in signoff; nothing has been done yet."
    )


def decision_text(proposal: Proposal) -> str:
    """What became of the proposal, for the agent's next turn (the hand-back)."""
    who = f" by {proposal.decided_by}" if proposal.decided_by else ""
    status = proposal.status.value
    if status == "declined":
        because = f": {proposal.decline_reason}" if proposal.decline_reason else ""
        return f"Proposal {proposal.id} was declined{who}{because}. Nothing was done."
    if status in ("expired", "withdrawn", "superseded"):
        return f"Proposal {proposal.id} was {status}. Nothing was done."
    outcome = proposal.outcome
    if outcome is None:
        return f"Proposal {proposal.id} was approved{who} and is {status.replace('_', ' ')}."
    detail = outcome.model_dump(mode="json")
    detail.pop("type", None)
    return (
        f"Proposal {proposal.id} was approved{who}; outcome: {outcome.type}"
        + (f" {json.dumps(detail, ensure_ascii=False)}" if detail else "")
        + "."
    )
