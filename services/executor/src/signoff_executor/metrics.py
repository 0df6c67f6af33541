"""The executor's metrics. Labels are the operation kind and the outcome type: never an id."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

EXECUTION_SECONDS = Histogram(
    "signoff_executor_execution_seconds",
    "Time from a contract's delivery to its stored outcome, by operation kind and outcome type.",
    ["kind", "outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
OUTCOMES = Counter(
    "signoff_executor_outcomes_total",
    "Outcomes the executor stored, by outcome type.",
    ["outcome"],
)
DUPLICATES = Counter(
    "signoff_executor_duplicate_contracts_total",
    "Deliveries of a contract the executor had already seen, by the status they found.",
    ["status"],
)
PROVIDER_CALLS = Counter(
    "signoff_executor_provider_calls_total",
    "External calls (perform), by operation kind and result (answered / uncertain).",
    ["kind", "result"],
)
