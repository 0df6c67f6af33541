"""The conversation API: open one on a resource, talk, read it, follow it.

- ``POST /v1/conversations`` ``{"section", "resource_id"}`` — the section's assistant must
  exist and the resource must be in the caller's organization (else 404, as for anything of
  another organization);
- ``POST /v1/conversations/{id}/messages`` ``{"content"}`` — runs one turn; answers the
  messages it wrote, or streams the turn as server-sent events when asked
  (``Accept: text/event-stream``); 409 while another turn runs;
- ``GET /v1/conversations/{id}`` — every message in order, rendered in the viewer's locale,
  with the cards (proposals, pause points) and their current status;
- ``GET /v1/conversations/{id}/events`` — server-sent events of what happens next; the stream
  closes once the caller is no longer a member, and a person may hold only a few open at once
  (``429 too_many_streams``).

The organization is always the token's; a conversation of another organization is not found.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from signoff_contracts.operations import Directory, Membership, Scope
from signoff_runtime.members import current_member_now
from signoff_runtime.openapi import event_stream, ok
from signoff_runtime.problems import Problem, problem_response, responses
from signoff_runtime.registry import Operations
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import AGENT_AUDIENCE, bearer
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_agent import repository as repo
from signoff_agent import streams, views
from signoff_agent.bodies import Conversation, Turn
from signoff_agent.proposing import OnBehalf
from signoff_agent.sections import Sections, UnknownSection
from signoff_agent.settings import AgentGroup
from signoff_agent.turns import TurnBusy, Turns

router = APIRouter()
SSE = "text/event-stream"


class OpenBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    section: str = Field(min_length=1, max_length=64)
    resource_id: str = Field(min_length=1, max_length=128)


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    content: str = Field(min_length=1, max_length=8000)


@dataclass
class Conversations:
    engine: AsyncEngine
    auth: AuthSettings
    directory: Directory
    operations: Operations
    sections: Sections
    turns: Turns
    hub: streams.Hub
    group: AgentGroup
    stream_limit: streams.StreamLimit = field(init=False)

    def __post_init__(self) -> None:
        self.stream_limit = streams.StreamLimit(self.group.max_streams_per_person)

    async def member(self, authorization: str | None) -> Membership:
        return await current_member_now(
            self.auth, self.directory, self.engine, authorization, audience=AGENT_AUDIENCE
        )

    async def visible(self, conversation_id: str, member: Membership) -> Row[Any]:
        async with self.engine.connect() as conn:
            row = await repo.get(conn, conversation_id)
        if row is None or row.organization_id != member.organization_id:
            raise Problem(404, "not_found", "No such conversation.")
        return row


def _agent(request: Request) -> Conversations:
    agent: Conversations = request.app.state.conversations
    return agent


@router.post("/v1/conversations", status_code=201, **ok(Conversation, 404, 422, status=201))
async def open_conversation(
    body: OpenBody, request: Request, authorization: str | None = Header(default=None)
) -> JSONResponse:
    agent = _agent(request)
    member = await agent.member(authorization)
    try:
        assistant = agent.sections.get(body.section)
    except UnknownSection:
        raise Problem(422, "unknown_section", "No assistant works in this section.") from None
    scope = Scope(
        organization_id=member.organization_id, section=body.section, resource_id=body.resource_id
    )
    async with unit_of_work(agent.engine) as uow:
        if not await assistant.exists(uow.conn, scope):
            raise Problem(404, "resource_not_found", f"No such {assistant.resource}.")
        row = await repo.create_conversation(
            uow.conn, member.organization_id, member.user_id, body.section, body.resource_id
        )
    view = views.conversation(row, [], [], member.locale, agent.operations)
    return JSONResponse(view, status_code=201, headers={"Location": f"/v1/conversations/{row.id}"})


@router.get("/v1/conversations/{conversation_id}", **ok(Conversation, 404))
async def read_conversation(
    conversation_id: str, request: Request, authorization: str | None = Header(default=None)
) -> dict[str, Any]:
    agent = _agent(request)
    member = await agent.member(authorization)
    await agent.visible(conversation_id, member)
    async with agent.engine.connect() as conn:
        row = await repo.get(conn, conversation_id)
        messages = await repo.all_messages(conn, conversation_id)
        cards = await repo.cards_of(conn, conversation_id)
    assert row is not None
    return views.conversation(row, messages, cards, member.locale, agent.operations)


#: a turn's answer: its messages at once, or streamed when the client accepts event streams
TURN: dict[int | str, dict[str, Any]] = {
    200: {
        "model": Turn,
        "description": "The turn's messages; with `Accept: text/event-stream`, streamed.",
        "content": event_stream("")[200]["content"],
    }
}


@router.post(
    "/v1/conversations/{conversation_id}/messages",
    response_model=None,
    responses=TURN | responses(403, 404, 409, 422),
)
async def post_message(
    conversation_id: str,
    body: MessageBody,
    request: Request,
    authorization: str | None = Header(default=None),
    accept: str | None = Header(default=None),
) -> Any:
    agent = _agent(request)
    member = await agent.member(authorization)
    row = await agent.visible(conversation_id, member)
    if row.created_by != member.user_id:
        raise Problem(403, "not_your_conversation", "Only its owner talks in a conversation.")
    try:
        turn_id, said = await agent.turns.begin(conversation_id, member, body.content)
    except TurnBusy:
        raise Problem(409, "turn_in_progress", "The assistant is still answering.") from None
    # the person's token, in memory for this turn only: the proposals service identifies them
    on_behalf = OnBehalf(token=bearer(authorization))
    if accept and SSE in accept:
        return StreamingResponse(
            _streamed_turn(agent, conversation_id, turn_id, member, on_behalf, said),
            media_type=SSE,
        )
    written = await agent.turns.run(conversation_id, turn_id, member, on_behalf)
    rendered = [views.message(m, member.locale, agent.operations) for m in (said, *written)]
    return {"conversation_id": conversation_id, "turn_id": turn_id, "messages": rendered}


async def _streamed_turn(
    agent: Conversations,
    conversation_id: str,
    turn_id: str,
    member: Membership,
    on_behalf: OnBehalf,
    said: Row[Any],
) -> AsyncIterator[str]:
    """The turn runs in its own task: a client that goes away does not cut it short."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()

    async def progress(kind: str, data: dict[str, Any]) -> None:
        await queue.put((kind, data))

    task = agent.turns.spawn(agent.turns.run(conversation_id, turn_id, member, on_behalf, progress))
    yield streams.frame(said.seq, "message", views.message(said, member.locale, agent.operations))
    while not task.done() or not queue.empty():
        getter = asyncio.ensure_future(queue.get())
        await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            kind, data = getter.result()
            yield streams.frame(None, kind, data)
        else:
            getter.cancel()
    for written in task.result():
        yield streams.frame(
            written.seq, "message", views.message(written, member.locale, agent.operations)
        )
    yield streams.frame(None, "done", {"turn_id": turn_id})


