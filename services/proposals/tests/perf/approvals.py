"""A burst of approval commands: how fast the proposals service decides it, by batch size
(issue 18, "approvals arriving at once").

``.venv/bin/python services/proposals/tests/perf/approvals.py`` makes a fresh database and
queue prefix, then starts the proposals service as its own process (``python -m
signoff_proposals``, the tests' toy domain plugged in) once per round, with
``SIGNOFF_PROPOSALS__APPROVAL_BATCH_SIZE`` taking each of ``BENCH_BATCH_SIZES`` (default
``1,32``) in turn, ``BENCH_REPEATS`` times (default 3), so the sizes alternate in one run on
one loaded machine.
Each round proposes one toy credit through the service and copies it into ``BENCH_N`` (default
400) pending proposals (what is measured is the decision, not the intake), then sends one
``ApproveProposal`` for each, all at once over request-reply, and waits for every reply. One
line per round: approvals per second from the first send to the last reply, the service's CPU
per approval, the database's commits per approval (``xact_commit``: the outbox relay's count
too), and how many were claimed. Only ratios between the lines of one run mean anything.

It uses the tests' toy domain and kit, so it lives with the service's tests (``bench/``
measures through the public interfaces of the whole stack); pytest does not collect it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path

import aio_pika
import asyncpg
import httpx
from signoff_contracts.v1 import ApproveProposal, ProposalRequestReply
from signoff_contracts.v2 import ApprovalReply
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.rpc import Requester
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing import servers
from signoff_runtime.testing.databases import fresh_database
from signoff_runtime.testing.processes import ServiceProcess, free_port, stack_env
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import Topology
from sqlalchemy.ext.asyncio import create_async_engine

SUPPORT = Path(__file__).parent.parent / "support"
sys.path.insert(0, str(SUPPORT))

from proposals_testkit import enrol, proposal_request  # noqa: E402
from signoff_conformance.toy.domain import create_schema, open_account  # noqa: E402

#: copies of one proposal, each under its own id and pending for an hour
_COPIES = (
    "INSERT INTO proposals.proposals SELECT (jsonb_populate_record(NULL::proposals.proposals, "
    "to_jsonb(p) || jsonb_build_object('id', $2 || i, 'expires_at', now() + interval '1 hour')"
    ")).* FROM proposals.proposals p, generate_series(1, $3) AS i WHERE p.id = $1"
)


def start_service(
    url: str, amqp_url: str, topology: Topology, settings: dict[str, str]
) -> ServiceProcess:
    """The proposals service as its own process, the tests' toy domain plugged in, with
    ``settings`` (environment variables) on top."""
    env = stack_env(url, amqp_url, topology.prefix, quick=False) | {
        "SIGNOFF_PROPOSALS__TEST_PLUGIN": "proposals_toy:build",
        "SIGNOFF_PROPOSALS__STUCK_AFTER_S": "3600",
        "SIGNOFF_PROPOSALS__PORT": str(port := free_port()),
        "SIGNOFF_LOG_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        **settings,
    }
    log_dir = Path(tempfile.mkdtemp(prefix="signoff-perf-"))
    argv = [sys.executable, "-m", "signoff_proposals"]
    return ServiceProcess("proposals", argv, env, port, log_dir).start()


async def propose_one(amqp_url: str, topology: Topology, proposer: str, account: str) -> str:
    """One toy credit proposed over request-reply, as an agent would; its id."""
    async with Requester(amqp_url, app_id="perf") as requester:
        proposed = await requester.ask(
            proposal_request(proposer, account),
            ProposalRequestReply,
            topology,
            "proposals.requests",
            30.0,
        )
    assert proposed.accepted and proposed.proposal is not None, proposed
    return proposed.proposal.id


async def _round(dsn: str, url: str, amqp_url: str, topology: Topology, size: int, n: int) -> str:
    auth = AuthSettings()
    engine = create_async_engine(url)
    org = f"org_{secrets.token_hex(4)}"
    proposer = issue_token(auth, await enrol(engine, org), org)
    approver = issue_token(auth, await enrol(engine, org), org)
    account = await open_account(engine, org, "Ada's Bakery")
    await engine.dispose()
    proc = start_service(
        url, amqp_url, topology, {"SIGNOFF_PROPOSALS__APPROVAL_BATCH_SIZE": str(size)}
    )
    db = await asyncpg.connect(dsn)
    try:
        await asyncio.to_thread(proc.wait_healthy, 90.0)
        assert proc.proc is not None
        original = await propose_one(amqp_url, topology, proposer, account)
        async with Requester(amqp_url, app_id="perf") as requester:
            prefix = f"prp_{secrets.token_hex(4)}x"
            await db.execute(_COPIES, original, prefix, n)
            await asyncio.sleep(1.0)  # the statistics collector's counters flushed
            commits, cpu = await _commits(db), cpu_seconds(proc.proc.pid)
            started = time.monotonic()
            replies = await asyncio.gather(
                *(
                    requester.ask(
                        ApproveProposal(token=approver, proposal_id=f"{prefix}{i}"),
                        ApprovalReply,
                        topology,
                        "proposals.approvals",
                        300.0,
                    )
                    for i in range(1, n + 1)
                )
            )
            seconds = time.monotonic() - started
            spent = cpu_seconds(proc.proc.pid) - cpu
            await asyncio.sleep(1.0)
            committed = await _commits(db) - commits
            batches = await asyncio.to_thread(_batches, proc.url)
    finally:
        await db.close()
        await asyncio.to_thread(proc.stop)
    claimed = sum(reply.result == "claimed" for reply in replies)
    return (
        f"batch_size={size} n={n} {n / seconds:.0f} approvals/s "
        f"service_cpu={1000 * spent / n:.2f} ms/approval commits={committed / n:.2f}/approval "
        f"claimed={claimed} batches={batches}"
    )


def _batches(url: str) -> str:
    """How many batches the approvals were decided in (the service's own histogram)."""
    found = {}
    for line in httpx.get(f"{url}/metrics", timeout=10.0).text.splitlines():
        if line.startswith("signoff_consumer_batch_size_") and "proposals.approvals" in line:
            found[line.split("{")[0].rsplit("_", 1)[1]] = float(line.rsplit(" ", 1)[1])
    return f"{found.get('count', 0):.0f}" if found else "-"


async def _commits(db: asyncpg.Connection) -> int:
    return int(
        await db.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
    )


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU seconds so far (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: one round at a batch size: ``(database URL, AMQP URL, topology, batch size)`` → its line
Round = Callable[[str, str, Topology, int], Awaitable[str]]


async def alternate(one_round: Round) -> None:
    """A fresh database and queue prefix, then ``one_round`` at each of ``BENCH_BATCH_SIZES``
    (default ``1,32``), ``BENCH_REPEATS`` times (default 3), the sizes' order rotating; a line
    each."""
    sizes = [int(s) for s in os.environ.get("BENCH_BATCH_SIZES", "1,32").split(",")]
    repeats = int(os.environ.get("BENCH_REPEATS", "3"))
    with ExitStack() as exits:
        pg_url, amqp_url = servers.postgres_url(exits), servers.amqp_url(exits)
        async with fresh_database(pg_url, "signoff_perf") as url:
            engine = create_async_engine(url)
            await create_schema(engine)
            await engine.dispose()
            topology = Topology(f"p{secrets.token_hex(4)}", delivery_limit=3)
            connection = await aio_pika.connect(amqp_url)
            async with connection:
                await topology.declare(await connection.channel())
            try:
                for repeat in range(repeats):
                    turn = sizes[repeat % len(sizes) :] + sizes[: repeat % len(sizes)]
                    for size in turn:
                        line = await one_round(url, amqp_url, topology, size)
                        sys.stdout.write(f"{line} load={os.getloadavg()[0]:.1f}\n")
                        sys.stdout.flush()
            finally:
                connection = await aio_pika.connect(amqp_url)
                async with connection:
                    await topology.delete(await connection.channel())


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "400"))

    async def one_round(url: str, amqp_url: str, topology: Topology, size: int) -> str:
        return await _round(asyncpg_dsn(url), url, amqp_url, topology, size, n)

    await alternate(one_round)


if __name__ == "__main__":
    asyncio.run(main())
