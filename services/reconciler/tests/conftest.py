"""Fixtures of the reconciler's tests: a database with the reconciler's schema, and a scripted
external operation whose ``reconcile`` answers what each test tells it to."""

from __future__ import annotations

import asyncio
import importlib
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from alembic import command
from pydantic import BaseModel, ConfigDict
from signoff_contracts.operations import (
    Actor,
    AttemptRef,
    ExecutionContext,
    ExternalOperation,
    Locale,
    RenderedPreview,
    Resolved,
    Scope,
    StrandedAttempt,
)
from signoff_contracts.outcomes import OperationOutcome, Succeeded
from signoff_contracts.reasons import Reason
from signoff_reconciler.settings import ReconcilerGroup, ReconcilerSettings
from signoff_runtime.db import asyncpg_dsn
from signoff_runtime.migrations import config_for
from signoff_runtime.registry import Operations
from signoff_runtime.settings import AmqpSettings, DatabaseSettings
from signoff_runtime.testing.databases import session_engine
from signoff_runtime.topology import Topology
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine


@pytest_asyncio.fixture(scope="session")
async def database_url(_servers: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh database with only the reconciler's schema (another owner's migration under
    construction cannot break these tests)."""
    server = _servers[0]
    name = f"signoff_recon_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(server))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    await asyncio.to_thread(_migrate, url)
    yield url
    admin = await asyncpg.connect(asyncpg_dsn(server))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest_asyncio.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Overridden with ``database_url`` so this directory's tests and its database agree (the
    plugin's session-wide engine would follow whichever directory asked first)."""
    eng = session_engine(database_url)
    yield eng
    await eng.dispose()


def _migrate(url: str) -> None:
    module = importlib.import_module("signoff_reconciler.migrations")
    assert module.__file__ is not None
    command.upgrade(config_for(Path(module.__file__).parent, url), "head")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Transfer(_Frozen):
    amount: int


Answer = OperationOutcome | None | Exception


class ScriptedTransfer(ExternalOperation[Transfer, Transfer, Transfer, Transfer, str]):
    """``reconcile`` answers each attempt from ``script`` in order (``None`` = not yet)."""

    kind = "ledger.transfer"
    version = 1
    section = "ledger"
    resource = "account"
    summary = "Move money (test)."
    Request = Transfer
    Arguments = Transfer
    Preview = Transfer
    Result = Transfer

    def __init__(self) -> None:
        self.script: dict[str, list[Answer]] = {}
        self.asked: Counter[str] = Counter()
        #: what the scan finds, and the operator verdicts the domain recorded
        self.stranded: list[StrandedAttempt] = []
        self.verdicts: dict[str, bool] = {}

    async def resolve(
        self, request: Transfer, scope: Scope, conn: Any
    ) -> Resolved[Transfer, Transfer]:
        return Resolved(request, request)

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return True

    async def revalidate(self, arguments: Transfer, scope: Scope, conn: Any) -> Reason | None:
        return None

    def render_preview(self, preview: Transfer, locale: Locale) -> RenderedPreview:
        return RenderedPreview(title="transfer")

    def render_result(self, result: Transfer, locale: Locale) -> str:
        return "transferred"

    def open_provider(self) -> AbstractAsyncContextManager[str]:
        @asynccontextmanager
        async def client() -> AsyncIterator[str]:
            yield "provider-client"

        return client()

    async def begin_attempt(
        self, arguments: Transfer, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef:
        raise NotImplementedError

    async def perform(self, attempt: AttemptRef, arguments: Transfer, provider: str) -> Any:
        raise AssertionError("the reconciler must never perform")

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        raise NotImplementedError

    async def mark_unknown(self, attempt: AttemptRef, conn: Any) -> None:
        raise NotImplementedError

    async def reconcile(self, attempt_id: str, conn: Any, provider: str) -> OperationOutcome | None:
        assert provider == "provider-client"
        await conn.execute(text("SELECT 1"))  # it runs inside the check's transaction
        self.asked[attempt_id] += 1
        answers = self.script.get(attempt_id) or [None]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def stranded_attempts(self, conn: Any, older_than_s: float) -> list[StrandedAttempt]:
        await conn.execute(text("SELECT 1"))
        return list(self.stranded)

    async def settle_by_operator(
        self, attempt_id: str, conn: Any, *, applied: bool
    ) -> OperationOutcome | None:
        self.verdicts[attempt_id] = applied
        if applied:
            return Succeeded(result={"amount": 0})
        return None  # the reconciler's generic TerminalFailure


@pytest.fixture
def transfer() -> ScriptedTransfer:
    return ScriptedTransfer()


@pytest.fixture
def operations(transfer: ScriptedTransfer) -> Operations:
    return Operations([transfer])


@pytest_asyncio.fixture
async def settings(
    database_url: str, amqp_url: str, topology: Topology, engine: AsyncEngine
) -> ReconcilerSettings:
    async with engine.begin() as conn:  # earlier tests' unsent rows name deleted exchanges
        await conn.execute(
            text("UPDATE reconciler.outbox SET sent_at = now() WHERE sent_at IS NULL")
        )
    return ReconcilerSettings(
        env="test",
        log_level="WARNING",
        db=DatabaseSettings(url=database_url, pool_size=4),
        amqp=AmqpSettings(
            url=amqp_url, prefix=topology.prefix, delivery_limit=topology.delivery_limit
        ),
        # the DLQ archive is tested on its own (test_dead_letters); here the DLQs stay readable
        reconciler=ReconcilerGroup(
            poll_s=0.1, base_backoff_s=0.1, max_backoff_s=0.4, archive_dead_letters=False
        ),
    )
