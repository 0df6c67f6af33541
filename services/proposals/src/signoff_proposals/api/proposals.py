"""Reading proposals: the organization's list (keyset pages) and one proposal with its audit trail.

The caller is the shared current-member check (``http.caller``); another organization's proposal
is a 404, the same as an unknown id. Waiting for a decision — one proposal's changes as a stream,
or a long poll — is ``waiting``'s. Deciding lives in ``decisions.routes``, the reconciliation
page in ``outcomes.routes``, the organization's pushed changes in ``events``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from signoff_contracts.status import ProposalStatus
from signoff_runtime.members import Authorization, Caller, Reader
from signoff_runtime.openapi import event_stream, ok
from signoff_runtime.problems import Problem, responses

from signoff_proposals.api import waiting
from signoff_proposals.api.bodies import ProposalPage, ProposalWithAudit
from signoff_proposals.api.events import ChangeHub
from signoff_proposals.api.http import keyset, member_of, not_found
from signoff_proposals.context import Context
from signoff_proposals.lifecycle import domain
from signoff_proposals.lifecycle import repository as repo


async def visible(reader: Reader, proposal_id: str) -> repo.Stored:
    """The proposal if the caller's organization holds it, else a 404."""
    row = await repo.get(reader.conn, proposal_id)
    if row is None or row.organization_id != reader.organization_id:
        raise not_found()
    return row


WAIT = "Answer once the status differs from `status`, or after this many seconds (capped)."
SEEN = "The status the client last saw (default: the status when the request arrives)."


def router(ctx: Context, hub: ChangeHub) -> APIRouter:
    api = APIRouter(prefix="/v1/proposals")

    @api.get("", **ok(ProposalPage, 400))
    async def list_proposals(
        reader: Caller,
        status: ProposalStatus | None = None,
        limit: Annotated[int, Query(ge=1)] = 50,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        before, size = keyset(cursor, limit)
        rows = await repo.list_for_org(
            reader.conn, reader.organization_id, status=status, limit=size + 1, before_id=before
        )
        return domain.page(rows, size, repo.view)

    @api.get("/{proposal_id}", **ok(ProposalWithAudit, 404))
    async def show_proposal(
        proposal_id: str,
        authorization: Authorization = None,
        wait: Annotated[float | None, Query(gt=0, description=WAIT)] = None,
        status: Annotated[ProposalStatus | None, Query(description=SEEN)] = None,
    ) -> dict[str, Any]:
        """The proposal and its audit trail; with ``wait``, once its status changed (long poll)."""
        member = await member_of(ctx, authorization)
        async with ctx.engine.connect() as conn:
            row = await visible(Reader(conn, member), proposal_id)
        if wait is not None:
            seen = status.value if status is not None else row.status
            await waiting.until_changed(ctx, hub, member.organization_id, proposal_id, seen, wait)
        async with ctx.engine.connect() as conn:
            row = await visible(Reader(conn, member), proposal_id)
            trail = await repo.audit_trail(conn, proposal_id)
        return {
            **repo.view(row).model_dump(mode="json"),
            "audit": [entry.model_dump(mode="json") for entry in trail],
        }

    @api.get(
        "/{proposal_id}/events",
        response_class=StreamingResponse,
        responses=event_stream("Each audit entry, live; ends after a terminal status.")
        | responses(404, 429),
    )
    async def proposal_events(
        proposal_id: str,
        request: Request,
        authorization: Authorization = None,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """Server-sent events: each audit entry of the proposal (``id`` = the entry's id), live,
        resumable with ``Last-Event-ID``; the stream ends after a terminal status."""
        member = await member_of(ctx, authorization)
        async with ctx.engine.connect() as conn:
            await visible(Reader(conn, member), proposal_id)
        if (
            hub.open_per_person.get(member.user_id, 0)
            >= ctx.settings.proposals.stream_max_per_person
        ):
            raise Problem(429, "too_many_streams", "Close another stream first.")
        after = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
        stream = waiting.follow(ctx, hub, member, proposal_id, after, request.is_disconnected)
        return StreamingResponse(
            stream, media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    return api
