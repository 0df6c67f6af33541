"""What the proposals tests do again and again: propose, approve both ways, look at the rows.

``Harness`` talks to a running service — in-process (``create_app`` under its lifespan, HTTP
through ``httpx.ASGITransport``) or a separate process (HTTP over a socket) — and reads the
database directly to check what the service wrote.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aio_pika
import httpx
from faststream.rabbit import RabbitBroker
from signoff_conformance.toy.directory import add_member, remove_member
from signoff_conformance.toy.domain import GrantCredit, grant_request, open_account
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import (
    ApproveProposal,
    Envelope,
    OutcomeReported,
    ProposalRequestReply,
)
from signoff_contracts.v2 import ApprovalReply, PausePointRequested, ProposalRequested
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import ROUTING_KEYS, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

#: the kit's toy credit (``signoff_conformance.toy``), plugged in by ``proposals_toy``
KIND = GrantCredit.kind
SECTION = GrantCredit.section


def proposal_request(token: str | None, account_id: str, **overrides: Any) -> ProposalRequested:
    """A v2 request as the agent sends it: the operation, its ``Request``, the resource, the
    person's token — the proposals service makes the contract. A goodwill credit to
    ``account_id`` (an account of the token's organization: ``open_account``); ``request``
    changes fields of that request (``{"occasion": "outage"}``), other overrides replace."""
    request = grant_request(account_id, **overrides.pop("request", {}))
    fields: dict[str, Any] = {
        "proposal_id": new_id("prp"),
        "resource_id": account_id,
        "operation_kind": KIND,
        "contract_version": 1,
        "request": request,
        "token": token,
    }
    fields.update(overrides)
    fields.setdefault("correlation_id", fields["proposal_id"])
    return ProposalRequested(**fields)


def pause_request(token: str | None, **overrides: Any) -> PausePointRequested:
    fields: dict[str, Any] = {
        "pause_point_id": new_id("pp"),
        "title": "Go ahead?",
        "description": "Nothing happens until you say so.",
        "token": token,
    }
    fields.update(overrides)
    return PausePointRequested(**fields)


async def enrol(engine: AsyncEngine, org: str, role: str = "admin", user: str | None = None) -> str:
    """Make ``user`` (a new one by default) a member of ``org`` with ``role``; its id."""
    async with engine.begin() as conn:
        return await add_member(conn, org, role, user)


async def proposer_token(
    engine: AsyncEngine, auth: AuthSettings, org: str, role: str = "admin"
) -> str:
    """The token of a new member of ``org`` whose role may propose (the test operation's)."""
    return issue_token(auth, await enrol(engine, org, role), org)


@dataclass
class Harness:
    engine: AsyncEngine
    broker: RabbitBroker
    topology: Topology
    http: httpx.AsyncClient
    auth: AuthSettings
    #: the test broker's user: every message must carry it (``signoff_runtime.senders``)
    user_id: str = "guest"

    # --- people -------------------------------------------------------------------------
    async def member(self, org: str, role: str = "admin", user: str | None = None) -> str:
        return await enrol(self.engine, org, role, user)

    async def remove_member(self, org: str, user: str) -> None:
        async with self.engine.begin() as conn:
            await remove_member(conn, org, user)

    def token(self, user: str, org: str, **kw: Any) -> str:
        return issue_token(self.auth, user, org, **kw)

    async def approver(self, org: str, role: str = "admin") -> str:
        return self.token(await self.member(org, role), org)

    # --- messages -----------------------------------------------------------------------
    async def request(
        self,
        exchange: str,
        routing_key: str,
        message: Envelope | bytes,
        broker: RabbitBroker | None = None,
        **kw: Any,
    ) -> bytes:
        body = message if isinstance(message, bytes) else message.model_dump_json().encode()
        reply = await (broker or self.broker).request(
            body,
            exchange=self.topology.name(exchange),
            routing_key=routing_key,
            timeout=10.0,
            content_type="application/json",
            **{"user_id": self.user_id, **kw},
        )
        return bytes(reply.body)

    async def account(self, org: str, name: str = "Ada's Bakery") -> str:
        """A new open account of ``org``: what a proposal acts on."""
        return await open_account(self.engine, org, name)

    async def proposal_request(self, org: str, **overrides: Any) -> ProposalRequested:
        """A request by a new member of ``org`` who may propose (unless ``token`` is given), for
        a new account of ``org`` (unless ``account_id`` is given); see ``proposal_request``."""
        token = overrides.pop("token", None) or await proposer_token(self.engine, self.auth, org)
        account_id = overrides.pop("account_id", None) or await self.account(org)
        return proposal_request(token, account_id, **overrides)

    async def send(self, msg: ProposalRequested | bytes) -> ProposalRequestReply:
        raw = await self.request("commands", ROUTING_KEYS["proposals.requests"], msg)
        return ProposalRequestReply.model_validate_json(raw)

    async def propose(self, org: str, **overrides: Any) -> ProposalRequestReply:
        return await self.send(await self.proposal_request(org, **overrides))

    async def pending(self, org: str, **overrides: Any) -> str:
        reply = await self.propose(org, **overrides)
        assert reply.accepted and reply.proposal is not None, reply
        return reply.proposal.id

    async def command(
        self, command: Envelope | bytes, broker: RabbitBroker | None = None
    ) -> ApprovalReply:
        raw = await self.request(
            "commands", ROUTING_KEYS["proposals.approvals"], command, broker=broker
        )
        return ApprovalReply.model_validate_json(raw)

    async def approve_amqp(
        self, proposal_id: str, token: str, broker: RabbitBroker | None = None
    ) -> ApprovalReply:
        return await self.command(ApproveProposal(token=token, proposal_id=proposal_id), broker)

    async def approve_http(self, proposal_id: str, token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return await self.http.post(f"/v1/proposals/{proposal_id}/approve", headers=headers)

    async def set_policy(self, org: str, rules: list[dict[str, Any]], kind: str = KIND) -> Any:
        """Save ``rules`` as ``org``'s policy for ``kind`` (as a new manager of ``org``)."""
        token = await self.approver(org, "manager")
        return await self.http.put(
            f"/v1/policies/{kind}",
            json={"rules": rules},
            headers={"Authorization": f"Bearer {token}"},
        )

    async def report(self, outcome: OutcomeReported) -> None:
        await self.broker.publish(
            outcome.model_dump_json().encode(),
            exchange=self.topology.name("outcomes"),
            routing_key=ROUTING_KEYS["proposals.outcomes"],
            persist=True,
            message_id=outcome.message_id,
            content_type="application/json",
            user_id=self.user_id,
        )

    # --- database -----------------------------------------------------------------------
    async def row(self, proposal_id: str) -> Any:
        async with self.engine.connect() as conn:
            return (
                await conn.execute(
                    text("SELECT * FROM proposals.proposals WHERE id = :i"), {"i": proposal_id}
                )
            ).first()

    async def set(self, proposal_id: str, assignments: str, **params: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                text(f"UPDATE proposals.proposals SET {assignments} WHERE id = :i"),
                {"i": proposal_id, **params},
            )

    async def set_pause(self, pause_point_id: str, assignments: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                text(f"UPDATE proposals.pause_points SET {assignments} WHERE id = :i"),
                {"i": pause_point_id},
            )

    async def audit(self, proposal_id: str) -> list[Any]:
        async with self.engine.connect() as conn:
            return list(
                await conn.execute(
                    text("SELECT * FROM proposals.audit WHERE proposal_id = :i ORDER BY id"),
                    {"i": proposal_id},
                )
            )

    async def outbox(self, proposal_id: str, message_type: str | None = None) -> list[Any]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT * FROM proposals.outbox WHERE correlation_id = :i ORDER BY id"),
                {"i": proposal_id},
            )
            return [r for r in rows if message_type is None or r.message_type == message_type]

    async def contracts(self, proposal_id: str) -> list[dict[str, Any]]:
        rows = await self.outbox(proposal_id, "execution.contract")
        return [json.loads(bytes(r.body)) for r in rows]


async def forget_unsent_outbox(engine: AsyncEngine) -> None:
    """Earlier tests' unsent rows name exchanges that no longer exist: keep them from this
    test's relay (the shared test database outlives each test's queue prefix)."""
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM proposals.outbox WHERE sent_at IS NULL"))


async def drain_queue(
    amqp_url: str, queue: str, *, at_least: int = 1, within: float = 15.0, settle_s: float = 0.3
) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Take every message from ``queue`` (acking them): wait until ``at_least`` have come, then
    keep taking until the queue has stayed empty for ``settle_s`` (to catch extra copies)."""
    taken: list[aio_pika.abc.AbstractIncomingMessage] = []
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        source = await channel.get_queue(queue, ensure=True)

        async def take() -> bool:
            while (message := await source.get(no_ack=True, fail=False)) is not None:
                taken.append(message)
            return len(taken) >= at_least

        await wait_until(take, timeout=within, what=f"{at_least} message(s) on {queue}")
        quiet = 0.0
        while quiet < settle_s:
            before = len(taken)
            await take()
            quiet = 0.0 if len(taken) > before else quiet + 0.05
            await asyncio.sleep(0.05)
    return taken
