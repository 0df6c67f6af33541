"""The proposals service's own metrics. Labels are kinds, statuses and results — never an id."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

TRANSITIONS = Counter(
    "signoff_proposals_transitions_total",
    "Proposal status changes (creation counts as `pending`), by operation kind and new status.",
    ["kind", "status"],
)
APPROVAL_COMMANDS = Counter(
    "signoff_proposals_approval_commands_total",
    "Approval commands answered, by channel (http/amqp), command and result.",
    ["channel", "command", "result"],
)
OUTCOMES_IGNORED = Counter(
    "signoff_proposals_outcomes_ignored_total",
    "Outcome reports that changed nothing (duplicate, late, or for another contract).",
    ["why"],
)
CONTRACTS_REPUBLISHED = Counter(
    "signoff_proposals_contracts_republished_total",
    "Execution contracts re-published by the stuck-execution sweep, by operation kind.",
    ["kind"],
)
PAUSE_POINTS = Counter(
    "signoff_proposals_pause_points_total",
    "Pause points stored (`pending`), resolved or expired, by pause-point kind.",
    ["kind", "status"],
)
SWEEP_SECONDS = Histogram(
    "signoff_proposals_sweep_seconds",
    "How long one round of a background sweep took, counting only rounds that changed something.",
    ["sweep"],
)
