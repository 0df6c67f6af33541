from datetime import UTC, datetime

from signoff_contracts.operations import AttemptRef
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import ExecutionContract
from signoff_executor import domain
from signoff_executor.repository import Execution

ATTEMPT = AttemptRef(attempt_id="att_1", idempotency_key="k-1")


def _contract() -> ExecutionContract:
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    return ExecutionContract(
        contract_id="ctr_1",
        proposal_id="prp_1",
        organization_id="org_1",
        section="s",
        resource_id="r1",
        operation_kind="a.b",
        contract_version=1,
        arguments={},
        approved_by="usr_1",
        approved_at=at,
        execute_by=at,
    )


def _row(status: str, attempt: AttemptRef | None = None) -> Execution:
    return Execution(
        contract_id="ctr_1",
        proposal_id="prp_1",
        status=status,  # type: ignore[arg-type]
        attempt=attempt,
        outcome=None,
        outcome_message_id=None,
        reconciliation_message_id=None,
    )


def test_a_late_contract_asks_for_revision_as_approval_stale() -> None:
    outcome = domain.stale(_contract())
    assert outcome.reason.code == "approval_stale"
    assert outcome.reason.params == {"execute_by": "2030-01-02T03:04:05+00:00"}


def test_needs_reconciliation_points_at_the_proposal() -> None:
    assert domain.needs_reconciliation("prp_9").status_path == "/v1/proposals/prp_9/reconciliation"


def test_scope_and_context_come_from_the_signed_contract_only() -> None:
    contract = _contract()
    assert domain.scope_of(contract).model_dump() == {
        "organization_id": "org_1",
        "section": "s",
        "resource_id": "r1",
    }
    ctx = domain.context_of(contract)
    assert (ctx.proposal_id, ctx.contract_id, ctx.approved_by) == ("prp_1", "ctr_1", "usr_1")


def test_each_step_knows_what_its_commit_left_behind() -> None:
    concluded = domain.Concluded(Succeeded(result={}))
    attempting = domain.Attempting(ATTEMPT, arguments=None)
    assert concluded.landed(_row("done")) and not concluded.landed(_row("attempting", ATTEMPT))
    assert not concluded.landed(None)
    assert attempting.landed(_row("attempting", ATTEMPT))
    other = AttemptRef(attempt_id="att_2", idempotency_key="k-1")
    assert not attempting.landed(_row("attempting", other))
    assert not attempting.landed(None) and not attempting.landed(_row("done", ATTEMPT))
    assert domain.Duplicate("done").landed(None)