@router.get(
    "/v1/conversations/{conversation_id}/events",
    response_class=StreamingResponse,
    responses=event_stream("The conversation's journal, live; resumable with Last-Event-ID.")
    | responses(404, 429),
)
async def conversation_events(
    conversation_id: str,
    request: Request,
    authorization: str | None = Header(default=None),
    last_event_id: str | None = Header(default=None),
    after: int | None = None,
) -> Response:
    """From ``Last-Event-ID`` (a reconnect) or ``?after=`` if given, else from now on."""
    agent = _agent(request)
    member = await agent.member(authorization)
    await agent.visible(conversation_id, member)
    if last_event_id and last_event_id.isdigit():
        after = int(last_event_id)
    elif after is None:
        async with agent.engine.connect() as conn:
            after = await repo.last_journal_seq(conn, conversation_id)
    events = streams.follow(
        agent.engine,
        agent.hub,
        conversation_id,
        after,
        member.locale,
        agent.operations,
        agent.group.stream_keepalive_s,
        request.is_disconnected,
        still_member=lambda: _still_member(agent, member),
        recheck_s=agent.group.stream_membership_check_s,
    )
    if not agent.stream_limit.admit(f"{member.organization_id}/{member.user_id}", events):
        refused = problem_response(
            Problem(
                429,
                "too_many_streams",
                "Too many open event streams; close one first.",
                limit=agent.stream_limit.cap,
            )
        )
        refused.headers["Retry-After"] = str(int(agent.group.stream_keepalive_s) + 1)
        return refused
    return StreamingResponse(events, media_type=SSE, headers={"Cache-Control": "no-store"})


async def _still_member(agent: Conversations, member: Membership) -> bool:
    async with agent.engine.connect() as conn:
        found = await agent.directory.membership(conn, member.user_id, member.organization_id)
    return found is not None
