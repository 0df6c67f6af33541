"""What each proposal event writes into its conversation (decided purely, then stored)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from signoff_agent import texts
from signoff_agent.handback import Notice, plan, resolution_text
from signoff_contracts.outcomes import (
    NeedsReconciliation,
    RevisionRequired,
    Succeeded,
    TerminalFailure,
)
from signoff_contracts.reasons import Reason
from signoff_contracts.v1 import PausePointView, ProposalEvent, ProposalView

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KIND = {"kind": "order.refund_missing_discount"}


def _event(event: str, **view: Any) -> ProposalEvent:
    fields: dict[str, Any] = {
        "id": "prp_1",
        "organization_id": "org_1",
        "requested_by": "usr_1",
        "conversation_id": "cnv_1",
        "section": "orders",
        "resource_id": "ord_1",
        "operation_kind": KIND["kind"],
        "contract_version": 1,
        "preview": {},
        "status": "pending",
        "created_at": NOW,
        "expires_at": NOW + timedelta(days=1),
    }
    return ProposalEvent(event=event, proposal=ProposalView(**{**fields, **view}))


def test_created_writes_the_card() -> None:
    assert plan(_event("created")) == [Notice("card", "proposal_ready", KIND)]


@pytest.mark.parametrize(
    ("outcome", "notice"),
    [
        (
            Succeeded(result={"refund_id": "rfd_1"}),
            Notice(
                "outcome:succeeded",
                "proposal_succeeded",
                {**KIND, "version": 1, "result": {"refund_id": "rfd_1"}},
                note="succeeded",
            ),
        ),
        (
            NeedsReconciliation(status_path="/v1/proposals/prp_1/reconciliation"),
            Notice(
                "outcome:needs_reconciliation",
                "proposal_needs_reconciliation",
                {**KIND, "status_path": "/v1/proposals/prp_1/reconciliation"},
            ),
        ),
        (
            RevisionRequired(reason=Reason(code="amount_changed", params={"current_cents": 1})),
            Notice(
                "outcome:revision_required",
                "proposal_revision_required",
                {**KIND, "reason": {"code": "amount_changed", "params": {"current_cents": 1}}},
                note="revision",
            ),
        ),
        (
            TerminalFailure(correlation_id="cor_1"),
            Notice("outcome:failed", "proposal_failed", {**KIND, "correlation_id": "cor_1"}),
        ),
    ],
)
def test_each_outcome_has_its_message(outcome: Any, notice: Notice) -> None:
    status = "succeeded" if isinstance(outcome, Succeeded) else "failed"
    assert plan(_event("outcome", status=status, outcome=outcome)) == [notice]


def test_an_outsized_result_is_not_copied_into_the_conversation() -> None:
    outcome = Succeeded(result={"blob": "x" * 5000})
    [notice] = plan(_event("outcome", status="succeeded", outcome=outcome))
    assert notice.params == {**KIND, "version": 1} and notice.note == "succeeded"


def test_a_decline_leaves_its_bounded_reason_as_a_note() -> None:
    [notice] = plan(_event("decided", status="declined", decline_reason="x" * 900))
    assert notice.kind == "declined" and notice.note == "declined"
    assert notice.params["decline_reason"] == "x" * 500


def test_a_withdrawal_is_answered_like_a_decline() -> None:
    [notice] = plan(_event("decided", status="withdrawn", decline_reason="wrong order"))
    assert notice == Notice(
        "withdrawn", "proposal_withdrawn", {**KIND, "decline_reason": "wrong order"}, "withdrawn"
    )
    [bare] = plan(_event("decided", status="withdrawn"))
    assert bare.params["decline_reason"] is None and bare.note == "withdrawn"


def test_events_with_nothing_to_say_write_nothing() -> None:
    assert plan(_event("decided", status="executing")) == []
    assert plan(_event("executing", status="executing")) == []
    assert plan(_event("superseded", status="superseded", superseded_by="prp_2")) == []


def test_a_resolution_reads_as_the_persons_answer() -> None:
    view = PausePointView(
        id="pp_1",
        organization_id="org_1",
        conversation_id="cnv_1",
        title="Which season?",
        description="",
        kind="data_entry",
        status="resolved",
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
        resolution={"action": "data", "data": {"season": "fall"}, "reply": "thanks"},
    )
    text = resolution_text(view)
    assert text.startswith("[Answer to “Which season?”]")
    assert '"season": "fall"' in text and text.endswith("\nthanks")
    assert "edited" not in text


def test_an_edited_payload_appears_in_the_synthetic_message() -> None:
    view = PausePointView(
        id="pp_1",
        organization_id="org_1",
        title="Send the newsletter?",
        description="",
        kind="approval",
        status="resolved",
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
        payload={"subject": "Spring"},
        resolution={"action": "approve", "payload": {"subject": "Spring (final)"}},
    )
    assert resolution_text(view) == (
        "[Answer to “Send the newsletter?”] Approved. "
        'With the payload edited to: {"subject": "Spring (final)"}'
    )


@pytest.mark.parametrize(
    ("locale", "waiting"),
    [("en", "Waiting for confirmation"), ("fr", "En attente de confirmation")],
)
def test_an_uncertain_outcome_is_waiting_for_confirmation_never_failed(
    locale: str, waiting: str
) -> None:
    """However long the check takes (escalated or not), the hand-back never says it failed."""
    [notice] = plan(
        _event(
            "outcome",
            status="needs_reconciliation",
            outcome=NeedsReconciliation(status_path="/v1/proposals/prp_1/reconciliation"),
        )
    )
    said = texts.render(notice.code, notice.params, locale)  # type: ignore[arg-type]
    assert said.startswith(waiting) and "/v1/proposals/prp_1/reconciliation" in said
    for failed in ("fail", "échou", "will not be retried", "ne sera pas relancée"):
        assert failed not in said.lower()
