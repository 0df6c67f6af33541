"""SIGTERM while a contract is mid-transaction: the real process finishes it, commits and acks."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from signoff_contracts.outcomes import Succeeded
from signoff_executor.settings import ExecutorSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import free_port
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from support import contracts, harness, toy
from support.bus import Bus

pytestmark = pytest.mark.e2e
TESTS = Path(__file__).parents[1]


@pytest.fixture
def executor_process(settings_env: dict[str, str], settings: ExecutorSettings):
    port = free_port()
    env = {
        **os.environ,
        **settings_env,
        "PYTHONPATH": str(TESTS),
        "SIGNOFF_LOG_LEVEL": "WARNING",
        "SIGNOFF_CONTRACTS__VERIFY_KEYS": json.dumps(contracts.VERIFYING.verify_keys),
        "SIGNOFF_EXECUTOR__PORT": str(port),
        "SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S": "20",
    }
    proc = subprocess.Popen([sys.executable, "-m", "support.serve"], env=env, cwd=TESTS)
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_sigterm_lets_the_in_flight_contract_commit_and_ack(
    engine: AsyncEngine,
    bus: Bus,
    executor_process,
    database_url: str,
) -> None:
    proc, port = executor_process
    await wait_until(lambda: _healthy(port), timeout=30, what="executor /healthz")
    account = await toy.new_account(engine)
    slow = contracts.grant(account, delay_s=2.0)
    await bus.publish(slow)
    await wait_until(lambda: _sleeping(engine), what="the contract mid-transaction")

    proc.send_signal(signal.SIGTERM)
    returncode = await asyncio.to_thread(proc.wait, 30)

    # uvicorn re-raises the signal it handled once shutdown is complete
    assert returncode in (0, -signal.SIGTERM)
    outcome = await harness.outcome(engine, slow.contract_id, within=1)
    assert isinstance(outcome, Succeeded)
    assert await toy.credits_of(engine, slow.contract_id) == 1
    ready, consumers = await bus.depth("executor.contracts")
    assert (ready, consumers) == (0, 0), "the delivery was acked, not handed back"


async def _healthy(port: int) -> bool:
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
    except httpx.TransportError:
        return False
    return response.status_code == 200


async def _sleeping(engine: AsyncEngine) -> bool:
    async with engine.connect() as conn:
        busy = (
            await conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND state = 'active' AND query LIKE 'SELECT pg_sleep%'"
                )
            )
        ).scalar_one()
    return bool(busy)
