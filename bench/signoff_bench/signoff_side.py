"""signoff's side: propose through the agent, approve through the proposals API, time outcomes.

The approval→outcome latency ends at ``proposals.outcome_at``: the database clock of the
statement that recorded the outcome, read after the batch (nothing polls per proposal). The
messages a batch caused are the outbox rows it added — every one is a persistent publish the
broker confirmed before the relay marked it sent — counted by schema and routing key.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
from signoff_runtime.topology import QUEUES, Topology

from signoff_bench.client import Connection
from signoff_bench.driver import Sample, approve_all, cycle_all, offer
from signoff_bench.infra import Probe, ready_messages
from signoff_bench.results import Batch, batch
from signoff_bench.seeding import (
    KIND,
    Club,
    add_forms,
    add_refund_cases,
    draft,
    propose_all,
    propose_refunds,
)
from signoff_bench.stack import SignoffStack
from signoff_bench.window import Windows

TERMINAL = ["succeeded", "revision_required", "failed", "declined", "expired", "superseded"]


@dataclass
class SignoffSide:
    stack: SignoffStack
    loader: asyncpg.Connection
    probe: Probe
    club: Club
    outbox_schemas: list[str]

    @property
    def queues(self) -> list[str]:
        topology = Topology(self.stack.prefix)
        return [topology.name(spec.key) for spec in QUEUES]

    async def prepare(self, n: int) -> list[str]:
        forms = await add_forms(self.loader, self.club.organization_id, n)
        return await propose_all(self.stack.url("agent"), self.club, forms)

    async def quiet(self) -> bool:
        unsent = " + ".join(
            f"(SELECT count(*) FROM {s}.outbox WHERE sent_at IS NULL)"  # noqa: S608
            for s in self.outbox_schemas
        )
        if await self.probe.fetchval(f"SELECT {unsent}"):
            return False
        return await ready_messages(self.stack.amqp_url, self.queues) == 0

    async def _outbox_marks(self) -> dict[str, int]:
        return {
            s: int(await self.probe.fetchval(f"SELECT coalesce(max(id), 0) FROM {s}.outbox"))  # noqa: S608
            for s in self.outbox_schemas
        }

    async def prepare_refunds(self, n: int) -> list[str]:
        """Card refund proposals (the executor scaling batches): each calls the provider."""
        orders = await add_refund_cases(self.loader, self.club.refund_case, n)
        return await propose_refunds(self.stack.url("agent"), self.club, self.loader, orders)

    async def prepare_forms(self, n: int) -> list[str]:
        """Forms for a full-cycle batch (proposed inside the measured window)."""
        return await add_forms(self.loader, self.club.organization_id, n)

    async def cycle(self, windows: Windows, forms: list[str], concurrency: int) -> Batch:
        """The full cycle: propose (the agent's machine-facing endpoint) → approve → outcome,
        per form; latency from the propose request to the recorded outcome."""
        numbered = {form: i for i, form in enumerate(forms)}
        segments = self.club.segment_ids

        async def propose(conns: Mapping[str, Connection], form: str) -> tuple[int, str]:
            body = {"resource_id": form, "request": draft(numbered[form], segments)}
            status, answer = await conns["agent"].request(
                "POST", f"/v1/operations/{KIND}/propose", json.dumps(body).encode()
            )
            return status, json.loads(answer)["proposal"]["id"] if status == 201 else form

        async def approve(conns: Mapping[str, Connection], pid: str) -> tuple[int, str]:
            status, _ = await conns["proposals"].request("POST", f"/v1/proposals/{pid}/approve")
            return status, pid

        bases = {"agent": self.stack.url("agent"), "proposals": self.stack.url("proposals")}
        samples = await cycle_all(bases, self.club.headers, forms, [propose, approve], concurrency)
        ids = [s.key for s in samples if s.status < 300]
        await self.until_terminal(ids)
        spent = await windows.close(self.quiet)
        rows = await self._outcomes(ids)
        return batch(
            "signoff-cycle",
            concurrency,
            samples,
            {r["id"]: r["at"] for r in rows if r["at"] is not None},
            spent,
            messages=None,
            ok=sum(1 for r in rows if r["status"] == "succeeded"),
            processes=self.stack.pids(),
        )

    async def open_loop(self, ids: list[str], rate: float) -> list[Sample]:
        """Approvals offered at ``rate`` (scheduled-time samples); waits for every outcome."""
        samples = await offer(
            self.stack.url("proposals"),
            self.club.headers,
            [(pid, f"/v1/proposals/{pid}/approve") for pid in ids],
            rate,
        )
        await self.until_terminal(ids)
        return samples

    async def measure(
        self, windows: Windows, ids: list[str], concurrency: int, executors: int = 1
    ) -> Batch:
        marks = await self._outbox_marks()
        samples = await approve_all(
            self.stack.url("proposals"),
            self.club.headers,
            [(pid, f"/v1/proposals/{pid}/approve") for pid in ids],
            concurrency,
        )
        await self.until_terminal(ids)
        spent = await windows.close(self.quiet)
        messages = await self._messages(marks)
        rows = await self._outcomes(ids)
        result = batch(
            "signoff",
            concurrency,
            samples,
            {r["id"]: r["at"] for r in rows if r["at"] is not None},
            spent,
            messages=sum(messages["by_route"].values()),
            ok=sum(1 for r in rows if r["status"] == "succeeded"),
            processes=self.stack.pids(),
            executors=executors,
        )
        result.notes.update(
            messages_by_route={k: v / len(ids) for k, v in messages["by_route"].items()},
            message_bytes=messages["bytes"],
            statuses=_statuses(rows),
        )
        return result

    async def until_terminal(self, ids: list[str]) -> None:
        deadline = time.monotonic() + 60 + len(ids) / 2
        while time.monotonic() < deadline:
            done = await self.probe.fetchval(
                "SELECT count(*) FROM proposals.proposals "
                "WHERE id = ANY($1::text[]) AND status = ANY($2::text[])",
                ids,
                TERMINAL,
            )
            if done == len(ids):
                return
            await _pause()
        raise AssertionError(f"{len(ids)} proposals did not all reach a terminal status")

    async def _outcomes(self, ids: list[str]) -> list[asyncpg.Record]:
        return await self.probe.fetch(
            "SELECT id, status, extract(epoch FROM outcome_at)::float8 AS at "
            "FROM proposals.proposals WHERE id = ANY($1::text[])",
            ids,
        )

    async def outcome_times(self, ids: list[str]) -> dict[str, float]:
        """When each proposal's outcome was recorded (database clock, epoch seconds)."""
        return {r["id"]: r["at"] for r in await self._outcomes(ids) if r["at"] is not None}

    async def _messages(self, marks: dict[str, int]) -> dict[str, Any]:
        by_route: dict[str, int] = {}
        sizes: list[tuple[int, float]] = []
        for schema, mark in marks.items():
            rows = await self.probe.fetch(
                f"SELECT routing_key, count(*) AS n, avg(length(body))::float8 AS size "  # noqa: S608
                f"FROM {schema}.outbox WHERE id > $1 GROUP BY routing_key",
                mark,
            )
            for r in rows:
                by_route[f"{schema}:{r['routing_key']}"] = int(r["n"])
                sizes.append((int(r["n"]), float(r["size"])))
        total = sum(n for n, _ in sizes)
        mean = sum(n * size for n, size in sizes) / total if total else 0.0
        return {"by_route": by_route, "bytes": mean}


def _statuses(rows: list[asyncpg.Record]) -> dict[str, int]:
    found: dict[str, int] = {}
    for r in rows:
        found[r["status"]] = found.get(r["status"], 0) + 1
    return found


async def _pause() -> None:
    await asyncio.sleep(0.1)
