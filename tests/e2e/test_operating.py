"""Operating signoff: one trace from the proposing request to the outcome in every service's
logs, and several executors sharing one contract queue."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from e2e_stack import Stack
from signoff_runtime.testing import wait_until
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


async def test_one_trace_runs_from_the_proposal_to_the_outcome(stack: Stack) -> None:
    trace_id = secrets.token_hex(16)
    traceparent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    case = org["refund_case"]

    created = await stack.http.post(
        f"{stack.url('agent')}/v1/operations/{REFUND}/propose",
        json={"resource_id": case["order_id"], "request": refund_request(case)},
        headers={**stack.auth(token), "traceparent": traceparent},
    )
    assert created.status_code == 201, created.text
    assert created.headers["traceparent"].split("-")[1] == trace_id
    proposal_id = created.json()["proposal"]["id"]
    # the person approves in a request of their own (its own trace)
    approved = await stack.approve(token, proposal_id)
    assert approved.headers["traceparent"].split("-")[1] != trace_id
    assert (await stack.settled(token, proposal_id))["status"] == "succeeded"

    def traced(names: tuple[str, ...]) -> list[dict[str, Any]]:
        return [
            entry
            for name in names
            if (path := stack.log_dir / f"{name}.log").exists()
            for entry in log_lines(path)
            if entry.get("trace_id") == trace_id
        ]

    executors = tuple(n for n in stack.processes if n.startswith("executor"))

    async def every_service_logged() -> bool | None:
        seen = {
            "agent": traced(("agent",)),
            "proposals": traced(("proposals",)),
            "executor": traced(executors),
        }
        wanted = {
            "agent": "proposal.proposed",
            "proposals": "proposal.outcome",
            "executor": "contract.concluded",
        }
        for service, event in wanted.items():
            if not any(
                e.get("event") == event and e.get("proposal_id") == proposal_id
                for e in seen[service]
            ):
                return None
        return True

    await wait_until(every_service_logged, timeout=20.0, what="the trace in every service's log")
    for name in ("agent", "proposals", *executors):
        assert token not in (stack.log_dir / f"{name}.log").read_text(), "a token was logged"


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
