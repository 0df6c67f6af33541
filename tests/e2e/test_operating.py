"""Operating signoff: one trace from a conversation turn (or a proposing request) to the outcome
in every service's logs, and several executors sharing one contract queue."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from assistants_kit import Person, model_admin
from e2e_stack import Stack
from signoff_runtime import tracing
from signoff_runtime.testing import eventually, wait_until
from test_lifecycle import propose_refund, refund_request

pytestmark = pytest.mark.e2e

REFUND = "order.refund_missing_discount"


def log_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def new_trace() -> tuple[str, str]:
    """A trace id and a ``traceparent`` header that starts it, as a client would send."""
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def traced(stack: Stack, trace_id: str, names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        entry
        for name in names
        if (path := stack.log_dir / f"{name}.log").exists()
        for entry in log_lines(path)
        if entry.get("trace_id") == trace_id
    ]


async def the_trace_reaches(
    stack: Stack, trace_id: str, proposal_id: str, wanted: dict[str, set[str]]
) -> None:
    """Wait until each service (executors: any replica) logged each wanted event of the
    proposal under ``trace_id`` (``event:change`` names the kind of change it handled)."""
    executors = tuple(n for n in stack.processes if n.startswith("executor"))
    logs = {"agent": ("agent",), "proposals": ("proposals",), "executor": executors}

    async def every_service_logged() -> None:
        missing = {
            service: events
            - {
                label
                for e in traced(stack, trace_id, logs[service])
                if e.get("proposal_id") == proposal_id
                for label in (str(e.get("event")), f"{e.get('event')}:{e.get('change')}")
            }
            for service, events in wanted.items()
        }
        assert not any(missing.values()), f"not logged under the trace: {missing}"

    await eventually(every_service_logged, timeout=30.0)


async def test_one_trace_runs_from_a_conversation_turn_to_the_outcome(stack: Stack) -> None:
    """The issue's test 4: the trace a person's turn carries reaches every service that handles
    the proposal it produced — through the approval (a request of its own) and the execution."""
    trace_id, traceparent = new_trace()
    person = Person(stack, (await stack.seed())["organizations"][0])
    async with model_admin(stack, "club.order_demo"):
        conversation = await person.open()
        said = await stack.http.post(
            person.agent(f"/v1/conversations/{conversation}/messages"),
            json={"content": "Was this order charged correctly?"},
            headers={**person.headers, "traceparent": traceparent},
            timeout=60.0,
        )
    assert said.status_code == 200, said.text
    assert tracing.trace_id(said.headers["traceparent"]) == trace_id
    [card] = [m for m in said.json()["messages"] if m["code"] == "proposal_ready"]
    proposal_id = str(card["proposal_id"])

    approved = await person.approve(proposal_id)
    assert approved.status_code == 200, approved.text
    assert tracing.trace_id(approved.headers["traceparent"]) != trace_id
    assert (await stack.settled(person.token, proposal_id))["status"] == "succeeded"

    await the_trace_reaches(
        stack,
        trace_id,
        proposal_id,
        {
            # the hand-back of the outcome, after the approval (its own trace) and the execution
            "agent": {"proposal.proposed", "handback.applied:outcome"},
            "proposals": {"proposal.stored", "proposal.outcome"},
            "executor": {"contract.concluded"},
        },
    )
    for name in ("agent", "proposals", "executor"):
        text = (stack.log_dir / f"{name}.log").read_text()
        assert person.token not in text, f"a token was logged by {name}"


async def test_a_trace_sent_to_the_propose_endpoint_runs_to_the_outcome(stack: Stack) -> None:
    """Machine-facing clients propose without a conversation: their trace goes as far."""
    trace_id, traceparent = new_trace()
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]

    created = await stack.http.post(
        f"{stack.url('agent')}/v1/operations/{REFUND}/propose",
        json={"resource_id": case["order_id"], "request": refund_request(case)},
        headers={**stack.auth(token), "traceparent": traceparent},
    )
    assert created.status_code == 201, created.text
    assert tracing.trace_id(created.headers["traceparent"]) == trace_id
    proposal_id = created.json()["proposal"]["id"]
    assert (await stack.approve(token, proposal_id)).status_code == 200
    assert (await stack.settled(token, proposal_id))["status"] == "succeeded"

    await the_trace_reaches(
        stack,
        trace_id,
        proposal_id,
        {
            "agent": {"proposal.proposed"},
            "proposals": {"proposal.outcome"},
            "executor": {"contract.concluded"},
        },
    )


async def test_three_executors_share_the_contract_queue(stack: Stack) -> None:
    stack.start_extra("executor", "executor-2")
    stack.start_extra("executor", "executor-3")
    executors = ("executor", "executor-2", "executor-3")
    before = {n: _concluded(stack, n) for n in executors}

    orgs = [o for _ in range(5) for o in (await stack.seed())["organizations"]]
    tokens = [stack.token(o["users"]["manager"], o) for o in orgs]
    ids = [await propose_refund(stack, o, t) for o, t in zip(orgs, tokens, strict=True)]
    replies = await asyncio.gather(*(stack.approve(t, i) for t, i in zip(tokens, ids, strict=True)))
    assert all(r.status_code == 200 for r in replies)
    views = await asyncio.gather(*(stack.settled(t, i) for t, i in zip(tokens, ids, strict=True)))
    assert {v["status"] for v in views} == {"succeeded"}

    async def shared() -> dict[str, set[str]] | None:
        handled = {n: _concluded(stack, n) - before[n] for n in executors}
        done = set().union(*handled.values())
        return handled if set(ids) <= done else None

    handled = await wait_until(shared, timeout=20.0, what="every contract's executor log")
    assert all(handled[n] & set(ids) for n in executors), {n: len(h) for n, h in handled.items()}
    # each contract ran exactly once, on one executor
    assert sum(len(handled[n] & set(ids)) for n in executors) == len(ids)


def _concluded(stack: Stack, name: str) -> set[str]:
    path = stack.log_dir / f"{name}.log"
    if not path.exists():
        return set()
    return {
        str(e["proposal_id"])
        for e in log_lines(path)
        if e.get("event") == "contract.concluded" and "proposal_id" in e
    }
