"""A private PostgreSQL and RabbitMQ for the fault module, and signoff running against them.

Both servers start once for the module (in parallel: the broker takes ~15 s to boot here) and
stop at its end, so nothing of theirs idles through the rest of ``make test``. If either cannot
start, every fault test errors with the server's reason: on these machines a missing fault suite
is a failure, not a skip. See docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))  # faults_*: module names no other suite uses

from faults_proxy import Proxy
from faults_run import RESULTS, SESSION_STARTED, findings, table, write_docs
from faults_servers import PrivatePostgres, PrivateRabbit, signoff_database
from faults_stack import FaultStack


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "faults: fault injection against private servers (SIGNOFF_FAULTS=long)"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    if not RESULTS:
        return
    terminalreporter.write_sep("=", "fault injection (tests/faults)")
    terminalreporter.write_line(table(RESULTS))
    if found := findings(RESULTS):
        terminalreporter.write_line(found)
    if os.environ.get("SIGNOFF_FAULTS_WRITE_DOCS") == "1" and exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
    ):  # an interrupted run's table is not a result
        write_docs(RESULTS, time.monotonic() - SESSION_STARTED)
        terminalreporter.write_line("results written to docs/reliability.md")


@pytest.fixture(scope="module")
def private_servers() -> Iterator[tuple[PrivatePostgres, PrivateRabbit]]:
    pg, rabbit = PrivatePostgres(), PrivateRabbit()
    try:
        with ThreadPoolExecutor(2) as pool:
            started: list[Future[Any]] = [pool.submit(pg.start), pool.submit(rabbit.start)]
            for future in started:
                future.result()  # ServerFailed says which server and why
        yield pg, rabbit
    finally:
        rabbit.stop()
        pg.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fault_stack(
    private_servers: tuple[PrivatePostgres, PrivateRabbit],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[FaultStack]:
    pg, rabbit = private_servers
    db_url, engine = await signoff_database(pg)
    proxy = Proxy()
    stack = FaultStack(pg, rabbit, proxy, engine, db_url, tmp_path_factory.mktemp("faults-logs"))
    try:
        await asyncio.to_thread(stack.start)
        yield stack
    finally:
        await asyncio.to_thread(stack.stop)
        await stack.http.aclose()
        proxy.close()
        await engine.dispose()
