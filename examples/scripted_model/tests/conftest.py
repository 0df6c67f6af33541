"""Fixtures running the scripted model server as a real process, as the agent meets it.

One process per session (``python -m signoff_scripted_model`` on a free port, waited for
on ``/healthz`` with a deadline, stopped at the end); every test gets it reset and an
``openai.AsyncOpenAI`` client that never retries, so each call is exactly one request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import openai
import pytest
from signoff_scripted_model.testing import ModelAdmin, RunningModelServer, running_model_server


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningModelServer]:
    log_path = tmp_path_factory.mktemp("scripted_model") / "server.log"
    with running_model_server(log_path, script="echo") as server:
        yield server
        log = server.log()
    assert "Traceback" not in log, log  # faults, bad input and script bugs must not crash it


@pytest.fixture(scope="session")
async def session_admin(model_server: RunningModelServer) -> AsyncIterator[ModelAdmin]:
    admin = ModelAdmin(model_server.url)
    yield admin
    await admin.aclose()


@pytest.fixture
async def admin(session_admin: ModelAdmin) -> ModelAdmin:
    """The session's admin client, with the server reset so each test starts from nothing."""
    await session_admin.reset()
    return session_admin


@pytest.fixture(scope="session")
async def session_client(model_server: RunningModelServer) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=model_server.base_url, api_key="x", max_retries=0)
    yield client
    await client.close()


@pytest.fixture
def client(session_client: openai.AsyncOpenAI, admin: ModelAdmin) -> openai.AsyncOpenAI:
    """The real SDK, no retries (one call, one request), against a freshly reset server."""
    return session_client
