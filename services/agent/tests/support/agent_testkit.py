"""What the agent's integration tests need around the service: a model, a proposals service.

- ``FakeModel``: a ``ChatModel`` answering from a queue of replies (or functions of the
  messages), recording every request it got;
- ``FakeProposals``: a stand-in for the proposals service's two request-reply queues
  (``proposals.requests``, ``proposals.pause-points``) on the test's own topology, recording
  what it was asked and answering as that service would — the person from the token (or from a
  pause point it stored), the contract from the club operation's own ``resolve`` — or with a
  reason, as a test sets;
- ``running_agent``: the agent in-process behind a real socket (server-sent events need one),
  its consumers and loops running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import uvicorn
from faststream import AckPolicy
from faststream.rabbit import RabbitBroker
from faststream.rabbit.annotations import RabbitMessage
from signoff_agent.app import create_app
from signoff_agent.model import ModelReply, ModelUnavailable, ToolCall
from signoff_agent.settings import AgentSettings
from signoff_contracts.operations import Rejected, Scope
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import (
    PausePointRequestReply,
    PausePointView,
    ProposalRequestReply,
    ProposalView,
)
from signoff_contracts.v2 import PausePointRequested, ProposalRequested
from signoff_runtime.registry import load_operations
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing.processes import free_port
from signoff_runtime.tokens import AGENT_AUDIENCE, issue_token, verify_token
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import AsyncEngine

Step = ModelReply | ModelUnavailable | Callable[[list[dict[str, Any]]], ModelReply]


def call(name: str, arguments: str = "{}", call_id: str = "call_1") -> ModelReply:
    return ModelReply(content=None, tool_calls=(ToolCall(call_id, name, arguments),))


def say(text: str) -> ModelReply:
    return ModelReply(content=text)


@dataclass
class FakeModel:
    steps: list[Step] = field(default_factory=list)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    tools: list[list[dict[str, Any]]] = field(default_factory=list)

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ModelReply:
        self.requests.append([dict(m) for m in messages])
        self.tools.append(tools)
        if not self.steps:
            raise ModelUnavailable("model_bad_response")
        step = self.steps.pop(0)
        if isinstance(step, ModelUnavailable):
            raise step
        return step(messages) if callable(step) else step


def auth(org: dict[str, Any], role: str = "manager") -> dict[str, str]:
    """The headers of a demo person of ``org`` (``manager`` or ``viewer``)."""
    value = issue_token(AuthSettings(), org["users"][role]["id"], org["id"])
    return {"Authorization": f"Bearer {value}"}


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Stored:
    """A proposal the fake stored: what the agent asked, and the view it answered."""

    request: ProposalRequested
    view: ProposalView

    @property
    def proposal_id(self) -> str:
        return self.view.id

    @property
    def conversation_id(self) -> str | None:
        return self.view.conversation_id

    @property
    def preview(self) -> dict[str, Any]:
        return self.view.preview


def view_of(stored: Stored) -> ProposalView:
    return stored.view


def changed(view: ProposalView, **updates: Any) -> ProposalView:
    """``view`` with ``updates``, validated (a status given as text becomes the enum)."""
    return ProposalView.model_validate({**view.model_dump(), **updates})


def pause_view_of(msg: AskedPause, **changes: Any) -> PausePointView:
    fields: dict[str, Any] = {
        "id": msg.pause_point_id,
        "organization_id": msg.organization_id,
        "conversation_id": msg.conversation_id,
        "title": msg.title,
        "description": msg.description,
        "options": msg.options,
        "payload": msg.payload,
        "kind": msg.kind,
        "form_schema": msg.form_schema,
        "status": "pending",
        "created_at": _now(),
        "expires_at": _now() + timedelta(hours=1),
    }
    return PausePointView(**{**fields, **changes})


@dataclass(frozen=True)
class AskedPause:
    """A pause point the fake stored, with the person it took from the request's credential."""

    request: PausePointRequested
    organization_id: str
    requested_by: str

    def __getattr__(self, name: str) -> Any:
        return getattr(self.request, name)


class _Refused(Exception):
    def __init__(self, refusal: str, reason: Reason) -> None:
        super().__init__(reason.code)
        self.refusal = refusal
        self.reason = reason


