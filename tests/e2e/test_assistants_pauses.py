"""``wait_for_approval`` end to end: the card, the halt, the resolution, the next turn.

Resolving a pause point executes nothing: no proposal, no refund, no provider call — it only
becomes the person's (synthetic) message, and the agent runs the next turn on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from assistants_kit import Person, assistant_stack, model_admin, tool_errors
from e2e_stack import Stack
from signoff_runtime.testing import wait_until
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.e2e


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(
    database_url: str,
    amqp_url: str,
    engine: AsyncEngine,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    async with assistant_stack(database_url, amqp_url, engine, tmp_path_factory, {}) as running:
        yield running


async def _asked(person: Person, conversation: str) -> str:
    [card] = [
        m
        for m in await person.say(conversation, "Before you look, ask me.")
        if m["code"] == "pause_point_card"
    ]
    return str(card["pause_point_id"])


async def _answered(person: Person, conversation: str) -> list[dict[str, Any]]:
    async def done() -> list[dict[str, Any]] | None:
        messages = (await person.conversation(conversation))["messages"]
        return messages if messages[-1]["role"] == "assistant" else None

    return await wait_until(done, timeout=30, what="the turn after the answer")


async def _nothing_executed(stack: Stack, person: Person, conversation: str) -> None:
    proposals = await stack.scalar(
        "SELECT count(*) FROM proposals.proposals WHERE conversation_id = :c", c=conversation
    )
    refunds = await stack.scalar(
        "SELECT count(*) FROM club.refunds WHERE order_id = :o",
        o=person.org["refund_case"]["order_id"],
    )
    assert proposals == 0 and refunds == 0
    ledger = await stack.ledger()
    charge = await stack.scalar(
        "SELECT provider_ref FROM club.payments WHERE id = :p",
        p=person.org["refund_case"]["payment_id"],
    )
    assert charge not in str(ledger)


@pytest.mark.parametrize(
    ("script", "kind", "answer", "said"),
    [
        ("club.pause_approval", "approval", {"action": "approve"}, "Approved."),
        (
            "club.pause_choice",
            "choice",
            {"action": "option", "option": "Account credit"},
            "Chose: Account credit",
        ),
        (
            "club.pause_data_entry",
            "data_entry",
            {"action": "data", "data": {"season": "fall", "sessions": 3}, "reply": "Thanks"},
            '"season": "fall"',
        ),
    ],
)
async def test_each_kind_halts_then_its_answer_runs_the_next_turn_once(
    stack: Stack, script: str, kind: str, answer: dict[str, Any], said: str
) -> None:
    person = Person(stack, (await stack.seed())["organizations"][0])
    async with model_admin(stack, script) as model:
        conversation = await person.open()
        pause_point_id = await _asked(person, conversation)
        assert len(await model.requests()) == 1  # the loop halted on the card
        stored = await person.pause_point(pause_point_id)
        assert stored["kind"] == kind and stored["status"] == "pending"
        assert stored["conversation_id"] == conversation
        resolved = await person.resolve(pause_point_id, **answer)
        assert resolved.status_code == 200, resolved.text
        messages = await _answered(person, conversation)
        [synthetic] = [m for m in messages if m["synthetic"]]
        assert synthetic["role"] == "user" and said in synthetic["text"]
        assert synthetic["pause_point_id"] == pause_point_id
        assert messages[-1]["text"].startswith("Thank you, I have your answer.")
        requests = await model.requests()
        assert len(requests) == 2
        assert requests[1]["body"]["messages"][-1]["content"] == synthetic["text"]

        again = await person.resolve(pause_point_id, **answer)
        assert again.status_code == 409 and again.json()["code"] == "not_resolvable"
        assert len((await person.conversation(conversation))["messages"]) == len(messages)
        assert len(await model.requests()) == 2
    await _nothing_executed(stack, person, conversation)


async def test_an_expired_pause_point_cannot_be_resolved_and_nothing_resumes(
    stack: Stack,
) -> None:
    person = Person(stack, (await stack.seed())["organizations"][0])
    async with model_admin(stack, "club.pause_approval") as model:
        conversation = await person.open()
        pause_point_id = await _asked(person, conversation)
        async with stack.engine.begin() as conn:  # time passes, by the database clock
            await conn.execute(
                text(
                    "UPDATE proposals.pause_points "
                    "SET expires_at = now() - interval '1 second' WHERE id = :p"
                ),
                {"p": pause_point_id},
            )
        late = await person.resolve(pause_point_id, action="approve")
        assert late.status_code == 409 and late.json()["reason"]["code"] == "expired"
        assert (await person.pause_point(pause_point_id))["status"] == "expired"
        messages = (await person.conversation(conversation))["messages"]
        assert not any(m["synthetic"] for m in messages)
        assert len(await model.requests()) == 1
    await _nothing_executed(stack, person, conversation)


async def test_invalid_pause_arguments_go_back_to_the_model(stack: Stack) -> None:
    person = Person(stack, (await stack.seed())["organizations"][0])
    async with model_admin(stack, "club.pause_invalid") as model:
        conversation = await person.open()
        told = (await person.say(conversation, "Ask me something."))[-1]
        assert told["code"] == "invalid_calls_exhausted"
        fields = [error["fields"][0]["field"] for error in await tool_errors(model)]
        assert fields == ["title", "options"]  # the third (kind) ended the turn
        assert len(await model.requests()) == 3
    stored = await stack.scalar(
        "SELECT count(*) FROM proposals.pause_points WHERE conversation_id = :c", c=conversation
    )
    assert stored == 0


async def _inbox(person: Person) -> list[str]:
    page = await person.stack.http.get(person.proposals("/v1/pause-points"), headers=person.headers)
    assert page.status_code == 200, page.text
    return [item["id"] for item in page.json()["items"]]


async def test_only_the_person_asked_may_answer_and_their_edited_payload_reaches_the_model(
    stack: Stack,
) -> None:
    org = (await stack.seed())["organizations"][0]
    manager, viewer = Person(stack, org), Person(stack, org, "viewer")
    async with model_admin(stack, "club.pause_approval") as model:
        conversation = await manager.open()
        pause_point_id = await _asked(manager, conversation)
        # owner-only (the default): a colleague neither sees it in the inbox nor by id
        assert pause_point_id in await _inbox(manager)
        assert pause_point_id not in await _inbox(viewer)
        hidden = await stack.http.get(
            viewer.proposals(f"/v1/pause-points/{pause_point_id}"), headers=viewer.headers
        )
        assert hidden.status_code == 404
        # the turn that asked is stored: the audit joins the pause point to the conversation
        joined = await stack.scalar(
            "SELECT count(*) FROM proposals.pause_points p JOIN agent.messages m "
            "ON m.turn_id = p.turn_id AND m.pause_point_id = p.id "
            "WHERE p.id = :p AND m.conversation_id = :c",
            p=pause_point_id,
            c=conversation,
        )
        assert joined == 1
        stored = await manager.pause_point(pause_point_id)
        assert stored["payload"] == {"topic": "early_bird"} and stored["answerable_by"] == "owner"
        edited = {"topic": "early_bird", "only_since": "2026-09-01"}
        resolved = await manager.resolve(pause_point_id, action="approve", payload=edited)
        assert resolved.status_code == 200, resolved.text
        messages = await _answered(manager, conversation)
        [synthetic] = [m for m in messages if m["synthetic"]]
        assert '"only_since": "2026-09-01"' in synthetic["text"]
        requests = await model.requests()
        assert requests[1]["body"]["messages"][-1]["content"] == synthetic["text"]


async def test_a_manager_cannot_answer_a_colleagues_pause_point(stack: Stack) -> None:
    org = (await stack.seed())["organizations"][0]
    manager, viewer = Person(stack, org), Person(stack, org, "viewer")
    async with model_admin(stack, "club.pause_approval"):
        conversation = await viewer.open()
        pause_point_id = await _asked(viewer, conversation)
        assert pause_point_id not in await _inbox(manager)
        refused = await manager.resolve(pause_point_id, action="approve")
        assert refused.status_code == 404, refused.text
        state = await stack.scalar(
            "SELECT status FROM proposals.pause_points WHERE id = :p", p=pause_point_id
        )
        assert state == "pending"
