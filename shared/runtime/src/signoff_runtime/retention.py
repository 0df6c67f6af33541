"""Retention: bookkeeping rows are deleted once they can no longer matter; the record never is.

What grows with traffic and is bookkeeping, not record:

- **sent outbox rows** — a row matters until its message is confirmed by the broker
  (``sent_at`` is set only then); after that it is history. Pruned ``outbox_s`` after
  ``sent_at``. An unsent row (``sent_at IS NULL``) is never touched, whatever its age: it is
  a message still owed, including one whose publish is in doubt (published, confirm lost —
  the relay re-publishes it and the consumer's inbox drops the copy).
- **inbox rows** — each is the dedup key of a message already handled (its row commits with the
  work). Pruned ``inbox_s`` after it was received. The window must outlast any redelivery:
  a broker redelivers within minutes, and a dead letter replayed later than ``inbox_s`` would be
  handled again — so the dead-letter replay (``signoff dlq replay``) is for recent letters, and
  the default (7 days) is far beyond the queues' delivery limits.
- **the agent's journal** (the conversations' event-stream positions) after ``journal_s``: a
  reader resuming from an older ``Last-Event-ID`` simply gets what is left (the page itself reads
  messages and cards, which are kept).
- **propose idempotency keys** after ``propose_keys_s`` (24 h by default): the documented window
  in which a retried ``POST /v1/proposals`` with the same ``Idempotency-Key`` answers with the
  first proposal; after it, the key is free again.

Kept, because they are the record: proposals, their audit trail, pause points, executions
(including every in-doubt attempt), reconciliation checks, dead letters, conversations. Their
archive and partition plan is in docs/operations.md.

Each owner service runs one loop (``pruning``): every ``interval_s`` it deletes, per rule,
batches of at most ``batch`` rows (``FOR UPDATE SKIP LOCKED``: replicas share the work and never
wait on a row another transaction holds) until a batch comes back short. Counted in
``signoff_pruned_rows_total{table}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog
from prometheus_client import Counter
from pydantic import BaseModel, Field
from sqlalchemy import Table, text
from sqlalchemy.ext.asyncio import AsyncEngine

log = structlog.get_logger(__name__)

PRUNED = Counter(
    "signoff_pruned_rows_total", "Bookkeeping rows deleted by retention, by table.", ["table"]
)

DAY_S = 86_400.0


class RetentionSettings(BaseModel):
    """``SIGNOFF_RETENTION__*``: how long bookkeeping rows are kept (seconds)."""

    enabled: bool = True
    outbox_s: float = Field(default=7 * DAY_S, gt=0)
    inbox_s: float = Field(default=7 * DAY_S, gt=0)
    journal_s: float = Field(default=7 * DAY_S, gt=0)
    propose_keys_s: float = Field(default=DAY_S, gt=0)
    interval_s: float = Field(default=300.0, gt=0)
    batch: int = Field(default=500, ge=1, le=50_000)


@dataclass(frozen=True, slots=True)
class Rule:
    """Rows of ``table`` whose ``age_column`` is older than ``keep_s`` and that are ``finished``."""

    table: Table
    age_column: str
    keep_s: float
    #: SQL true only for rows that can no longer matter (never an unsent or in-doubt row)
    finished: str = "true"

    @property
    def name(self) -> str:
        return f"{self.table.schema}.{self.table.name}"


def outbox_rule(table: Table, settings: RetentionSettings) -> Rule:
    return Rule(table, "sent_at", settings.outbox_s, finished="sent_at IS NOT NULL")


def inbox_rule(table: Table, settings: RetentionSettings) -> Rule:
    return Rule(table, "received_at", settings.inbox_s)


async def prune(engine: AsyncEngine, rule: Rule, batch: int) -> int:
    """Delete one batch of ``rule``'s rows; the number deleted."""
    statement = text(
        f"DELETE FROM {rule.name} WHERE ctid = ANY(ARRAY("  # noqa: S608 (names from tables)
        f"SELECT ctid FROM {rule.name} WHERE {rule.finished} "
        f"AND {rule.age_column} < now() - make_interval(secs => :keep) "
        "LIMIT :batch FOR UPDATE SKIP LOCKED))"
    )
    async with engine.begin() as conn:
        result = await conn.execute(statement, {"keep": rule.keep_s, "batch": batch})
    deleted = int(result.rowcount or 0)
    if deleted:
        PRUNED.labels(table=rule.name).inc(deleted)
    return deleted


async def prune_all(engine: AsyncEngine, rules: Sequence[Rule], batch: int) -> dict[str, int]:
    """Every rule, batch after batch until one comes back short: what each deleted."""
    deleted: dict[str, int] = {}
    for rule in rules:
        total = 0
        while (count := await prune(engine, rule, batch)) > 0:
            total += count
            if count < batch:
                break
        deleted[rule.name] = total
    return deleted


def pruning(
    engine: AsyncEngine, rules: Sequence[Rule], settings: RetentionSettings
) -> Callable[[], Awaitable[None]]:
    """The service loop: ``prune_all`` every ``interval_s`` (a no-op loop when disabled)."""

    async def loop() -> None:
        if not settings.enabled:
            return
        while True:
            deleted = await prune_all(engine, rules, settings.batch)
            if any(deleted.values()):
                log.info("retention.pruned", **{k: v for k, v in deleted.items() if v})
            await asyncio.sleep(settings.interval_s)

    loop.__name__ = loop.__qualname__ = "pruning"
    return loop