@dataclass
class FakeProposals:
    engine: AsyncEngine
    proposals: list[Stored] = field(default_factory=list)
    pauses: list[AskedPause] = field(default_factory=list)
    refuse_with: Reason | None = None
    #: which check ``refuse_with`` stands for (``ProposalRequestReply.refusal``)
    refusal: str = "not_stored"
    #: runs before the reply (e.g. to deliver the ``created`` event first, as a fast relay can)
    before_reply: Callable[[Stored], Awaitable[None]] | None = None

    def _person(self, token: str | None, resumed_from: str | None) -> tuple[str, str]:
        """(user, organization), as the proposals service establishes them."""
        if token is not None:
            claims = verify_token(AuthSettings(), token, audience=AGENT_AUDIENCE)
            return claims.sub, claims.org
        asked = next((p for p in self.pauses if p.pause_point_id == resumed_from), None)
        if asked is None:
            raise _Refused("unauthenticated", Reason(code="resumed_from_not_usable"))
        return asked.requested_by, asked.organization_id

    async def _resolve(self, msg: ProposalRequested, user: str, org: str) -> Stored:
        op = load_operations().get(msg.operation_kind, msg.contract_version)
        scope = Scope(organization_id=org, section=op.section, resource_id=msg.resource_id)
        try:
            async with self.engine.connect() as conn:
                resolved = await op.resolve(op.parse_request(msg.request), scope, conn)
        except Rejected as exc:
            raise _Refused("rejected", exc.reason) from None
        view = ProposalView(
            id=msg.proposal_id,
            organization_id=org,
            requested_by=user,
            conversation_id=msg.conversation_id,
            section=op.section,
            resource_id=msg.resource_id,
            operation_kind=op.kind,
            contract_version=op.version,
            preview=resolved.preview.model_dump(mode="json"),
            status="pending",
            created_at=_now(),
            expires_at=_now() + timedelta(days=1),
            request=msg.request,
        )
        return Stored(msg, view)

    async def propose(self, body: bytes) -> bytes:
        msg = ProposalRequested.model_validate_json(body)
        try:
            stored = await self._resolve(msg, *self._person(msg.token, msg.resumed_from))
            if self.before_reply is not None:
                await self.before_reply(stored)
            if self.refuse_with is not None:
                raise _Refused(self.refusal, self.refuse_with)
        except _Refused as refused:
            reply = ProposalRequestReply(
                accepted=False,
                reason=refused.reason,
                refusal=refused.refusal,
            )
            return reply.model_dump_json().encode()
        self.proposals.append(stored)
        return ProposalRequestReply(accepted=True, proposal=stored.view).model_dump_json().encode()

    async def pause(self, body: bytes) -> bytes:
        msg = PausePointRequested.model_validate_json(body)
        if self.refuse_with is not None:
            reply = PausePointRequestReply(accepted=False, reason=self.refuse_with)
            return reply.model_dump_json().encode()
        try:
            user, org = self._person(msg.token, msg.resumed_from)
        except _Refused as refused:
            return (
                PausePointRequestReply(accepted=False, reason=refused.reason)
                .model_dump_json()
                .encode()
            )
        asked = AskedPause(msg, org, user)
        self.pauses.append(asked)
        reply = PausePointRequestReply(accepted=True, pause_point=pause_view_of(asked))
        return reply.model_dump_json().encode()

    @asynccontextmanager
    async def running(self, amqp_url: str, topology: Topology) -> AsyncIterator[RabbitBroker]:
        broker = RabbitBroker(amqp_url, log_level=logging.DEBUG)
        for key, answer in (
            ("proposals.requests", self.propose),
            ("proposals.pause-points", self.pause),
        ):
            self._answer(broker, topology, key, answer)
        async with broker:
            await broker.start()
            yield broker

    @staticmethod
    def _answer(broker: RabbitBroker, topology: Topology, key: str, answer: Any) -> None:
        @broker.subscriber(
            topology.queue(key),
            exchange=topology.exchange("commands"),
            ack_policy=AckPolicy.ACK,
            decoder=lambda msg: msg.body,
        )
        async def handle(msg: RabbitMessage) -> bytes:
            body: bytes = await answer(msg.body)
            return body


@asynccontextmanager
async def running_agent(
    settings: AgentSettings, model: FakeModel
) -> AsyncIterator[httpx.AsyncClient]:
    port = free_port()
    app = create_app(settings, model=model)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20.0) as http:
            yield http
    finally:
        server.should_exit = True
        await task
