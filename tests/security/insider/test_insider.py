"""The insider suite: each service taken over, with exactly its credentials as deployed.

signoff's promise — no effect without a recorded decision by an authorized person, on exactly the
contract that was shown — must hold when any one service other than the proposals service is
someone else's. Every process of ``separated_stack`` runs as deployed: its own database role, its
own broker user, and only the keys it needs (made for this stack, never the committed dev pair).
For each insider in turn (agent, executor, reconciler, web) the test reads what that process
really holds — its environment, from ``/proc`` — and tries, with that and nothing else:

- to mint a token the proposals service accepts, with every private key it holds and the
  committed dev-only keys (any code can import those);
- to approve over HTTP and over AMQP with the tokens it sees;
- to publish an ``ExecutionContract``, an ``OutcomeReported`` and a ``ProposalEvent`` through
  every exchange, ``amq.default`` included;
- (the agent) to send a proposal request whose request differs from what the person asked, or
  that carries a contract of its own making;
- to write another schema's outbox or the proposals table;
- to read the contract signing key.

Every attempt is refused or has no effect: nothing executes, no status changes, the audit shows
no fake actor. The web is the one exception by design, and the suite states it: it signs people
in, so it holds the token private key (an OpenID Connect issuer, ``SIGNOFF_AUTH__JWKS_URL``,
takes that key out of the web). Each protection's negative control shows the attack succeeding
with that one protection off: here (audience, committed keys, the contract made by the agent,
database roles) or beside it (``test_broker.py``: the sender check;
``services/executor/tests/integration/test_authorization.py``: the executor's re-check).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
import pytest_asyncio
from aio_pika.exceptions import ChannelClosed, DeliveryError
from aiormq.exceptions import ChannelInvalidStateError
from e2e_stack import Stack
from insider_kit import REFUND, command, propose_refund, publish, refused_as, restart
from signoff_contracts.ids import new_id
from signoff_contracts.outcomes import Succeeded
from signoff_contracts.v1 import ApproveProposal, ExecutionContract, OutcomeReported
from signoff_contracts.v2 import ProposalRequested
from signoff_runtime import keys
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE
from signoff_runtime.topology import Role
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import create_async_engine

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

#: every service but the proposals service (the one the promise allows to be trusted)
INSIDERS: tuple[Role, ...] = ("agent", "executor", "reconciler", "web")
#: the committed dev-only private keys: in the repository, so any taken-over code holds them
COMMITTED = (keys.DEV_ONLY_TOKEN_PRIVATE_KEY, keys.DEV_ONLY_CONTRACT_PRIVATE_KEY)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(separated_stack: Stack) -> Stack:
    if "web" not in separated_stack.processes:
        await asyncio.to_thread(separated_stack.start_web)
    return separated_stack


def held(stack: Stack, name: str) -> dict[str, str]:
    """The environment the running process ``name`` really has (not what the test meant)."""
    proc = stack.processes[name].proc
    assert proc is not None
    raw = Path(f"/proc/{proc.pid}/environ").read_bytes()
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(): v.decode(errors="replace") for k, _, v in pairs}


def private_keys_in(env: dict[str, str]) -> list[str]:
    """Every value of ``env`` that is an Ed25519 private key, and the committed ones."""
    found = list(COMMITTED)
    for value in env.values():
        try:
            keys.private_key(value)
        except keys.InvalidKey:
            continue
        found.append(value)
    return found


async def pending_refund(stack: Stack) -> tuple[dict[str, Any], str, str]:
    """(the organization, its manager's token for both APIs, a pending refund proposal)."""
    org = (await stack.seed())["organizations"][0]
    token = stack.token(org["users"]["manager"], org)
    return org, token, await propose_refund(stack, org, token)


async def unchanged(stack: Stack, token: str, proposal_id: str) -> None:
    view = await stack.proposal(token, proposal_id)
    assert view["status"] == "pending", view
    assert [e["action"] for e in view["audit"]] == ["created"], view["audit"]


def test_only_the_proposals_service_holds_the_contract_signing_key_and_only_the_web_a_token_key(
    stack: Stack,
) -> None:
    signing = stack.keyring.contract_private
    for name in ("agent", "proposals", "executor", "reconciler", "web"):
        env = held(stack, name)
        holds_signing = signing in env.values()
        assert holds_signing == (name == "proposals"), name
        token_keys = [k for k in private_keys_in(env) if k not in COMMITTED and k != signing]
        assert bool(token_keys) == (name == "web"), name


@pytest.mark.parametrize("insider", [i for i in INSIDERS if i != "web"])
async def test_no_key_an_insider_holds_mints_a_token_the_proposals_service_accepts(
    stack: Stack, insider: Role
) -> None:
    org, token, proposal_id = await pending_refund(stack)
    manager = org["users"]["manager"]["id"]
    tried = 0
    for private in private_keys_in(held(stack, insider)):
        # PyJWT's annotations name cryptography's key classes; it takes PyNaCl's (eddsa)
        signing: Any = keys.private_key(private)
        public = signing.verify_key
        for kid in ("stack-token", keys.derived_kid(public), "dev-only-token"):
            forged = jwt.encode(
                {"sub": manager, "org": org["id"], "iss": "signoff", "aud": PROPOSALS_AUDIENCE,
                 "exp": 4_000_000_000},
                signing,
                algorithm="EdDSA",
                headers={"kid": kid},
            )  # fmt: skip
            answer = await stack.approve(forged, proposal_id)
            assert answer.status_code == 401, (insider, kid, answer.text)
            tried += 1
    assert tried >= 6  # the committed keys at least, under every key id
    await unchanged(stack, token, proposal_id)


async def test_the_agent_cannot_approve_with_the_persons_token_it_holds(stack: Stack) -> None:
    org, token, proposal_id = await pending_refund(stack)
    seen = stack.token(org["users"]["manager"], org, audience=AGENT_AUDIENCE)
    assert (await stack.approve(seen, proposal_id)).status_code == 401
    # over AMQP, from every insider's broker user: refused by the broker (no write on
    # ``commands``), dead-lettered as an unexpected sender (so no reply comes), or — the web, an
    # allowed sender of commands — answered, and refused for the token's audience
    expected = {
        "agent": "no reply",
        "executor": "refused",
        "reconciler": "refused",
        "web": "unauthenticated",
    }
    for insider in INSIDERS:
        approve = ApproveProposal(token=seen, proposal_id=proposal_id, source=insider)
        try:
            reply = await asyncio.wait_for(command(stack, insider, approve), 20.0)
            got = str(reply["result"])
        except (ChannelClosed, ChannelInvalidStateError):
            got = "refused"
        except TimeoutError:
            got = "no reply"
        assert got == expected[insider], insider
    await unchanged(stack, token, proposal_id)


def forgeries(proposal_id: str, org: str) -> list[tuple[str, bytes]]:
    """An execution contract (signed with the committed key), an operator's outcome, an event."""
    now = datetime.now(UTC)
    contract = ExecutionContract(
        contract_id=new_id("ctr"),
        proposal_id=proposal_id,
        organization_id=org,
        section="orders",
        resource_id="ord_x",
        operation_kind=REFUND,
        contract_version=1,
        arguments={"amount_cents": 999_999},
        approved_by="usr_mallory",
        approved_at=now,
        execute_by=now + timedelta(days=1),
        source="proposals",
    )
    outcome = OutcomeReported(
        proposal_id=proposal_id,
        contract_id=contract.contract_id,
        operation_kind=REFUND,
        outcome=Succeeded(result={"forged": True}),
        reported_by="operator",
        operator="mallory",
        source="reconciler",
    )
    event = {
        "message_id": new_id("msg"),
        "type": "proposal.event",
        "event": "outcome",
        "proposal_id": proposal_id,
        "organization_id": org,
        "status": "succeeded",
        "source": "proposals",
    }
    return [
        ("executor.contracts", contract.model_dump_json().encode()),
        ("proposals.outcomes", outcome.model_dump_json().encode()),
        ("agent.events", json.dumps(event).encode()),
    ]


ROUTES = {  # queue → (its exchange, its routing key)
    "executor.contracts": ("contracts", "execution.contract"),
    "proposals.outcomes": ("outcomes", "execution.outcome"),
    "agent.events": ("conversation-events", "proposal.outcome"),
}


async def test_forged_contracts_outcomes_and_events_through_every_exchange_change_nothing(
    stack: Stack,
) -> None:
    org, token, proposal_id = await pending_refund(stack)
    ledger = await stack.ledger()
    refused = unroutable = 0
    routed: list[tuple[Role, str, str]] = []  # (who, queue, message id)
    for insider in INSIDERS:
        for queue, (own_exchange, own_key) in ROUTES.items():
            for exchange in (own_exchange, "commands", "outcomes", "amq.default", "replay", "dlx"):
                body = dict(forgeries(proposal_id, org["id"]))[queue]  # a fresh message id each
                message_id = json.loads(body)["message_id"]
                key = (
                    stack.topology.name(queue)
                    if exchange in ("amq.default", "replay", "dlx")
                    else own_key
                )
                try:
                    await publish(
                        stack, insider, exchange, key, body, message_id=message_id, returns=True
                    )
                except ChannelClosed as closed:
                    assert "ACCESS_REFUSED" in str(closed), closed
                    refused += 1
                except DeliveryError:
                    unroutable += 1  # bound nowhere: returned to the sender, never delivered
                else:
                    routed.append((insider, queue, message_id))
    assert refused > 0 and unroutable > 0  # both kinds of refusal were met
    for insider, queue, message_id in routed:
        await consumed_without_effect(stack, insider, queue, message_id)
    await unchanged(stack, token, proposal_id)
    assert await stack.ledger() == ledger  # nothing executed at the card provider
    audit = json.dumps((await stack.proposal(token, proposal_id))["audit"])
    assert "mallory" not in audit


async def consumed_without_effect(stack: Stack, insider: Role, queue: str, message_id: str) -> None:
    """A routed forgery is dead-lettered (archived by the reconciler) — or, from a sender the
    queue allows (an executor's or reconciler's outcome), consumed and ignored: the proposal
    never had that contract."""

    async def settled() -> bool:
        archived = await stack.scalar(
            "SELECT count(*) FROM reconciler.dead_letters WHERE message_id = :m", m=message_id
        )
        inbox = await stack.scalar(
            "SELECT count(*) FROM proposals.inbox WHERE message_id = :m", m=message_id
        )
        return bool(archived) or (queue == "proposals.outcomes" and bool(inbox))

    await wait_until(settled, timeout=60.0, what=f"{insider}'s forgery to {queue} settled")


async def test_a_request_the_person_did_not_ask_for_is_shown_as_what_will_run(
    stack: Stack,
) -> None:
    """The agent holds the person's agent token; it may ask for something else (it is the one
    that talks to the model), but the proposals service resolves what it is asked, so the card
    shows exactly what would run. It cannot send a contract of its own making."""
    org, _, _ = await pending_refund(stack)
    case = org["refund_case"]
    asked = stack.token(org["users"]["manager"], org, audience=AGENT_AUDIENCE)
    other = {**_refund_request(case), "destination": "account_credit"}
    message = ProposalRequested(
        proposal_id=new_id("prp"),
        token=asked,
        operation_kind=REFUND,
        contract_version=1,
        resource_id=case["order_id"],
        request=other,
        source="agent",
    )
    reply = await command(stack, "agent", message, queue="proposals.requests")
    assert reply["accepted"], reply
    row = await _stored(stack, message.proposal_id)
    assert (row.arguments, row.preview) == await stack.resolved(
        REFUND, org["id"], case["order_id"], other
    )
    assert row.preview["destination"] == row.arguments["destination"] == "account_credit"

    forged_id, message_id = await _send_v1_with_its_own_contract(stack, org)
    letter = await refused_as(stack, "proposals.requests", message_id)
    assert letter["reason"] == "unsupported_version"
    assert await _stored(stack, forged_id) is None


@pytest.mark.parametrize("insider", INSIDERS)
async def test_no_insider_can_write_another_schemas_outbox_or_the_proposals_table(
    stack: Stack, insider: Role
) -> None:
    url = held(stack, insider)["SIGNOFF_DB__URL"]
    assert url != stack.env["SIGNOFF_DB__URL"]  # its own role, not the test's superuser
    # privileges are checked before a row is touched: ``WHERE false`` keeps a mistake harmless
    statements = [
        f"{verb} {schema}.outbox"
        for schema in ("proposals", "executor", "reconciler")
        if schema != insider
        for verb in ("INSERT INTO", "DELETE FROM")
    ]
    statements = [
        f"{s} DEFAULT VALUES" if s.startswith("INSERT") else f"{s} WHERE false" for s in statements
    ] + [
        "UPDATE proposals.proposals SET status = 'succeeded' WHERE false",
        "INSERT INTO proposals.audit DEFAULT VALUES",
    ]
    engine = create_async_engine(url, pool_size=1, max_overflow=0)
    try:
        for statement in statements:
            async with engine.connect() as conn:
                with pytest.raises(ProgrammingError, match="permission denied"):
                    await conn.execute(text(statement))
                await conn.rollback()
    finally:
        await engine.dispose()


# -- negative controls: each protection off, the same attack succeeds -------------------------


async def test_negative_control_without_audiences_the_agents_token_approves(stack: Stack) -> None:
    org, token, proposal_id = await pending_refund(stack)
    seen = stack.token(org["users"]["manager"], org, audience=AGENT_AUDIENCE)
    restart(stack, "proposals", SIGNOFF_UNSAFE__ACCEPT_ANY_AUDIENCE="true")
    try:
        answer = await stack.approve(seen, proposal_id)
        assert answer.status_code == 200 and answer.json()["result"] == "claimed", answer.text
    finally:
        restart(stack, "proposals")
    await stack.settled(token, proposal_id)


async def test_negative_control_trusting_the_committed_keys_lets_any_code_mint(
    stack: Stack,
) -> None:
    org, token, proposal_id = await pending_refund(stack)
    dev: Any = keys.private_key(keys.DEV_ONLY_TOKEN_PRIVATE_KEY)  # PyJWT takes PyNaCl's keys
    forged = jwt.encode(
        {"sub": org["users"]["manager"]["id"], "org": org["id"], "iss": "signoff",
         "aud": PROPOSALS_AUDIENCE, "exp": 4_000_000_000},
        dev,
        algorithm="EdDSA",
        headers={"kid": "dev-only-token"},
    )  # fmt: skip
    # the service's key set left at its default: the committed dev-only public key
    restart(stack, "proposals", ("SIGNOFF_AUTH__PUBLIC_KEYS",))
    try:
        answer = await stack.approve(forged, proposal_id)
        assert answer.status_code == 200 and answer.json()["result"] == "claimed", answer.text
    finally:
        restart(stack, "proposals", **stack.keyring.env_of("proposals"))
    await stack.settled(token, proposal_id)


async def test_negative_control_trusting_the_agents_contract_runs_what_was_not_shown(
    stack: Stack,
) -> None:
    org, token, _ = await pending_refund(stack)
    restart(stack, "proposals", SIGNOFF_UNSAFE__TRUST_AGENT_CONTRACT="true")
    try:
        forged_id, _ = await _send_v1_with_its_own_contract(stack, org)

        async def stored() -> Any:
            return await _stored(stack, forged_id)

        row = await wait_until(stored, timeout=60.0, what="the agent's own contract stored")
        assert row.preview["destination"] == "account_credit"  # what the person is shown
        assert row.arguments["destination"] != row.preview["destination"]  # what would run
        # the manager approves the account credit shown, and the card is refunded
        assert (await stack.approve(token, forged_id)).json()["result"] == "claimed"
        assert (await stack.settled(token, forged_id))["status"] == "succeeded"
        case = org["refund_case"]
        refunded = await stack.scalar(
            "SELECT refunded_cents FROM club.payments WHERE id = :p", p=case["payment_id"]
        )
        assert refunded == row.arguments["amount_cents"] > 0
    finally:
        restart(stack, "proposals")


async def test_negative_control_as_the_superuser_the_same_writes_succeed(stack: Stack) -> None:
    engine = create_async_engine(stack.env["SIGNOFF_DB__URL"], pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            await conn.execute(
                text("UPDATE proposals.proposals SET status = 'succeeded' WHERE false")
            )
            await conn.execute(text("DELETE FROM executor.outbox WHERE false"))
            await conn.rollback()
    finally:
        await engine.dispose()


# -- helpers -------------------------------------------------------------------------------------


def _refund_request(case: dict[str, str]) -> dict[str, Any]:
    return {
        "payment_id": case["payment_id"],
        "line_item_id": case["line_item_id"],
        "discount_id": case["discount_id"],
        "destination": "original_payment_method",
    }


async def _stored(stack: Stack, proposal_id: str) -> Any:
    async with stack.engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT * FROM proposals.proposals WHERE id = :i"), {"i": proposal_id}
            )
        ).first()


async def _send_v1_with_its_own_contract(stack: Stack, org: dict[str, Any]) -> tuple[str, str]:
    """As the agent's user: the old shape, carrying arguments that refund to the card and a
    preview of an account credit (both well-formed: each is a real resolve's)."""
    case = org["refund_case"]
    card, _ = await stack.resolved(REFUND, org["id"], case["order_id"], _refund_request(case))
    credit = {**_refund_request(case), "destination": "account_credit"}
    _, shown = await stack.resolved(REFUND, org["id"], case["order_id"], credit)
    proposal_id = new_id("prp")
    forged = {
        "type": "proposal.requested",
        "version": 1,
        "message_id": new_id("msg"),
        "source": "agent",
        "proposal_id": proposal_id,
        "organization_id": org["id"],
        "requested_by": org["users"]["manager"]["id"],
        "section": "orders",
        "resource_id": case["order_id"],
        "operation_kind": REFUND,
        "contract_version": 1,
        "request": credit,
        "arguments": card,
        "preview": shown,
    }
    await publish(
        stack,
        "agent",
        "commands",
        "proposal.requested",
        json.dumps(forged).encode(),
        message_id=forged["message_id"],
    )
    return proposal_id, str(forged["message_id"])
