"""The pure decisions: DESIGN's approval reply table, outcome moves, events, paging."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_contracts.outcomes import (
    NeedsReconciliation,
    RevisionRequired,
    Succeeded,
    TerminalFailure,
)
from signoff_contracts.reasons import Reason
from signoff_contracts.status import TRANSITIONS, IllegalTransition, ProposalStatus
from signoff_proposals.lifecycle import domain
from signoff_proposals.settings import ProposalsSettings

S = ProposalStatus

# DESIGN.md "Proposal states and approval replies", row by row.
TABLE = [
    (S.EXECUTING, "not_approvable", "in_progress", 409, False),
    (S.NEEDS_RECONCILIATION, "not_approvable", "in_progress", 409, False),
    (S.SUCCEEDED, "already_completed", None, 200, True),
    (S.REVISION_REQUIRED, "already_completed", None, 200, True),
    (S.FAILED, "already_completed", None, 200, True),
    (S.DECLINED, "not_approvable", "declined", 409, False),
    (S.WITHDRAWN, "not_approvable", "withdrawn", 409, False),
    (S.EXPIRED, "not_approvable", "expired", 409, False),
    (S.SUPERSEDED, "not_approvable", "superseded", 409, False),
]


@pytest.mark.parametrize(("status", "result", "reason", "http", "with_outcome"), TABLE)
def test_answer_for_each_non_pending_status(status, result, reason, http, with_outcome):
    answer = domain.answer_for(status)
    assert answer is not None
    assert (answer.result, answer.reason, answer.status_code, answer.with_outcome) == (
        result,
        reason,
        http,
        with_outcome,
    )


def test_the_table_covers_every_status():
    assert {row[0] for row in TABLE} | {S.PENDING} == set(S)


def test_pending_goes_on_to_the_claim():
    assert domain.answer_for(S.PENDING) is None


@pytest.mark.parametrize(
    ("answer", "http"),
    [
        (domain.CLAIMED, 200),
        (domain.DECLINED, 200),
        (domain.WITHDRAWN, 200),
        (domain.FORBIDDEN, 403),
        (domain.NOT_FOUND, 404),
        (domain.UNAUTHENTICATED, 401),
        (domain.INVALID_MESSAGE, 422),
    ],
)
def test_refusals_and_successes_have_their_http_status(answer, http):
    assert answer.status_code == http


def test_a_lost_claim_on_a_lapsed_pending_row_is_expired():
    answer = domain.answer_after_lost_claim(S.PENDING, lapsed=True)
    assert (answer.result, answer.reason, answer.status_code) == ("not_approvable", "expired", 409)


def test_a_lost_claim_answers_from_the_row_as_it_is_now():
    assert domain.answer_after_lost_claim(S.EXECUTING, lapsed=False).reason == "in_progress"
    assert domain.answer_after_lost_claim(S.SUCCEEDED, lapsed=True).result == "already_completed"
    assert domain.answer_after_lost_claim(S.DECLINED, lapsed=True).reason == "declined"
    assert domain.answer_after_lost_claim(S.PENDING, lapsed=False).reason == "in_progress"


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (Succeeded(result={}), S.SUCCEEDED),
        (NeedsReconciliation(status_path="/x"), S.NEEDS_RECONCILIATION),
        (RevisionRequired(reason=Reason(code="amount_changed")), S.REVISION_REQUIRED),
        (TerminalFailure(correlation_id="cor_1"), S.FAILED),
    ],
)
def test_outcome_types_map_to_statuses(outcome, status):
    assert domain.status_for_outcome(outcome) is status


def test_outcome_sources_follow_the_transition_table():
    assert domain.outcome_sources(S.NEEDS_RECONCILIATION) == {S.EXECUTING}
    for target in (S.SUCCEEDED, S.REVISION_REQUIRED, S.FAILED):
        assert domain.outcome_sources(target) == {S.EXECUTING, S.NEEDS_RECONCILIATION}
    for target in (S.PENDING, S.DECLINED, S.EXPIRED, S.SUPERSEDED, S.EXECUTING):
        assert domain.outcome_sources(target) == frozenset()
    for target in S:
        assert all(target in TRANSITIONS[source] for source in domain.outcome_sources(target))


def test_routing_keys():
    assert domain.routing_key("outcome") == "proposal.outcome"


# The lifecycle table, move by move: what each writes besides the status.
MOVES = {
    (S.PENDING, S.EXECUTING): ("claimed", "executing", "unexpired"),
    (S.PENDING, S.DECLINED): ("declined", "decided", "unexpired"),
    (S.PENDING, S.WITHDRAWN): ("withdrawn", "decided", "unexpired"),
    (S.PENDING, S.SUPERSEDED): ("superseded", "superseded", "unexpired"),
    (S.PENDING, S.FAILED): ("failed", "outcome", "unexpired"),
    (S.PENDING, S.EXPIRED): ("expired", "expired", "lapsed"),
    **{
        (source, target): ("outcome", "outcome", None)
        for source in (S.EXECUTING, S.NEEDS_RECONCILIATION)
        for target in (S.SUCCEEDED, S.REVISION_REQUIRED, S.FAILED)
    },
    (S.EXECUTING, S.NEEDS_RECONCILIATION): ("outcome", "outcome", None),
}


@pytest.mark.parametrize(("source", "target"), [(a, b) for a in S for b in S], ids=str)
def test_each_move_of_the_table_and_nothing_else(source, target):
    if (source, target) not in MOVES:
        with pytest.raises(IllegalTransition):
            domain.step(source, target)
        return
    move = domain.step(source, target)
    assert (move.action, move.event, move.clock) == MOVES[(source, target)]
    assert move.sends_contract is (target is S.EXECUTING)
    assert target in TRANSITIONS[source]


def test_the_moves_are_the_table():
    assert set(MOVES) == {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert (domain.CREATION.action, domain.CREATION.event) == ("created", "created")


def test_cursor_round_trip_and_rejects_garbage():
    assert domain.decode_cursor(domain.encode_cursor("prp_01abc")) == "prp_01abc"
    for bad in ("!!!", domain.encode_cursor("usr_1"), "", domain.encode_cursor("prp_" + "x" * 60)):
        with pytest.raises(domain.InvalidCursor):
            domain.decode_cursor(bad)


def test_page_size_is_capped():
    assert domain.page_size(None) == 50
    assert domain.page_size(1000) == 100
    assert domain.page_size(0) == 1


def test_the_test_plugin_is_refused_outside_tests():
    with pytest.raises(ValidationError):
        ProposalsSettings(env="dev", proposals={"test_plugin": "x:y"})
    assert ProposalsSettings(env="test", proposals={"test_plugin": "x:y"}).proposals.test_plugin
