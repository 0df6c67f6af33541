"""The proposals service's own metrics. Labels are kinds, statuses and results — never an id."""

from __future__ import annotations

from prometheus_client import Counter, Histogram
from signoff_contracts.status import ProposalStatus
from signoff_runtime.unit_of_work import UnitOfWork

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


def count_transition(uow: UnitOfWork, kind: str, status: ProposalStatus) -> None:
    """Count a status change once ``uow`` has committed (a rolled-back one counts nothing)."""
    uow.after_commit(TRANSITIONS.labels(kind=kind, status=status.value).inc)
