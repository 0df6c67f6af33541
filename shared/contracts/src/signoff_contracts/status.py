"""Proposal and pause-point statuses, and the legal transitions between them.

The table is the lifecycle: every transition the proposals service makes is checked against it
(its one ``transition`` derives each move's audit action and event from it), and an illegal one
raises ``IllegalTransition``, writing nothing, instead of quietly writing a state no reader
expects. Terminal states have no way out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ProposalStatus(StrEnum):
    PENDING = "pending"
    DECLINED = "declined"
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    EXECUTING = "executing"
    NEEDS_RECONCILIATION = "needs_reconciliation"
    SUCCEEDED = "succeeded"
    REVISION_REQUIRED = "revision_required"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return not TRANSITIONS[self]


TRANSITIONS: Final[dict[ProposalStatus, frozenset[ProposalStatus]]] = {
    ProposalStatus.PENDING: frozenset(
        {
            ProposalStatus.DECLINED,
            ProposalStatus.WITHDRAWN,
            ProposalStatus.EXPIRED,
            ProposalStatus.SUPERSEDED,
            ProposalStatus.EXECUTING,
            ProposalStatus.FAILED,
        }
    ),
    ProposalStatus.EXECUTING: frozenset(
        {
            ProposalStatus.SUCCEEDED,
            ProposalStatus.REVISION_REQUIRED,
            ProposalStatus.NEEDS_RECONCILIATION,
            ProposalStatus.FAILED,
        }
    ),
    ProposalStatus.NEEDS_RECONCILIATION: frozenset(
        {ProposalStatus.SUCCEEDED, ProposalStatus.REVISION_REQUIRED, ProposalStatus.FAILED}
    ),
    ProposalStatus.DECLINED: frozenset(),
    ProposalStatus.WITHDRAWN: frozenset(),
    ProposalStatus.EXPIRED: frozenset(),
    ProposalStatus.SUPERSEDED: frozenset(),
    ProposalStatus.SUCCEEDED: frozenset(),
    ProposalStatus.REVISION_REQUIRED: frozenset(),
    ProposalStatus.FAILED: frozenset(),
}

#: statuses whose outcome is stored: approving again returns it (``already_completed``)
COMPLETED: Final = frozenset(
    {ProposalStatus.SUCCEEDED, ProposalStatus.REVISION_REQUIRED, ProposalStatus.FAILED}
)
#: statuses in which execution is under way: approving again answers ``in_progress``
IN_PROGRESS: Final = frozenset({ProposalStatus.EXECUTING, ProposalStatus.NEEDS_RECONCILIATION})


class IllegalTransition(Exception):
    """A transition the lifecycle table does not allow."""

    def __init__(self, current: ProposalStatus, target: ProposalStatus) -> None:
        super().__init__(f"{current} -> {target} is not a legal proposal transition")
        self.current = current
        self.target = target


def check_transition(current: ProposalStatus, target: ProposalStatus) -> None:
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(current, target)


class PausePointStatus(StrEnum):
    PENDING = "pending"
    RESOLVED = "resolved"
    EXPIRED = "expired"
