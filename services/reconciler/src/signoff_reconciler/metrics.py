"""The reconciler's metrics. Labels are the operation kind and results: never an id."""

from __future__ import annotations

from prometheus_client import Counter

CHECKS = Counter(
    "signoff_reconciler_checks_total",
    "Checks of uncertain attempts, by operation kind and result (resolved / pending / error).",
    ["kind", "result"],
)
OUTCOMES = Counter(
    "signoff_reconciler_outcomes_total",
    "Authoritative outcomes the reconciler reported, by outcome type.",
    ["outcome"],
)
REQUESTS = Counter(
    "signoff_reconciler_requests_total",
    "ReconciliationRequired messages, by result (recorded / duplicate).",
    ["result"],
)
