"""Nothing lost, nothing done twice — under faults, with every protection on; and each protection
shown to matter by a negative control that switches it off and must be caught by the checker.

The short run (part of ``make test``) runs a few scenarios and one negative control; ``make
faults`` (``SIGNOFF_FAULTS=long``) runs all nine scenarios and all five controls with hundreds of
proposals each. docs/reliability.md says what each scenario proves.
"""

from __future__ import annotations

import pytest
from faults_run import LONG, describe, run_scenario
from faults_scenarios import SCENARIOS
from faults_stack import FaultStack

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.timeout(1800 if LONG else 300)]

SHORT = ("1-executor-kill", "2-provider", "3-races", "6-duplicates")
#: each protection, switched off, and the scenario that must then report violations
CONTROLS = {
    "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS": "3-races",
    "SIGNOFF_UNSAFE__SKIP_QUORUM": "3-races-quorum",
    "SIGNOFF_UNSAFE__NO_DEDUP": "6-duplicates",
    "SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY": "2-provider",
    "SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX": "7-relay",
    "SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM": "7-relay",
}
SHORT_CONTROLS = ("SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS",)


@pytest.mark.parametrize("name", list(SCENARIOS) if LONG else SHORT)
async def test_nothing_is_lost_or_done_twice(fault_stack: FaultStack, name: str) -> None:
    report = await run_scenario(fault_stack, name)

    assert report.proposals > 0 and report.faults > 0, describe(report)
    assert report.violations == 0, f"{describe(report)}\nservice logs: {fault_stack.log_dir}"


@pytest.mark.parametrize("switch", list(CONTROLS) if LONG else SHORT_CONTROLS)
async def test_each_protection_switched_off_is_caught(fault_stack: FaultStack, switch: str) -> None:
    report = await run_scenario(fault_stack, CONTROLS[switch], {switch: "true"})

    assert report.violations > 0, (
        f"with {switch} the checker saw nothing wrong:\n{describe(report)}"
    )
