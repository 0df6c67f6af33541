"""The broker says who sent it: each role's broker user, as deployed, tries to forge messages.

Every process of the stack runs as its own role's user with the production permissions. A
forgery is either refused by RabbitMQ (the user may not write to that exchange, ``amq.default``
included) or reaches the queue and is dead-lettered ``unexpected_sender`` by its consumer — and
changes nothing: no status moves, no fake operator in the audit. A message without ``user_id``
is refused the same way; the allowed senders still work (the whole lifecycle runs through them),
and an operator's replay is accepted because it vouches for an allowed original sender. The
negative control ``SIGNOFF_UNSAFE__ANY_SENDER`` shows the forged outcome succeeding without the
check.
"""

from __future__ import annotations

import json
from typing import Any

import e2e_broker_users
import pytest
from aio_pika.exceptions import ChannelClosed
from assistants_kit import Person
from e2e_stack import Stack
from insider_kit import REFUND, command, propose_refund, publish, refused_as, restart
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import (
    ApproveProposal,
    OutcomeReported,
    ReconciliationChecked,
    ReconciliationRequired,
)
from signoff_runtime.senders import SENDER_HEADER
from signoff_runtime.testing import wait_until
from signoff_runtime.topology import QUEUES, ROLES, ROUTING_KEYS, Role

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


#: who may write to which exchange, as a person would state it (not derived from the code
#: under test): ``amq.default`` only for the service that answers requests
WRITERS: dict[str, set[Role]] = {
    "amq.default": {"proposals"},
    "commands": set[Role]({"agent", "web", "cli"})
    | ({"proposals"} if "agent.resolve" in ROUTING_KEYS else set()),
    "contracts": {"proposals"},
    "outcomes": {"executor", "reconciler"},
    "events": {"proposals"},
    "conversation-events": {"proposals"},
    "dlx": {"agent", "proposals", "executor", "reconciler"},
    "replay": {"cli"},
}
if "agent.resolve" in ROUTING_KEYS:  # the agent answers revision requests while they exist
    WRITERS["amq.default"].add("agent")


async def executing(stack: Stack) -> tuple[str, str, str]:
    """A proposal approved while no executor runs: it stays ``executing``. (token, id, contract)"""
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    proposal_id = await propose_refund(stack, org, token)
    assert (await stack.approve(token, proposal_id)).json()["result"] == "claimed"
    contract_id = await stack.scalar(
        "SELECT contract_id FROM proposals.proposals WHERE id = :p", p=proposal_id
    )
    return token, proposal_id, str(contract_id)


def forged_outcome(proposal_id: str, contract_id: str) -> OutcomeReported:
    return OutcomeReported(
        proposal_id=proposal_id,
        contract_id=contract_id,
        operation_kind=REFUND,
        outcome=Succeeded(result={"forged": True}),
        reported_by="operator",
        operator="mallory",
        note="forged",
        correlation_id=proposal_id,
        source="insider",
    )


async def test_each_users_writes_reach_only_the_exchanges_of_its_role(
    separated_stack: Stack,
) -> None:
    for exchange, writers in WRITERS.items():
        for role in ROLES:
            attempt = publish(separated_stack, role, exchange, "nowhere", b"{}")
            if role in writers:
                await attempt
            else:
                with pytest.raises(ChannelClosed, match="ACCESS_REFUSED"):
                    await attempt


async def test_a_user_id_naming_another_user_is_refused_by_rabbitmq(separated_stack: Stack) -> None:
    with pytest.raises(ChannelClosed, match="PRECONDITION_FAILED"):
        await publish(
            separated_stack,
            "executor",
            "outcomes",
            "nowhere",
            b"{}",
            user_id=e2e_broker_users.user("reconciler"),
        )


async def test_a_forged_outcome_changes_nothing_by_any_route_a_user_can_reach(
    separated_stack: Stack,
) -> None:
    stack = separated_stack
    stack.processes["executor"].stop()
    try:
        token, proposal_id, contract_id = await executing(stack)
        attempts: list[tuple[Role, str, str, dict[str, Any]]] = [
            # the consumer itself through the default exchange (the only one that may use it)
            ("proposals", "amq.default", stack.topology.name("proposals.outcomes"), {}),
            # an operator's user replaying, vouching for nobody or for a disallowed sender
            ("cli", "replay", stack.topology.name("proposals.outcomes"), {}),
            ("cli", "replay", stack.topology.name("proposals.outcomes"), {"agent": True}),
            # an allowed sender that does not say who it is
            ("executor", "outcomes", ROUTING_KEYS["proposals.outcomes"], {"no_user": True}),
        ]
        for role, exchange, key, how in attempts:
            forged = forged_outcome(proposal_id, contract_id)
            headers = {SENDER_HEADER: e2e_broker_users.user("agent")} if how.get("agent") else {}
            await publish(
                stack,
                role,
                exchange,
                key,
                forged.model_dump_json().encode(),
                user_id=None if how.get("no_user") else "own",
                message_id=forged.message_id,
                headers=headers,
            )
            letter = await refused_as(stack, "proposals.outcomes", forged.message_id)
            assert letter["reason"] == "unexpected_sender", (role, exchange, letter)
        view = await stack.proposal(token, proposal_id)
        assert view["status"] == "executing"
        assert not [e for e in view["audit"] if "mallory" in json.dumps(e)]
    finally:
        restart(stack, "executor")
    settled = await stack.settled(token, proposal_id)
    assert settled["status"] == "succeeded" and "mallory" not in json.dumps(settled["audit"])


