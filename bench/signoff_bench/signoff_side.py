"""signoff's side: propose through the agent, approve through the proposals API, time outcomes.

The approval→outcome latency ends at ``proposals.outcome_at``: the database clock of the
statement that recorded the outcome, read after the batch (nothing polls per proposal). The
messages a batch caused are the outbox rows it added — every one is a persistent publish the
broker confirmed before the relay marked it sent — counted by schema and routing key.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
from signoff_runtime.topology import QUEUES, Topology

from signoff_bench.driver import approve_all
from signoff_bench.infra import Probe, ready_messages
from signoff_bench.results import Batch, batch
from signoff_bench.seeding import Club, add_forms, propose_all
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
