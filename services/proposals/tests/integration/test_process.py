"""The service as its own process: the race that decides "exactly once", and the CLI."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from faststream.rabbit import RabbitBroker
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


async def test_fifty_concurrent_approvals_over_http_and_amqp_claim_exactly_once(
    service_process, amqp_url
):
    harness = service_process
    org = new_id("org")
    pid = await harness.pending(org)
    tokens = [await harness.approver(org, role) for role in ("admin", "manager") * 3]
    brokers = [RabbitBroker(amqp_url) for _ in range(25)]
    await asyncio.gather(*(broker.connect() for broker in brokers))
    try:
        http = [harness.approve_http(pid, tokens[i % len(tokens)]) for i in range(25)]
        amqp = [
            harness.approve_amqp(pid, tokens[i % len(tokens)], broker=broker)
            for i, broker in enumerate(brokers)
        ]
        outcomes = await asyncio.gather(*http, *amqp)
    finally:
        await asyncio.gather(*(broker.stop() for broker in brokers))

    http_replies, amqp_replies = outcomes[:25], outcomes[25:]
    assert all(resp.status_code < 500 for resp in http_replies)
    # a 200 carries the reply; an error is a problem document whose `code` is the result
    results = [
        (r.json().get("result", r.json().get("code")), r.status_code) for r in http_replies
    ] + [(r.result, r.http_status) for r in amqp_replies]
    assert results.count(("claimed", 200)) == 1, results
    assert results.count(("not_approvable", 409)) == 49, results
    reasons = [r.json()["reason"]["code"] for r in http_replies if r.status_code == 409] + [
        r.reason.code for r in amqp_replies if r.result == "not_approvable"
    ]
    assert reasons == ["in_progress"] * 49
    assert len(await harness.contracts(pid)) == 1
    assert [a.action for a in await harness.audit(pid)].count("claimed") == 1
    delivered = await drain_queue(
        amqp_url, harness.topology.name("executor.contracts"), settle_s=1.0
    )
    # one contract, published once: a copy of the same message (the outbox is at-least-once,
    # and make test has seen one under load) carries the same id, and the executor drops it
    assert len({m.message_id for m in delivered}) == 1, delivered
    contracts = [ExecutionContract.model_validate_json(m.body) for m in delivered]
    assert {(c.proposal_id, c.contract_id) for c in contracts} == {
        (pid, contracts[0].contract_id)
    }, delivered


async def test_the_cli_prints_the_audit_trail(service_process, settings_env):
    harness = service_process
    org = new_id("org")
    pid = await harness.pending(org)
    viewer = await harness.member(org, "viewer")
    await harness.approve_http(pid, harness.token(viewer, org))
    assert (await harness.approve_http(pid, await harness.approver(org))).status_code == 200

    shown = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", "from signoff_proposals.cli import app; app()", "show", pid],
        env={**os.environ, **settings_env},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert pid in lines[0] and "status=executing" in lines[0]
    actions = [line.split()[2] for line in lines[2:]]
    assert actions == ["created", "approve_forbidden", "claimed"]
    assert "pending -> executing" in lines[-1]
