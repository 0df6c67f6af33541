"""Which proposals a revision may replace: only a pending one; every other status is a 409."""

from __future__ import annotations

import pytest
from signoff_contracts.status import ProposalStatus
from signoff_proposals.decisions.revisions import answer_for_revision

S = ProposalStatus


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (S.EXECUTING, "in_progress"),
        (S.NEEDS_RECONCILIATION, "in_progress"),
        (S.DECLINED, "declined"),
        (S.EXPIRED, "expired"),
        (S.SUPERSEDED, "superseded"),
        (S.SUCCEEDED, "succeeded"),
        (S.REVISION_REQUIRED, "revision_required"),
        (S.FAILED, "failed"),
    ],
)
def test_a_proposal_that_is_not_pending_cannot_be_revised(status, reason):
    answer = answer_for_revision(status)
    assert answer is not None
    assert (answer.result, answer.reason, answer.status_code) == ("not_approvable", reason, 409)


def test_a_pending_proposal_may_be_revised():
    assert answer_for_revision(S.PENDING) is None
