"""The reconciler's metrics. Labels are the operation kind and results: never an id."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

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
ESCALATED = Counter(
    "signoff_reconciler_escalated_total",
    "Checks still inconclusive past SIGNOFF_RECONCILER__ESCALATE_AFTER_S, escalated to operators "
    "(alert on any increase: the check stays open and is asked about more slowly until the "
    "provider or an operator — signoff reconcile ID --resolve — concludes it).",
    ["kind"],
)
OPEN_CHECKS = Gauge(
    "signoff_reconciler_open_checks", "Checks of uncertain attempts not concluded yet."
)
ESCALATED_OPEN_CHECKS = Gauge(
    "signoff_reconciler_escalated_open_checks",
    "Escalated checks not concluded yet (each needs an operator's eye).",
)
OLDEST_OPEN_CHECK = Gauge(
    "signoff_reconciler_oldest_open_check_age_seconds",
    "Age of the oldest open check (0 when none), by the database clock.",
)
STRANDED = Counter(
    "signoff_reconciler_stranded_found_total",
    "Attempts the scan found stranded (no ReconciliationRequired had opened a check).",
    ["kind"],
)
WITHHELD = Counter(
    "signoff_reconciler_outcomes_withheld_total",
    "Outcomes concluded for a check whose contract is not known yet (found by the scan).",
)
OPERATOR_RESOLUTIONS = Counter(
    "signoff_reconciler_operator_resolutions_total",
    "Checks resolved by an operator (signoff reconcile --resolve), by verdict.",
    ["verdict"],
)
DEAD_LETTERS = Counter(
    "signoff_reconciler_dead_letters_archived_total",
    "Dead letters archived into reconciler.dead_letters, by queue and reason.",
    ["queue", "reason"],
)
