"""Prometheus metrics shared by every service. Labels stay low-cardinality: never an id."""

from __future__ import annotations

import functools

from prometheus_client import Counter, Gauge, Histogram

OUTBOX_PUBLISHED = Counter(
    "signoff_outbox_published_total", "Outbox rows published and confirmed.", ["schema"]
)
OUTBOX_PUBLISH_ERRORS = Counter(
    "signoff_outbox_publish_errors_total", "Outbox publishes that failed (row kept).", ["schema"]
)
MESSAGES_CONSUMED = Counter(
    "signoff_messages_consumed_total",
    "Messages settled by a consumer, by queue and result.",
    ["queue", "result"],
)
MESSAGES_DEAD_LETTERED = Counter(
    "signoff_messages_dead_lettered_total",
    "Messages a consumer sent to the dead-letter queue, by queue and reason code.",
    ["queue", "reason"],
)
HANDLER_SECONDS = Histogram(
    "signoff_handler_seconds", "Time to handle one message, by queue.", ["queue"]
)
OUTBOX_UNSENT = Gauge(
    "signoff_outbox_unsent", "Outbox rows not yet published, by schema.", ["schema"]
)
OUTBOX_OLDEST_UNSENT = Gauge(
    "signoff_outbox_oldest_unsent_age_seconds",
    "Age of the oldest unsent outbox row (0 when none), by schema, by the database clock.",
    ["schema"],
)
COMMITS_IN_DOUBT = Counter(
    "signoff_commits_in_doubt_total",
    "COMMITs that failed without an answer, by what asking the database afterwards found.",
    ["resolution"],
)
OUTBOX_RELAY_HEARTBEAT = Gauge(
    "signoff_outbox_relay_heartbeat_timestamp_seconds",
    "Unix time of the relay's last pass that reached its table (every poll interval), by schema.",
    ["schema"],
)
BATCH_SIZE = Histogram(
    "signoff_consumer_batch_size",
    "Deliveries a batching consumer handled in one transaction, by queue.",
    ["queue"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
BATCHES_SPLIT = Counter(
    "signoff_consumer_batches_split_total",
    "Batches whose transaction failed, their messages then handled one at a time, by queue.",
    ["queue"],
)
BATCH_WAITING = Gauge(
    "signoff_consumer_batch_waiting",
    "Deliveries waiting for the batch in flight to settle before they are handled, by queue.",
    ["queue"],
)


@functools.cache
def handled(queue: str) -> tuple[Counter, Histogram]:
    """``queue``'s ``ok`` count and handler-time histogram, looked up once: a label lookup costs
    more than the count it finds (~4 µs a message, issue 18)."""
    return MESSAGES_CONSUMED.labels(queue=queue, result="ok"), HANDLER_SECONDS.labels(queue=queue)
