"""Hand-back: what a proposal or pause-point event writes into its conversation.

The model is not resumed. Each event with something to say becomes exactly one app-authored
message, stored as a code with parameters (rendered in each viewer's locale when read) and
unique per ``(proposal or pause point, kind)``, so a duplicate event writes nothing. A success
carries the operation's stored ``Succeeded.result`` (with the contract version that parses it),
so the message says what was done in the operation's own words (``render_result``) in each
reader's locale. An outcome of a proposal that more than one person approved (an approval policy's
quorum) names them ("approved by Morgan Lee and Sam Roy"), by the directory's display names at
the time of writing. A success, a decline's (or a withdrawal's) reason and a revision required also
leave a *note*: bounded context for the model on the person's next message. A pause point's
resolution becomes a synthetic user message and a turn waiting to run.

``plan`` decides (pure); ``apply`` writes, in the consumer's transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import structlog
from signoff_contracts.operations import Directory
from signoff_contracts.outcomes import (
    NeedsReconciliation,
    RevisionRequired,
    Succeeded,
    TerminalFailure,
)
from signoff_contracts.status import IN_PROGRESS, ProposalStatus
from signoff_contracts.v1 import PausePointResolved, PausePointView, ProposalEvent, ProposalView
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_agent import repository as repo

log = structlog.get_logger(__name__)
_DECLINE_CHARS = 500
#: a stored result larger than this is not copied into the message (it says the generic text)
_RESULT_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Notice:
    kind: str
    code: str
    params: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # leave a note for the next turn, with this code


def _rank(status: str) -> int:
    """Events may arrive out of order: a card's status only moves forward."""
    if status == ProposalStatus.PENDING:
        return 0
    if status in IN_PROGRESS:
        return 1 + (status == ProposalStatus.NEEDS_RECONCILIATION)
    return 3


def plan(event: ProposalEvent) -> list[Notice]:
    """The messages ``event`` writes into its conversation (most events write one or none)."""
    view = event.proposal
    kind = {"kind": view.operation_kind}
    if event.event == "created":
        return [Notice("card", "proposal_ready", kind)]
    if event.event == "superseded" and view.superseded_by:
        return []  # the link is stored by ``apply``; the new card says it was revised
    if event.event == "expired":
        return [Notice("expired", "proposal_expired", kind)]
    if event.event == "decided" and view.status == "declined":
        reason = (view.decline_reason or "")[:_DECLINE_CHARS]
        params = {**kind, "decline_reason": reason or None}
        return [Notice("declined", "proposal_declined", params, note="declined")]
    if event.event == "decided" and view.status == "withdrawn":
        # a withdrawal is answered like a decline: the proposer (or a manager) took it back
        reason = (view.decline_reason or "")[:_DECLINE_CHARS]
        params = {**kind, "decline_reason": reason or None}
        return [Notice("withdrawn", "proposal_withdrawn", params, note="withdrawn")]
    if event.event == "outcome" and view.outcome is not None:
        return [_outcome_notice(view.outcome, kind, view.contract_version)]
    return []


def _outcome_notice(outcome: Any, kind: dict[str, Any], version: int) -> Notice:
    if isinstance(outcome, Succeeded):
        params: dict[str, Any] = {**kind, "version": version}
        if len(json.dumps(outcome.result, default=str)) <= _RESULT_CHARS:
            params["result"] = outcome.result
        return Notice("outcome:succeeded", "proposal_succeeded", params, note="succeeded")
    if isinstance(outcome, NeedsReconciliation):
        params = {**kind, "status_path": outcome.status_path}
        return Notice("outcome:needs_reconciliation", "proposal_needs_reconciliation", params)
    if isinstance(outcome, RevisionRequired):
        params = {**kind, "reason": outcome.reason.model_dump(mode="json")}
        return Notice(
            "outcome:revision_required", "proposal_revision_required", params, note="revision"
        )
    assert isinstance(outcome, TerminalFailure)
    params = {**kind, "correlation_id": outcome.correlation_id}
    return Notice("outcome:failed", "proposal_failed", params)


