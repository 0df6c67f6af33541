"""Turns: one at a time per conversation, started by the person or by an event.

A turn holds the conversation's lease (``turn_id`` until ``turn_expires_at``, by the database
clock), so two turns never interleave and a crashed one frees the conversation when its lease
lapses. The person's message is committed before the model is called; what the turn produces —
the assistant's reply, or the application's message after a halt — is committed in one
transaction with the lease's release, so a failure leaves either nothing or all of it.

Event-started turns (a pause point resolved) leave a ``pending_trigger`` on the conversation:
the consumer starts the turn right after its commit, a turn that finishes with a trigger
waiting starts another, and a slow sweep picks up any the process lost (a crash, a restart).

Who a turn's requests to the proposals service speak for (``OnBehalf``): a turn the person
started carries their bearer token, in memory only, for that turn; an event-started turn has no
token and names the resolved pause point whose answer started it — the proposals service takes
the person from its own row of that pause point (same conversation, resolved recently). No token
is ever written to the database.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Directory, Membership, Scope
from signoff_runtime.unit_of_work import unit_of_work
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff_agent import loop, prompts
from signoff_agent import repository as repo
from signoff_agent.metrics import TURN_SECONDS, TURNS
from signoff_agent.model import ChatModel
from signoff_agent.pausing import Pauser
from signoff_agent.proposing import OnBehalf, Proposer
from signoff_agent.sections import Sections
from signoff_agent.settings import AgentGroup
from signoff_agent.toolbox import Paused, Proposed, Stopped, Toolbox

log = structlog.get_logger(__name__)
T = TypeVar("T")
_NOTES = 5
#: endings after which the model never saw the notes: keep them for the next turn
_UNSEEN = frozenset({"model_unavailable", "turn_failed"})


class TurnBusy(Exception):
    """Another turn holds the conversation."""


@dataclass
class Turns:
    engine: AsyncEngine
    model: ChatModel
    sections: Sections
    proposer: Proposer
    pauser: Pauser
    directory: Directory
    group: AgentGroup
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    # -- starting ----------------------------------------------------------------------------
    async def begin(
        self, conversation_id: str, member: Membership, content: str
    ) -> tuple[str, Row[Any]]:
        """Claim the turn and commit the person's message; ``TurnBusy`` if one is running."""
        turn_id = new_id("trn")
        async with unit_of_work(self.engine) as uow:
            claimed = await repo.claim_turn(
                uow.conn, conversation_id, turn_id, self.group.turn_lease_s, pending=False
            )
            if claimed is None:
                raise TurnBusy(conversation_id)
            await repo.append_journal(uow.conn, conversation_id, "turn", f"started:{turn_id}")
            message = await repo.add_message(
                uow.conn,
                conversation_id,
                role="user",
                author=member.user_id,
                content=content,
                turn_id=turn_id,
            )
        assert message is not None
        return turn_id, message

    def spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` in the background, holding a reference until it is done."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def resume_soon(self, conversation_id: str) -> None:
        """Run the waiting turn of ``conversation_id`` in the background (if nobody else is)."""
        self.spawn(self.resume(conversation_id))

    async def drain(self, timeout_s: float) -> None:
        """Let running turns finish (shutdown), then cancel what is left."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
            for task in pending:
                task.cancel()

    async def resume(self, conversation_id: str) -> None:
        turn_id = new_id("trn")
        async with unit_of_work(self.engine) as uow:
            conversation = await repo.claim_turn(
                uow.conn, conversation_id, turn_id, self.group.turn_lease_s, pending=True
            )
            if conversation is None:
                return
            member = await self.directory.membership(
                uow.conn, conversation.created_by, conversation.organization_id
            )
            resumed_from = await repo.last_resolution(uow.conn, conversation_id)
            await repo.append_journal(uow.conn, conversation_id, "turn", f"started:{turn_id}")
        if member is None:
            await self._finish(conversation_id, turn_id, "", Stopped("membership_ended", {}), [])
            return
        await self.run(conversation_id, turn_id, member, OnBehalf(resumed_from=resumed_from))

    async def sweep(self) -> None:
        """Forever: start turns whose trigger nobody picked up."""
        while True:
            async with self.engine.connect() as conn:
                waiting = await repo.waiting_conversations(conn)
            for conversation_id in waiting:
                await self.resume(conversation_id)
            await asyncio.sleep(self.group.turn_sweep_s)

    # -- running -----------------------------------------------------------------------------
    async def run(
        self,
        conversation_id: str,
        turn_id: str,
        member: Membership,
        on_behalf: OnBehalf,
        progress: loop.Progress | None = None,
    ) -> list[Row[Any]]:
        """Run the claimed turn to its end; return the messages it wrote."""
        started = time.perf_counter()
        section = ""
        note_ids: list[int] = []
        try:
            async with self.engine.connect() as conn:
                conversation = await repo.get(conn, conversation_id)
                assert conversation is not None
                section = conversation.section
                messages, note_ids, toolbox = await self._prepare(
                    conn, conversation, member, on_behalf, turn_id
                )
            limits = loop.Limits(
                self.group.max_model_calls, self.group.max_invalid_calls, self.group.reply_chars
            )
            ending: loop.Ending = await loop.run(
                self.model, toolbox, messages, limits, progress or loop._quiet
            )
        except Exception as exc:
            correlation_id = new_id("cor")
            log.error("turn.failed", correlation_id=correlation_id, exc_info=exc)
            ending = Stopped("turn_failed", {"correlation_id": correlation_id})
        TURN_SECONDS.labels(section=section).observe(time.perf_counter() - started)
        return await self._finish(conversation_id, turn_id, section, ending, note_ids)

    async def _prepare(
        self,
        conn: AsyncConnection,
        conversation: Row[Any],
        member: Membership,
        on_behalf: OnBehalf,
        turn_id: str | None = None,
    ) -> tuple[list[dict[str, Any]], list[int], Toolbox]:
        assistant = self.sections.get(conversation.section)
        scope = Scope(
            organization_id=conversation.organization_id,
            section=conversation.section,
            resource_id=conversation.resource_id,
        )
        context = await assistant.context(conn, scope)
        notes = await repo.open_notes(conn, conversation.id, _NOTES)
        history = await repo.recent_messages(
            conn, conversation.id, self.group.history_messages or 1
        )
        budget = prompts.Budget(
            self.group.history_messages, self.group.history_chars, self.group.note_chars
        )
        messages = prompts.build(
            assistant, member.locale, context, notes, history, self.proposer.operations, budget
        )
        toolbox = Toolbox(
            assistant=assistant,
            scope=scope,
            member=member,
            on_behalf=on_behalf,
            conversation_id=conversation.id,
            engine=self.engine,
            proposer=self.proposer,
            pauser=self.pauser,
            result_chars=self.group.tool_result_chars,
            turn_id=turn_id,
        )
        return messages, [note.id for note in notes], toolbox

    async def _finish(
        self,
        conversation_id: str,
        turn_id: str,
        section: str,
        ending: loop.Ending,
        note_ids: Sequence[int],
    ) -> list[Row[Any]]:
        """Write the turn's result, consume the notes it carried, release the lease: one tx."""
        async with unit_of_work(self.engine) as uow:
            await repo.lock(uow.conn, conversation_id)
            written = await _write_ending(uow.conn, conversation_id, turn_id, ending)
            if not (isinstance(ending, Stopped) and ending.code in _UNSEEN):
                await repo.consume_notes(uow.conn, note_ids, turn_id)
            await repo.append_journal(uow.conn, conversation_id, "turn", f"ended:{turn_id}")
            again = await repo.release_turn(uow.conn, conversation_id, turn_id)
        name = ending.code if isinstance(ending, Stopped) else type(ending).__name__.lower()
        TURNS.labels(section=section, ending=name).inc()
        log.info("turn.ended", conversation_id=conversation_id, turn_id=turn_id, ending=name)
        if again:
            self.resume_soon(conversation_id)
        return written


async def _write_ending(
    conn: AsyncConnection, conversation_id: str, turn_id: str, ending: loop.Ending
) -> list[Row[Any]]:
    if isinstance(ending, loop.Answered):
        values: dict[str, Any] = {"role": "assistant", "content": ending.text}
    elif isinstance(ending, Proposed):
        await repo.upsert_card(
            conn,
            ending.proposal_id,
            conversation_id,
            "proposal",
            "pending",
            keep_existing=True,
            operation_kind=ending.kind,
        )
        values = {
            "role": "app",
            "code": "proposal_ready",
            "proposal_id": ending.proposal_id,
            "kind": "card",
            "params": {"kind": ending.kind},
        }
    elif isinstance(ending, Paused):
        await repo.upsert_card(
            conn,
            ending.pause_point_id,
            conversation_id,
            "pause_point",
            "pending",
            keep_existing=True,
        )
        values = {
            "role": "app",
            "code": "pause_point_card",
            "pause_point_id": ending.pause_point_id,
            "kind": "card",
        }
    else:
        values = {"role": "app", "code": ending.code, "params": ending.params}
    row = await repo.add_message(conn, conversation_id, turn_id=turn_id, **values)
    if row is None:  # the card's ``created`` event was faster and wrote it: show that one
        row = await repo.handed_back(
            conn,
            "card",
            proposal_id=values.get("proposal_id"),
            pause_point_id=values.get("pause_point_id"),
        )
    return [row] if row is not None else []
