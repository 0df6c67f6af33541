"""Quotas: no conversation or organization buried in pending cards — under concurrency too."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import pytest_asyncio
from proposals_testkit import pause_request, proposal_request, proposer_token
from proposals_toy import context
from signoff_conformance.toy.domain import open_account
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import PausePointRequestReply, ProposalRequestReply
from signoff_contracts.v2 import PausePointRequested, ProposalRequested
from signoff_proposals.context import Context
from signoff_proposals.intake import store as intake
from signoff_proposals.pause_points import lifecycle as pause_points
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import AuthSettings
from signoff_runtime.topology import ROUTING_KEYS
from sqlalchemy import text

pytestmark = pytest.mark.integration

PER_CONVERSATION = 5
PER_ORGANIZATION = 8


@pytest.fixture
def settings(settings: ProposalsSettings) -> ProposalsSettings:
    limits = settings.proposals.model_copy(
        update={
            "max_pending_per_conversation": PER_CONVERSATION,
            "max_pending_per_organization": PER_ORGANIZATION,
            "max_pending_pause_points_per_conversation": 3,
        }
    )
    return settings.model_copy(update={"proposals": limits})


@pytest_asyncio.fixture(loop_scope="session")
async def ctx(settings, engine, topology, toy_schema) -> Context:
    """The service's code called directly, so twenty requests really do run at once."""
    return context(settings, engine, topology)


async def pending_count(engine, table: str, org: str) -> int:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text(
                    f"SELECT count(*) FROM proposals.{table} "
                    "WHERE organization_id = :o AND status = 'pending'"
                ),
                {"o": org},
            )
        ).scalar_one()


def pause_point(token: str, conversation: str | None) -> PausePointRequested:
    return pause_request(token, conversation_id=conversation)


async def token_of(engine, org: str) -> str:
    """A token of a new member of ``org`` who may propose (the tests' default auth settings)."""
    return await proposer_token(engine, AuthSettings(), org)


async def test_the_next_proposal_over_a_limit_is_refused_with_the_reason(service):
    org = new_id("org")
    chat, other_chat = new_id("cnv"), new_id("cnv")
    for _ in range(PER_CONVERSATION):
        assert (await service.propose(org, conversation_id=chat)).accepted

    over = await service.propose(org, conversation_id=chat)
    assert not over.accepted and over.proposal is None
    assert over.reason.code == "conversation_quota_exceeded"
    assert over.reason.params == {"limit": PER_CONVERSATION}

    # the organization still has room, in other conversations (and without one), up to its limit
    for conversation in (other_chat, other_chat, None):
        assert (await service.propose(org, conversation_id=conversation)).accepted
    refused = await service.propose(org, conversation_id=new_id("cnv"))
    assert refused.reason.code == "organization_quota_exceeded"
    assert refused.reason.params == {"limit": PER_ORGANIZATION}
    assert await pending_count(service.engine, "proposals", org) == PER_ORGANIZATION


async def test_a_decided_or_lapsed_proposal_frees_its_place_and_a_replay_still_answers(service):
    org = new_id("org")
    chat = new_id("cnv")
    token, account = await token_of(service.engine, org), await open_account(service.engine, org)
    requests = [
        proposal_request(token, account, conversation_id=chat) for _ in range(PER_CONVERSATION)
    ]
    for msg in requests:
        assert (await send(service, msg)).accepted

    # a replay of a stored request is not "one more": it gets its proposal back
    replay = await send(service, requests[-1])
    assert replay.accepted and replay.proposal and replay.proposal.id == requests[-1].proposal_id

    token = await service.approver(org)
    assert (await service.approve_http(requests[0].proposal_id, token)).status_code == 200
    await service.set(requests[1].proposal_id, "expires_at = now() - interval '1 second'")
    assert (await service.propose(org, conversation_id=chat)).accepted
    assert (await service.propose(org, conversation_id=chat)).accepted
    assert not (await service.propose(org, conversation_id=chat)).accepted


async def send(service, msg: ProposalRequested) -> ProposalRequestReply:
    raw = await service.request("commands", ROUTING_KEYS["proposals.requests"], msg)
    return ProposalRequestReply.model_validate_json(raw)


async def test_twenty_concurrent_requests_in_one_conversation_store_exactly_the_limit(ctx):
    org, chat = new_id("org"), new_id("cnv")
    token, account = await token_of(ctx.engine, org), await open_account(ctx.engine, org)

    replies = await asyncio.gather(
        *(
            intake.store(ctx, proposal_request(token, account, conversation_id=chat))
            for _ in range(20)
        )
    )

    accepted = [r for r in replies if r.accepted]
    assert len(accepted) == PER_CONVERSATION
    assert _refusals(replies) == {"conversation_quota_exceeded"}
    assert await pending_count(ctx.engine, "proposals", org) == PER_CONVERSATION


async def test_twenty_concurrent_requests_across_conversations_store_exactly_the_org_limit(ctx):
    org = new_id("org")
    token, account = await token_of(ctx.engine, org), await open_account(ctx.engine, org)

    replies = await asyncio.gather(
        *(
            intake.store(ctx, proposal_request(token, account, conversation_id=new_id("cnv")))
            for _ in range(20)
        )
    )

    assert sum(r.accepted for r in replies) == PER_ORGANIZATION
    assert _refusals(replies) == {"organization_quota_exceeded"}
    assert await pending_count(ctx.engine, "proposals", org) == PER_ORGANIZATION


async def test_pause_points_have_their_own_per_conversation_limit(ctx):
    org, chat = new_id("org"), new_id("cnv")
    token = await token_of(ctx.engine, org)

    replies = await asyncio.gather(
        *(pause_points.store(ctx, pause_point(token, chat)) for _ in range(12))
    )

    assert sum(r.accepted for r in replies) == 3
    assert _refusals(replies) == {"conversation_quota_exceeded"}
    assert await pending_count(ctx.engine, "pause_points", org) == 3
    # proposals in the same conversation are counted apart
    account = await open_account(ctx.engine, org)
    assert (
        await intake.store(ctx, proposal_request(token, account, conversation_id=chat))
    ).accepted


async def test_the_pause_point_limit_holds_over_amqp(service):
    org, chat = new_id("org"), new_id("cnv")
    token = await token_of(service.engine, org)
    replies = []
    for _ in range(4):
        raw = await service.request(
            "commands",
            ROUTING_KEYS["proposals.pause-points"],
            json.dumps(pause_point(token, chat).model_dump(mode="json")).encode(),
        )
        replies.append(PausePointRequestReply.model_validate_json(raw))

    assert [r.accepted for r in replies] == [True, True, True, False]
    assert replies[-1].reason and replies[-1].reason.code == "conversation_quota_exceeded"


def _refusals(replies: list[Any]) -> set[str]:
    return {r.reason.code for r in replies if r.reason and not r.accepted}
