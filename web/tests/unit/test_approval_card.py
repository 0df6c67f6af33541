"""A card whose policy needs two approvers: progress, who approved, and Approve only for those
whose approval would still count."""

from __future__ import annotations

from typing import Any

from signoff_contracts.operations import Membership
from signoff_runtime.registry import Operations
from signoff_web import cards
from signoff_web.context import templates
from signoff_web.sessions import Session

PROPOSER = "usr_morgan"


def _who(user: str, role: str = "manager") -> Session:
    return Session.start(Membership(user_id=user, organization_id="o", role=role), 60)


def _view(*approvers: str) -> dict[str, Any]:
    return {
        "id": "prp_1",
        "organization_id": "o",
        "requested_by": PROPOSER,
        "section": "orders",
        "resource_id": "ord_1",
        "operation_kind": "not.installed",
        "contract_version": 1,
        "preview": {},
        "status": "pending",
        "expires_at": "2030-01-01T00:00:00Z",
        "approvals": [
            {"user_id": u, "role": "manager", "at": "2026-11-30T00:00:00Z"} for u in approvers
        ],
        "requirement": {
            "required": 2,
            "roles": ["manager"],
            "proposer_may_approve": False,
            "policy_version": 1,
        },
    }


def _html(view: dict[str, Any], who: Session) -> str:
    card = cards.proposal(view, who, Operations([]), {"usr_sam": "Sam Roy"})
    return templates.env.get_template("card.html").render(
        card=card, who=who, locale="en", next="/inbox", show_chat_link=False
    )


def test_the_card_says_how_far_the_quorum_is_and_who_approved() -> None:
    html = _html(_view("usr_sam"), _who("usr_alex"))
    assert "Needs 2 approvals: 1 of 2" in html
    assert "Approved by: Sam Roy" in html


def test_approve_is_for_those_whose_approval_still_counts() -> None:
    view = _view("usr_sam")
    sam = cards.approvals(view, _who("usr_sam"), {})
    assert sam["mine"] and not sam["barred"]
    morgan = cards.approvals(view, _who(PROPOSER), {})
    assert morgan["barred"] == "proposer_may_not_approve"
    viewer = cards.approvals(view, _who("usr_v", "viewer"), {})
    assert viewer["barred"] == "role_not_counted"
    alex = cards.approvals(view, _who("usr_alex"), {})
    assert not (alex["mine"] or alex["barred"])