async def test_every_other_message_type_from_a_disallowed_user_is_dead_lettered(
    separated_stack: Stack,
) -> None:
    stack = separated_stack
    pid = new_id("prp")
    check = ReconciliationChecked(
        proposal_id=pid, attempt_id="att_x", check=1, result="applied", source="insider"
    )
    required = ReconciliationRequired(
        proposal_id=pid,
        contract_id=new_id("ctr"),
        operation_kind=REFUND,
        organization_id=new_id("org"),
        contract_version=1,
        attempt_id="att_x",
        source="insider",
    )
    approve = ApproveProposal(token="not-a-token", proposal_id=pid)
    event = {"type": "proposal.event", "message_id": new_id("msg")}
    notified = {"type": "proposal.event", "message_id": new_id("msg")}
    forgeries: list[tuple[Role, str, str, str, bytes, str]] = [
        # (who, exchange, routing key, queue, body, message id)
        ("executor", "outcomes", "execution.reconciliation_checked", "proposals.reconciliation",
         check.model_dump_json().encode(), check.message_id),
        ("reconciler", "outcomes", "execution.reconciliation_required", "reconciler.required",
         required.model_dump_json().encode(), required.message_id),
        ("agent", "commands", "approval.command", "proposals.approvals",
         approve.model_dump_json().encode(), approve.message_id),
        ("web", "commands", "proposal.requested", "proposals.requests", b"{}", new_id("msg")),
        ("web", "commands", "pause_point.requested", "proposals.pause-points", b"{}",
         new_id("msg")),
        ("cli", "replay", stack.topology.name("executor.contracts"), "executor.contracts",
         b"{}", new_id("msg")),
        ("cli", "replay", stack.topology.name("agent.events"), "agent.events",
         json.dumps(event).encode(), event["message_id"]),
        ("cli", "replay", stack.topology.name("proposals.notifications"),
         "proposals.notifications", json.dumps(notified).encode(), notified["message_id"]),
        ("proposals", "amq.default", stack.topology.name("reconciler.required"),
         "reconciler.required", required.model_dump_json().encode(), new_id("msg")),
    ]  # fmt: skip
    for role, exchange, key, _, body, message_id in forgeries:
        await publish(stack, role, exchange, key, body, message_id=message_id)
    for role, exchange, _, queue, _, message_id in forgeries:
        letter = await refused_as(stack, queue, message_id)
        assert letter["reason"] == "unexpected_sender", (role, exchange, queue, letter)
    assert {spec.key for spec in QUEUES} - {f[3] for f in forgeries} <= {
        "proposals.outcomes",  # the test above
        "agent.resolve",  # being removed
    }
    assert (
        await stack.scalar("SELECT count(*) FROM reconciler.checks WHERE proposal_id = :p", p=pid)
        == 0
    )


async def test_allowed_senders_still_work_and_a_replay_is_accepted_for_its_original_sender(
    separated_stack: Stack,
) -> None:
    stack = separated_stack
    person = Person(stack, (await stack.seed())["organizations"][0])
    token = person.token
    # a conversation's proposal (agent → proposals, and the reply), so its events reach the agent
    _, proposal_id = await person.propose_in_conversation()
    # an approval command from the web's user over request-reply (no permission but the write)
    reply = await command(stack, "web", ApproveProposal(token=token, proposal_id=proposal_id))
    assert reply["result"] == "claimed", reply
    view = await stack.settled(token, proposal_id)  # proposals → executor → proposals
    assert view["status"] == "succeeded"
    # proposals → agent: the hand-back reached the agent's inbox
    await wait_until(
        lambda: stack.scalar(
            "SELECT count(*) FROM agent.inbox WHERE message_id IN "
            "(SELECT message_id FROM proposals.outbox WHERE correlation_id = :p "
            "AND message_type = 'proposal.event')",
            p=proposal_id,
        ),
        what="the proposal's events consumed by the agent",
    )
    # a letter the agent's consumer dead-lettered (sent by proposals, but unreadable) and an
    # operator's replay of it as the ``cli`` user: the replay vouches for proposals, so the
    # agent accepts the sender and refuses the letter again for what it is
    unreadable = new_id("msg")
    await publish(
        stack,
        "proposals",
        "conversation-events",
        "proposal.outcome",
        json.dumps({"type": "proposal.event"}).encode(),
        message_id=unreadable,
    )
    letter = await refused_as(stack, "agent.events", unreadable)
    assert letter["reason"] == "invalid_message"
    assert letter["headers"][SENDER_HEADER] == e2e_broker_users.user("proposals")
    replayed = await stack.signoff("dlq", "replay", str(letter["id"]), "--operator", "insider")
    assert replayed.returncode == 0, replayed.stderr

    async def refused_again() -> list[dict[str, Any]]:
        return [
            d
            for d in await stack.dead_letters("agent.events")
            if d["message_id"] == unreadable and d["id"] != letter["id"]
        ]

    [again] = await wait_until(refused_again, timeout=60.0, what="the replay refused again")
    assert again["reason"] == "invalid_message", again


async def test_negative_control_any_sender_lets_the_forged_outcome_through(
    separated_stack: Stack,
) -> None:
    stack = separated_stack
    stack.processes["executor"].stop()
    restart(stack, "proposals", SIGNOFF_UNSAFE__ANY_SENDER="true")
    try:
        token, proposal_id, contract_id = await executing(stack)
        forged = forged_outcome(proposal_id, contract_id)
        await publish(
            stack,
            "cli",
            "replay",
            stack.topology.name("proposals.outcomes"),
            forged.model_dump_json().encode(),
            message_id=forged.message_id,
        )
        view = await stack.settled(token, proposal_id)
        assert view["status"] == "succeeded"
        assert [e for e in view["audit"] if e.get("actor") == "operator:mallory"]
    finally:
        restart(stack, "proposals")
        restart(stack, "executor")
