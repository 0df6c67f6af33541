"""Nothing lost, nothing done twice, and the work done — under faults, with every protection on;
and each protection shown to matter by a negative control that switches it off and must be
caught by the checker with the violation it exists to prevent.

The short run (part of ``make test``) runs every kind of fault once at small sizes — executors
killed, the provider's dice, races, the broker killed, the database crashed, duplicates, relays
killed — and one negative control; ``make faults`` (``SIGNOFF_FAULTS=long``) runs all nine
scenarios and all five controls with hundreds of proposals each. docs/reliability.md says what
each scenario proves.
"""

from __future__ import annotations

import os

import pytest
from faults_run import CONTROLS, LONG, PROPOSALS, describe, run_scenario
from faults_scenarios import SCENARIOS
from faults_stack import FaultStack

pytestmark = [pytest.mark.faults, pytest.mark.e2e, pytest.mark.timeout(1800 if LONG else 300)]

#: the short run's scenarios and their sizes (proposals; ``SIGNOFF_FAULTS_PROPOSALS``, if set,
#: applies to all): the broker, database and relay cases are the smallest that still strike
#: mid-flow, so each costs well under a minute
SHORT = {
    "1-executor-kill": 14,
    "2-provider": 14,
    "3-races": 14,
    "4-broker": 6,
    "5-database": 6,
    "6-duplicates": 14,
    "7-relay": 6,
    "3-races-quorum": 8,
}
SHORT_CONTROLS = ("SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS",)


@pytest.mark.parametrize("name", list(SCENARIOS) if LONG else list(SHORT))
async def test_nothing_is_lost_or_done_twice_and_the_work_is_done(
    fault_stack: FaultStack, name: str
) -> None:
    size = PROPOSALS if LONG or "SIGNOFF_FAULTS_PROPOSALS" in os.environ else SHORT[name]

    report = await run_scenario(fault_stack, name, proposals=size)

    assert report.proposals > 0 and report.faults > 0, describe(report)
    assert report.violations == 0, f"{describe(report)}\nservice logs: {fault_stack.log_dir}"
    assert not report.progress_shortfall, f"{describe(report)}\nservice logs: {fault_stack.log_dir}"


@pytest.mark.parametrize("switch", list(CONTROLS) if LONG else SHORT_CONTROLS)
async def test_each_protection_switched_off_is_caught_by_its_own_violation(
    fault_stack: FaultStack, switch: str
) -> None:
    scenario, expected = CONTROLS[switch]

    report = await run_scenario(fault_stack, scenario, {switch: "true"})

    assert report.caught, (
        f"with {switch} the checker did not report {expected} (other violations do not "
        f"count):\n{describe(report)}"
    )
