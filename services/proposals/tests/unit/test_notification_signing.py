"""The webhook signature a receiver checks, and the Slack message's shape (no I/O)."""

from __future__ import annotations

from signoff_proposals.notifications import payloads, signing

BODY = b'{"type":"proposal.created"}'
SECRET = "whsec_test"


def test_a_signature_verifies_for_its_body_secret_and_time_only() -> None:
    header = signing.signature(SECRET, 1_700_000_000, BODY)
    assert header.startswith("t=1700000000,v1=")
    assert signing.verify(SECRET, header, BODY, now=1_700_000_000 + 299)
    assert not signing.verify(SECRET, header, BODY, now=1_700_000_000 + 301)  # a replay
    assert not signing.verify(SECRET, header, BODY + b" ", now=1_700_000_000)
    assert not signing.verify("whsec_other", header, BODY, now=1_700_000_000)
    assert not signing.verify(SECRET, header.replace("t=1700000000", "t=1700000001"), BODY, 1.7e9)
    assert not signing.verify(SECRET, "v1=abc", BODY, now=1_700_000_000)


def test_a_receiver_accepts_any_listed_v1_during_a_secret_rotation() -> None:
    new = signing.signature(SECRET, 1_700_000_000, BODY)
    old = signing.signature("whsec_old", 1_700_000_000, BODY).partition(",")[2]
    assert signing.verify(SECRET, f"{new},{old}", BODY, now=1_700_000_000)
    assert signing.verify("whsec_old", f"{new},{old}", BODY, now=1_700_000_000)


def test_secrets_are_fresh_and_long() -> None:
    one, two = signing.new_secret(), signing.new_secret()
    assert one != two and len(one) > 40


def test_slack_blocks_hold_the_title_the_lines_and_the_card_link() -> None:
    summary = payloads.Summary(
        proposal_id="prp_1",
        organization_id="org_1",
        event="created",
        status="pending",
        title="Refund $5.00",
        lines=[("order", "ord_1"), ("to", "card")],
        url=payloads.card_url("https://signoff.example/", "prp_1"),
        expires_at="2026-12-01T00:00:00+00:00",
        occurred_at="2026-11-30T00:00:00+00:00",
        message_id="msg_1",
        outcome=None,
    )
    body = payloads.slack_body(summary)
    assert body["text"] == "Waiting for approval: Refund $5.00"
    assert body["blocks"][1]["fields"][0] == {"type": "mrkdwn", "text": "*order*\nord_1"}
    assert body["blocks"][-1]["elements"][0]["url"] == "https://signoff.example/proposals/prp_1"
    assert payloads.Summary.from_json(summary.as_json()) == summary


def test_only_people_whose_approval_counts_are_asked() -> None:
    from datetime import UTC, datetime

    from signoff_contracts.roster import Contact
    from signoff_contracts.v1 import ApprovalRequirement, ProposalView
    from signoff_proposals.notifications.enqueue import counts

    now = datetime.now(UTC)
    view = ProposalView(
        id="prp_1",
        organization_id="org_1",
        requested_by="usr_p",
        section="billing",
        resource_id="acc_x",
        operation_kind="account.grant_credit",
        contract_version=1,
        preview={},
        status="pending",
        created_at=now,
        expires_at=now,
    )

    def person(user: str, role: str) -> Contact:
        return Contact(user_id=user, organization_id="org_1", role=role, email=f"{user}@x.test")

    assert counts(person("usr_p", "admin"), view)  # no policy: whoever the operation allows
    strict = view.model_copy(
        update={
            "requirement": ApprovalRequirement(
                required=2, roles=["manager"], proposer_may_approve=False
            )
        }
    )
    assert not counts(person("usr_p", "manager"), strict)
    assert not counts(person("usr_a", "admin"), strict)
    assert counts(person("usr_m", "manager"), strict)
