"""The fault checker's own tests: it must fail a system that does nothing, however calmly.

A system that fails every proposal closed — nothing reaches the provider, every outcome agrees
with the books — shows no duplicate, nothing lost, no disagreement. The checker judges made-up
facts here (no servers): such a system is failed for want of progress, a working one passes, and
a negative control counts only with the violation it is meant to cause.
"""

from __future__ import annotations

from collections import Counter

from faults_checker import Facts, Report, judge
from faults_history import Case, History

TOTAL = 44_499
REFUND = 3_500


def _cases(count: int) -> list[Case]:
    return [
        Case({"id": f"org_{n}"}, "token", f"ord_{n}", f"ch_{n}", TOTAL, f"prp_{n}")
        for n in range(count)
    ]


def _history(cases: list[Case]) -> History:
    history = History()
    for case in cases:
        proposed = history.invoke("propose", case.order_id)
        proposed.result, proposed.value, proposed.proposal_id = "ok", "created", case.proposal_id
        approved = history.invoke("approve", case.order_id, case.proposal_id)
        approved.result, approved.value = "ok", "claimed"
    return history


def _facts(cases: list[Case], *, works: bool) -> Facts:
    """One proposal per case, claimed once, executed once, concluded once; refunded at the
    provider and in the club's books if the system works, failed closed with nothing done if
    it does not."""
    refunded = REFUND if works else 0
    pids = [str(case.proposal_id) for case in cases]
    return Facts(
        proposals=[
            {
                "id": case.proposal_id,
                "resource_id": case.order_id,
                "status": "succeeded" if works else "failed",
                "contract_id": f"ctr_{n}",
                "decided_at": None,
                "expires_at": None,
                "late": False,
            }
            for n, case in enumerate(cases)
        ],
        claims=Counter(pids),
        executions={
            pid: [{"contract_id": f"ctr_{n}", "status": "done", "outcome": {}}]
            for n, pid in enumerate(pids)
        },
        conclusions={pid: {f"msg_{pid}"} for pid in pids},
        refunds=Counter(case.order_id for case in cases if works),
        attempts={pid: "succeeded" if works else "failed" for pid in pids},
        effects=Counter(case.payment_ref for case in cases if works),
        reconciled=0,
        books={
            case.order_id: {
                "order_id": case.order_id,
                "total_cents": TOTAL - refunded,
                "refunded_cents": refunded,
                "reserved_cents": 0,
                "refunds_cents": refunded,
            }
            for case in cases
        },
    )


def _judge(works: bool, allowances: dict[str, int] | None = None) -> Report:
    cases = _cases(10)
    return judge(
        _facts(cases, works=works), "1-executor-kill", 9, cases, _history(cases), allowances
    )


def test_a_system_that_does_nothing_agrees_with_itself_and_fails_for_want_of_progress() -> None:
    report = _judge(works=False, allowances={"executor killed": 3})

    assert report.violations == 0  # every count the checker used to judge by is clean
    assert (report.succeeded, report.must_succeed) == (0, 7)
    assert not report.passed
    assert report.progress_shortfall == [
        "0 of 10 cases succeeded (10 proposed); the faults allow at most 3 to end otherwise "
        "(executor killed 3)"
    ]


def test_a_working_system_passes() -> None:
    report = _judge(works=True, allowances={"executor killed": 3})

    assert report.violations == 0 and report.succeeded == 10
    assert report.passed, report.progress_shortfall


def test_only_what_the_faults_allow_may_end_without_success() -> None:
    cases = _cases(10)
    facts = _facts(cases, works=True)
    for row in facts.proposals[:4]:  # four end failed where the faults allowed three
        row["status"] = "failed"
        facts.effects[cases[int(row["id"].split("_")[1])].payment_ref] = 0
        facts.refunds[row["resource_id"]] = 0
        facts.books[row["resource_id"]].update(total_cents=TOTAL, refunded_cents=0, refunds_cents=0)

    allowed = judge(facts, "5-database", 9, cases, _history(cases), {"database crashed": 4})
    too_many = judge(facts, "5-database", 9, cases, _history(cases), {"database crashed": 3})

    assert allowed.violations == too_many.violations == 0
    assert allowed.passed
    assert not too_many.passed and too_many.must_succeed == 7


def test_a_case_never_proposed_is_no_progress() -> None:
    cases = _cases(10)
    facts = _facts(cases[:7], works=True)  # three proposes never got through: orders untouched
    untouched = _facts(cases[7:], works=False).books
    facts.books.update(untouched)

    report = judge(facts, "4-broker", 9, cases, _history(cases[:7]))

    assert report.violations == 0 and report.proposals == 7
    assert not report.passed and report.must_succeed == 10


def test_declines_sent_are_allowed_to_win() -> None:
    cases = _cases(10)
    history = _history(cases)
    for case in cases:
        declined = history.invoke("decline", case.order_id, case.proposal_id)
        declined.result, declined.value = "ok", "conflict"

    report = judge(_facts(cases, works=False), "3-races", 9, cases, history)

    assert report.allowances == {"declines sent": 10} and report.must_succeed == 0


def test_a_scenario_built_for_reconciliation_fails_if_nothing_was_reconciled() -> None:
    report = _judge(works=True)
    report.must_reconcile = True

    assert not report.passed
    assert report.progress_shortfall == [
        "nothing was reconciled in a scenario built to need reconciliation"
    ]


def test_a_negative_control_is_caught_only_by_the_violation_it_is_meant_to_cause() -> None:
    report = _judge(works=True)
    report.switches, report.expected = "publish_without_outbox", "lost"
    report.disagreeing = 5  # a violation, but not the one this switch must cause

    assert report.violations > 0 and not report.caught
    report.lost = 1
    assert report.caught


def test_a_contract_that_never_reached_an_executor_is_lost_and_its_outbox_rows_shown() -> None:
    cases = _cases(3)
    facts = _facts(cases, works=True)
    stuck = facts.proposals[0]
    stuck["status"] = "executing"
    facts.executions.pop(stuck["id"])
    row = {"attempts": 7, "last_error": "Basic.Nack", "sent": False, "due_in_s": 41.5}
    facts.contracts[stuck["id"]] = [row]

    report = judge(facts, "10-cluster-leaders", 9, cases, _history(cases), {})

    assert report.lost == 1 and not report.passed
    assert any(
        "its contract never reached an executor" in note and "'attempts': 7" in note
        for note in report.details
    ), report.details
