"""Prometheus metrics shared by every service. Labels stay low-cardinality: never an id."""

from __future__ import annotations

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
