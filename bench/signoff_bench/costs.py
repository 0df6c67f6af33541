"""What one proposal costs, propose and approval apart: the figures docs/scaling.md is built on.

``make bench`` times the approval (approve → outcome) and prepares the proposals untimed. Here
the same rig measures both halves of a proposal's life in windows of their own — proposing
(``POST /v1/operations/{kind}/propose`` through the agent, eight at a time), then approving at
one concurrency — and prints, per proposal: PostgreSQL commits, outbox messages, the broker's
confirmed publishes and deliveries (node-wide), and CPU by process group.

    PYTHONPATH=bench .venv/bin/python -m signoff_bench.costs   # BENCH_N=100 BENCH_CONCURRENCY=16
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from signoff_bench.rig import Rig, rig
from signoff_bench.settings import load
from signoff_bench.window import Spent, side_cpu


def _per_proposal(
    spent: Spent, r: Rig, n: int, outbox: int, span: tuple[float, float]
) -> dict[str, object]:
    """``span``: the work's first and last moment (wall clock), over which the machine's busy
    share is read (the window's quiet tail would dilute it)."""
    cpu = side_cpu(spent, r.stack.pids())
    broker = spent.broker or {}
    return {
        "n": n,
        "seconds": round(spent.seconds, 1),
        "commits": round(spent.commits / n, 2),
        "outbox_messages": round(outbox / n, 2),
        "broker_confirmed": round(broker.get("confirmed", 0) / n, 2),
        "broker_delivered": round(broker.get("delivered", 0) / n, 2),
        "cpu_ms": {k: round(1000 * v / n, 2) for k, v in sorted(cpu.items())},
        "cpu_ms_total": round(1000 * sum(cpu.values()) / n, 1),
        "machine_busy": round(spent.machine_busy(*span), 2),
    }


async def _outbox_rows(r: Rig) -> int:
    total = 0
    for schema in r.signoff.outbox_schemas:
        total += int(await r.probe.fetchval(f"SELECT count(*) FROM {schema}.outbox"))  # noqa: S608
    return total


_INSERTS = (
    "SELECT schemaname || '.' || relname AS t, n_tup_ins AS n FROM pg_stat_user_tables "
    "WHERE schemaname = ANY($1::text[])"
)
_BYTES = (
    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = ANY($1::text[]) AND c.relkind = 'r'"
)
SCHEMAS = ["agent", "proposals", "executor", "reconciler", "club"]


async def _storage(r: Rig) -> tuple[dict[str, int], int]:
    """Rows inserted so far per table (PostgreSQL's statistics) and the schemas' bytes."""
    rows = await r.probe.fetch(_INSERTS, SCHEMAS)
    return {row["t"]: int(row["n"]) for row in rows}, int(await r.probe.fetchval(_BYTES, SCHEMAS))


def _grown(
    before: tuple[dict[str, int], int], after: tuple[dict[str, int], int], n: int
) -> dict[str, object]:
    rows = {t: round((k - before[0].get(t, 0)) / n, 2) for t, k in sorted(after[0].items())}
    return {
        "rows_per_proposal": {t: k for t, k in rows.items() if k},
        "bytes_per_proposal": round((after[1] - before[1]) / n),
    }


async def main() -> dict[str, object]:
    config = load()
    n = int(os.environ.get("BENCH_N", "100"))
    concurrency = config.concurrency[0] if "BENCH_CONCURRENCY" in os.environ else 16
    async with rig(config) as r:
        await r.windows.start(r.signoff.quiet)
        background = await r.windows.calibrate()
        rows = await _outbox_rows(r)
        stored = await _storage(r)
        began = time.time()
        ids = await r.signoff.prepare(n)
        span = (began, time.time())
        proposing = await r.windows.close(r.signoff.quiet)
        proposed_rows = await _outbox_rows(r)
        approved = await r.signoff.measure(r.windows, ids, concurrency)
        approved_rows = await _outbox_rows(r)
        return {
            "storage": _grown(stored, await _storage(r), n),
            "background_commits_per_s": round(background, 2),
            "propose": {
                **_per_proposal(proposing, r, n, proposed_rows - rows, span),
                "per_s": round(n / (span[1] - span[0]), 1),
            },
            "approve": {
                "concurrency": concurrency,
                "per_s": round(approved.throughput, 1),
                "commits": round(approved.commits_per_proposal, 2),
                "outbox_messages": round(float(approved.messages_per_proposal or 0.0), 2),
                "outbox_rows_check": round((approved_rows - proposed_rows) / n, 2),
                "cpu_ms": {k: round(v, 2) for k, v in approved.cpu_ms_per_proposal.items()},
                "cpu_ms_total": round(sum(approved.cpu_ms_per_proposal.values()), 1),
            },
            "load_average": os.getloadavg(),
        }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(asyncio.run(main()), indent=2) + "\n")
