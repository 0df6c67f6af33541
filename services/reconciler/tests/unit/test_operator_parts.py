"""The pure parts behind the operator commands: reasons of dead letters, header values as JSON,
check results, and the CLI refusing a manual resolution without a verdict or a note."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from signoff_contracts.outcomes import RevisionRequired, Succeeded, TerminalFailure
from signoff_contracts.reasons import Reason
from signoff_reconciler.cli import reconcile_app
from signoff_reconciler.dead_letters.handlers import jsonable, reason_of
from signoff_reconciler.reports import result_of
from signoff_reconciler.settings import ReconcilerGroup, ReconcilerSettings
from typer.testing import CliRunner


def test_the_consumers_reason_wins_over_the_brokers() -> None:
    mine = {
        "x-signoff-reason": "invalid_message",
        "x-signoff-detail": "a: missing",
        "x-signoff-deliveries": 1,
        "x-first-death-reason": "rejected",
    }
    assert reason_of(mine, delivery_limit=5) == ("invalid_message", "a: missing", 1)


def test_a_letter_the_broker_dead_lettered_at_the_limit_was_delivered_limit_plus_one_times() -> (
    None
):
    reason, detail, deliveries = reason_of({"x-first-death-reason": "delivery_limit"}, 3)
    assert (reason, deliveries) == ("delivery_limit", 4) and detail
    assert reason_of({}, 3)[0] == "unknown"


def test_header_values_become_json() -> None:
    at = datetime(2026, 1, 2, tzinfo=UTC)
    headers = {"x-death": [{"time": at, "count": 1, "keys": (b"rk",)}], "n": Decimal("1.5")}
    assert jsonable(headers) == {
        "x-death": [{"time": at.isoformat(), "count": 1, "keys": ["rk"]}],
        "n": "1.5",
    }


def test_check_results_name_what_the_provider_said() -> None:
    assert result_of(Succeeded(result={})) == "applied"
    assert result_of(RevisionRequired(reason=Reason(code="refund_not_applied"))) == "not_applied"
    assert result_of(TerminalFailure(correlation_id="cor_1")) == "error"


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["prp_1", "--resolve", "maybe", "--note", "x"], "succeeded or failed"),
        (["prp_1", "--resolve", "succeeded"], "needs a note"),
        (["prp_1", "--resolve", "failed", "--note", "  "], "needs a note"),
    ],
)
def test_a_manual_resolution_needs_a_verdict_and_a_note(args: list[str], complaint: str) -> None:
    result = CliRunner().invoke(reconcile_app, args)
    assert result.exit_code == 2 and complaint in result.output


def test_escalation_and_scan_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_RECONCILER__ESCALATE_AFTER_S", "600")
    monkeypatch.setenv("SIGNOFF_RECONCILER__ESCALATED_CHECK_EVERY_S", "900")
    monkeypatch.setenv("SIGNOFF_RECONCILER__SCAN_INTERVAL_S", "5")
    group = ReconcilerSettings().reconciler
    assert (
        group.escalate_after_s,
        group.escalated_check_every_s,
        group.scan_interval_s,
        group.archive_dead_letters,
    ) == (600.0, 900.0, 5.0, True)


def test_the_old_give_up_setting_still_sets_the_escalation_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIGNOFF_RECONCILER__GIVE_UP_AFTER_S", "1200")
    assert ReconcilerSettings().reconciler.escalate_after_s == 1200.0
    assert ReconcilerGroup(escalate_after_s=60).escalate_after_s == 60.0
