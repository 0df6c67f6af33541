"""The event stream's fan-out: a change reaches its own organization's readers only."""

from __future__ import annotations

import json

import pytest
from signoff_proposals.api.events import RESYNC, ChangeHub


def _change(org: str, ref: str) -> str:
    return json.dumps({"org": org, "type": "proposal", "id": ref, "status": "pending"})


@pytest.mark.parametrize("every_organization", [False, True])
def test_a_change_reaches_only_its_organization_unless_the_negative_control_is_on(
    every_organization: bool,
) -> None:
    hub = ChangeHub("postgresql://unused", every_organization=every_organization)
    mine, theirs = hub.subscribe("org_a"), hub.subscribe("org_b")
    hub.deliver(_change("org_a", "prp_1"))
    assert mine.get_nowait()["id"] == "prp_1"
    assert theirs.empty() is not every_organization  # the switch is what a test would catch


def test_a_reader_too_far_behind_gets_one_resync_and_unreadable_payloads_are_dropped() -> None:
    hub = ChangeHub("postgresql://unused")
    slow = hub.subscribe("org_a")
    for i in range(150):
        hub.deliver(_change("org_a", f"prp_{i}"))
    hub.deliver("not json")
    drained = [slow.get_nowait() for _ in range(slow.qsize())]
    assert RESYNC in drained and len(drained) < 100
    hub.unsubscribe("org_a", slow)
    hub.deliver(_change("org_a", "prp_x"))  # nobody left to hand it to
