"""Each person's approval commands over AMQP are rate-limited as they are over HTTP.

The service runs in-process against real RabbitMQ and PostgreSQL with a rate of three commands a
minute (``SIGNOFF_LIMITS__APPROVALS_PER_MINUTE``): the fourth is answered ``rate_limited`` and
nothing of it happens — no claim, no contract, no audit entry, no inbox row.
"""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ApproveProposal
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime.settings import LimitsSettings
from sqlalchemy import text

pytestmark = pytest.mark.integration

RATE = 3


@pytest.fixture
def settings(settings: ProposalsSettings) -> ProposalsSettings:
    return settings.model_copy(update={"limits": LimitsSettings(approvals_per_minute=RATE)})


def _refused_so_far() -> float:
    labels = {"channel": "amqp", "command": "approve", "result": "rate_limited"}
    return REGISTRY.get_sample_value("signoff_proposals_approval_commands_total", labels) or 0.0


async def test_a_person_over_the_rate_gets_a_typed_refusal_and_nothing_happens(service):
    org = new_id("org")
    pids = [await service.pending(org) for _ in range(RATE + 1)]
    token = await service.approver(org)
    refused_before = _refused_so_far()

    allowed = [await service.approve_amqp(pid, token) for pid in pids[:RATE]]
    over = ApproveProposal(token=token, proposal_id=pids[RATE])
    refused = await service.command(over)

    assert [r.result for r in allowed] == ["claimed"] * RATE
    assert (refused.result, refused.http_status) == ("rate_limited", 429)
    assert refused.reason is not None and refused.reason.code == "rate_limited"
    assert refused.reason.params["bucket"] == "approvals"
    assert int(refused.reason.params["retry_after_s"] or 0) >= 1
    assert refused.proposal is None and refused.causation_id == over.message_id
    assert (await service.row(pids[RATE])).status == "pending"
    assert await service.contracts(pids[RATE]) == []
    assert [a.action for a in await service.audit(pids[RATE])] == ["created"]
    async with service.engine.connect() as conn:
        remembered = await conn.scalar(
            text("SELECT count(*) FROM proposals.inbox WHERE message_id = :m"),
            {"m": over.message_id},
        )
    assert remembered == 0, "a refused command is not remembered: sent later, it is decided"
    assert _refused_so_far() == refused_before + 1


async def test_the_rate_is_each_persons_own(service):
    org = new_id("org")
    pids = [await service.pending(org) for _ in range(RATE + 1)]
    busy = await service.approver(org)
    for pid in pids[:RATE]:
        assert (await service.approve_amqp(pid, busy)).result == "claimed"
    assert (await service.approve_amqp(pids[RATE], busy)).result == "rate_limited"

    colleague = await service.approver(org)
    assert (await service.approve_amqp(pids[RATE], colleague)).result == "claimed"
    assert len(await service.contracts(pids[RATE])) == 1


async def test_commands_whose_token_does_not_verify_are_not_counted(service):
    org = new_id("org")
    pid = await service.pending(org)
    person = await service.member(org)
    forged = service.token(person, org, ttl_s=-60)  # expired: refused, never counted
    for _ in range(RATE + 2):
        assert (await service.approve_amqp(pid, forged)).result == "unauthenticated"

    assert (await service.approve_amqp(pid, service.token(person, org))).result == "claimed"