async def apply(
    conn: AsyncConnection, event: ProposalEvent, directory: Directory | None = None
) -> bool:
    """Write what ``event`` means for its conversation; ``True`` if a message was written."""
    view = event.proposal
    if view.conversation_id is None:
        return False
    conversation = await repo.lock_with_card(conn, view.conversation_id, view.id)
    if conversation is None or conversation.organization_id != view.organization_id:
        return False
    extra: dict[str, Any] = {"operation_kind": view.operation_kind}
    if view.superseded_by:
        extra["replaced_by"] = view.superseded_by
    known = conversation.card_status
    if known is None or _rank(view.status) >= _rank(known):
        await repo.upsert_card(conn, view.id, conversation.id, "proposal", view.status, **extra)
    if event.event == "superseded" and view.superseded_by:
        await _link_revision(
            conn, conversation.id, view.id, view.superseded_by, view.operation_kind
        )
    written = False
    for notice in plan(event):
        params = notice.params
        if notice.kind.startswith("outcome:") and len(view.approvals) > 1:
            params = {**params, "approved_by": await _names(conn, directory, view)}
        if await repo.hand_back(
            conn, conversation.id, view.id, notice.kind, notice.code, params, notice.note
        ):
            written = True
    # under the trace of the turn that proposed it: the conversation's end of the trace
    log.info("handback.applied", proposal_id=view.id, change=event.event, written=written)
    return written


async def _names(
    conn: AsyncConnection, directory: Directory | None, view: ProposalView
) -> list[str]:
    """Who approved, oldest first, by display name where the directory still knows them."""
    names = []
    for mark in view.approvals:
        member = None
        if directory is not None:
            member = await directory.membership(conn, mark.user_id, view.organization_id)
        names.append(member.display_name if member and member.display_name else mark.user_id)
    return names


async def _link_revision(
    conn: AsyncConnection, conversation_id: str, old: str, new: str, kind: str
) -> None:
    """The new card replaces the old one: remember both ways and say so once."""
    existing = await repo.card(conn, new)
    await repo.upsert_card(
        conn,
        new,
        conversation_id,
        "proposal",
        existing.status if existing is not None else "pending",
        replaces=old,
        operation_kind=kind,
    )
    await repo.add_message(
        conn,
        conversation_id,
        role="app",
        code="proposal_revised",
        params={"kind": kind, "replaces": old},
        proposal_id=new,
        kind="revised",
    )


async def apply_pause(conn: AsyncConnection, event: PausePointResolved) -> str | None:
    """A resolved pause point becomes the person's (synthetic) message; returns the
    conversation that now waits for a turn, or ``None`` when there is nothing to resume."""
    view = event.pause_point
    if view.conversation_id is None:
        return None
    conversation = await repo.lock(conn, view.conversation_id)
    if conversation is None or conversation.organization_id != view.organization_id:
        return None
    await repo.upsert_card(conn, view.id, conversation.id, "pause_point", view.status)
    if view.status != "resolved" or _late(view):
        await repo.add_message(
            conn, conversation.id, role="app", code="pause_point_expired",
            pause_point_id=view.id, kind="expired",
        )  # fmt: skip
        return None
    row = await repo.add_message(
        conn,
        conversation.id,
        role="user",
        synthetic=True,
        author=view.resolved_by,
        content=resolution_text(view),
        params={"resolution": view.resolution or {}},
        pause_point_id=view.id,
        kind="resolution",
    )
    if row is None:
        return None  # a duplicate: the first copy already asked for the turn
    await repo.set_pending_trigger(conn, conversation.id, row.id)
    return str(conversation.id)


def _late(view: PausePointView) -> bool:
    return view.resolved_at is not None and view.resolved_at > view.expires_at


def resolution_text(view: PausePointView) -> str:
    """The person's answer, as the message the model reads next (their own words included)."""
    resolution = view.resolution or {}
    action = resolution.get("action")
    head = f"[Answer to “{view.title}”]"
    if action == "approve":
        said = "Approved."
    elif action == "decline":
        said = "Declined."
    elif action == "option":
        said = f"Chose: {resolution.get('option')}"
    elif action == "data":
        said = "Entered: " + json.dumps(resolution.get("data") or {}, ensure_ascii=False)[:4000]
    else:
        said = "Answered: " + json.dumps(resolution, ensure_ascii=False)[:4000]
    edited = resolution.get("payload")
    if edited is not None:  # the person's payload override: what they approved, as they left it
        said += " With the payload edited to: " + json.dumps(edited, ensure_ascii=False)[:4000]
    reply = resolution.get("reply")
    return f"{head} {said}" + (f"\n{str(reply)[:2000]}" if reply else "")
