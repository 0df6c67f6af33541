"""The history of every operation a scenario performed, and the client that records it.

Each operation is recorded when invoked and again when it completes: ``ok`` (a definite answer
the service gave, whatever it was), ``failed`` (a definite refusal the client did not expect) or
``indeterminate`` (no answer — a reset connection, a timeout, a 5xx: the operation may or may not
have happened). Like a real client, the driver retries an indeterminate approval until it hears
a definite answer; the checker then judges the history against the provider's ledger and the
database, never against what the driver hoped.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from faults_stack import FaultStack

REFUND = "order.refund_missing_discount"


@dataclass
class Op:
    kind: str  # propose | approve | decline
    order_id: str
    invoked_at: float
    result: str = "invoked"  # ok | failed | indeterminate
    value: str = ""  # the reply's result (ok), the status and code (failed), the error
    proposal_id: str | None = None
    completed_at: float | None = None


@dataclass
class Case:
    """One refund case: an organization of its own, its manager's token, its charge."""

    org: dict[str, Any]
    token: str
    order_id: str
    payment_ref: str
    total_before: int = 0
    proposal_id: str | None = None

    @property
    def request(self) -> dict[str, Any]:
        case = self.org["refund_case"]
        return {
            "payment_id": case["payment_id"],
            "line_item_id": case["line_item_id"],
            "discount_id": case["discount_id"],
            "destination": "original_payment_method",
        }


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def invoke(self, kind: str, order_id: str, proposal_id: str | None = None) -> Op:
        op = Op(kind, order_id, time.monotonic(), proposal_id=proposal_id)
        self.ops.append(op)
        return op

    def summary(self) -> Counter[tuple[str, str]]:
        return Counter((op.kind, op.result) for op in self.ops)

    def replies(self, kind: str, proposal_id: str) -> list[str]:
        """The definite answers to ``kind`` commands on one proposal, in order."""
        return [
            op.value
            for op in self.ops
            if op.kind == kind and op.proposal_id == proposal_id and op.result == "ok"
        ]


def _complete(op: Op, result: str, value: str, proposal_id: str | None = None) -> Op:
    op.result, op.value, op.completed_at = result, value, time.monotonic()
    if proposal_id is not None:
        op.proposal_id = proposal_id
    return op


class Driver:
    """Drives load through the public HTTP APIs and records every operation."""

    def __init__(self, stack: FaultStack, history: History, rng: random.Random) -> None:
        self.stack = stack
        self.history = history
        self.rng = rng

    async def cases(self, count: int) -> list[Case]:
        orgs = await self.stack.seed(count)
        rows = {
            row["id"]: row
            for row in await self.stack.rows(
                "SELECT p.id, p.provider_ref, o.total_cents FROM club.payments p "
                "JOIN club.orders o ON o.id = p.order_id WHERE p.id = ANY(:ids)",
                ids=[org["refund_case"]["payment_id"] for org in orgs],
            )
        }
        cases = []
        for org in orgs:
            row = rows[org["refund_case"]["payment_id"]]
            order_id = org["refund_case"]["order_id"]
            token = self.stack.token(org)
            cases.append(Case(org, token, order_id, row["provider_ref"], row["total_cents"]))
        return cases

    async def _send(
        self, op: Op, method: str, url: str, case: Case, key: str | None = None, **kwargs: Any
    ) -> Op:
        headers = {"Authorization": f"Bearer {case.token}"}
        if key is not None:
            headers["Idempotency-Key"] = key
        try:
            response = await self.stack.http.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            return _complete(op, "indeterminate", type(exc).__name__)
        if response.status_code >= 500 or response.status_code == 429:
            return _complete(op, "indeterminate", f"http {response.status_code}")
        body = response.json()
        if op.kind == "propose":
            if response.status_code == 201:
                return _complete(op, "ok", "created", str(body["proposal"]["id"]))
            return _complete(op, "failed", f"http {response.status_code} {body.get('code')}")
        if response.status_code in (200, 409):  # a 409 is a problem document whose code is the
            return _complete(op, "ok", str(body.get("result") or body.get("code")))  # result
        return _complete(op, "failed", f"http {response.status_code} {body.get('code')}")

    async def propose(self, case: Case, deadline: float) -> Op:
        """Propose once; an indeterminate attempt is retried with the same ``Idempotency-Key``, so
        a proposal stored before the answer was lost is the one the retry hears of (the checker
        counts every proposal of the case's order: a second one is a duplicate)."""
        url = f"{self.stack.url('agent')}/v1/operations/{REFUND}/propose"
        delay = 0.2
        while True:
            op = self.history.invoke("propose", case.order_id)
            await self._send(
                op,
                "POST",
                url,
                case,
                f"faults-{case.order_id}",
                json={"resource_id": case.order_id, "request": case.request},
            )
            if op.result != "indeterminate" or time.monotonic() > deadline:
                case.proposal_id = op.proposal_id or case.proposal_id
                return op
            await asyncio.sleep(delay)
            delay = min(2.0, delay * 2)

    async def decide(self, case: Case, command: str, deadline: float, *, retry: bool = True) -> Op:
        """``approve`` or ``decline`` until a definite answer (or the deadline)."""
        assert case.proposal_id is not None
        url = f"{self.stack.url('proposals')}/v1/proposals/{case.proposal_id}/{command}"
        body: dict[str, Any] = {"json": {"reason": "fault suite"}} if command == "decline" else {}
        delay = 0.2
        while True:
            op = self.history.invoke(command, case.order_id, case.proposal_id)
            await self._send(op, "POST", url, case, **body)
            if op.result != "indeterminate" or not retry or time.monotonic() > deadline:
                return op
            await asyncio.sleep(delay)
            delay = min(2.0, delay * 2)

    async def propose_all(self, cases: list[Case], deadline_s: float = 120.0) -> None:
        deadline = time.monotonic() + deadline_s
        gate = asyncio.Semaphore(6)

        async def one(case: Case) -> None:
            async with gate:
                await self.propose(case, deadline)

        await asyncio.gather(*(one(case) for case in cases))

    async def approve_stream(
        self, cases: list[Case], spread_s: float, deadline_s: float = 150.0
    ) -> None:
        """Approve every case, each at a seeded moment within ``spread_s``; a case not proposed
        yet is proposed first, so proposals too are made while the faults strike."""
        deadline = time.monotonic() + deadline_s
        offsets = sorted(self.rng.uniform(0, spread_s) for _ in cases)
        start = time.monotonic()

        async def one(case: Case, offset: float) -> None:
            await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
            if case.proposal_id is None:
                await self.propose(case, deadline)
            if case.proposal_id is not None:
                await self.decide(case, "approve", deadline)

        await asyncio.gather(*(one(case, at) for case, at in zip(cases, offsets, strict=True)))
