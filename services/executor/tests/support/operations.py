"""Two small operations on the test domain: one local, one external (the attempt protocol)."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic import BaseModel, ConfigDict
from signoff_contracts.ids import new_id
from signoff_contracts.operations import (
    Actor,
    AttemptRef,
    ExecutionContext,
    ExternalOperation,
    Locale,
    LocalOperation,
    RenderedPreview,
    Resolved,
    Scope,
)
from signoff_contracts.outcomes import OperationOutcome, RevisionRequired, Succeeded
from signoff_contracts.reasons import Reason
from sqlalchemy import text

from support.domain import SCHEMA
from support.provider import FakeProvider


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NoteRequest(_Frozen):
    body: str


class NoteArguments(_Frozen):
    board_id: str
    body: str
    delay_s: float = 0.0
    explode: bool = False


class NotePreview(_Frozen):
    board_id: str
    body: str


class NoteResult(_Frozen):
    note_id: int


async def _check_board(board_id: str, scope: Scope, conn: Any) -> Reason | None:
    row = (
        await conn.execute(
            text(
                f"SELECT open FROM {SCHEMA}.boards WHERE id = :id AND organization_id = :org "
                "FOR UPDATE"
            ),
            {"id": board_id, "org": scope.organization_id},
        )
    ).first()
    if row is None:
        return Reason(code="board_not_found")
    return None if row.open else Reason(code="board_closed", params={"board_id": board_id})


class AddNote(LocalOperation[NoteRequest, NoteArguments, NotePreview, NoteResult]):
    kind = "board.add_note"
    version = 1
    section = "boards"
    resource = "board"
    summary = "Add a note to a board."
    Request = NoteRequest
    Arguments = NoteArguments
    Preview = NotePreview
    Result = NoteResult

    def __init__(self) -> None:
        self.executed = 0  # calls of `execute`, committed or not

    async def resolve(
        self, request: NoteRequest, scope: Scope, conn: Any
    ) -> Resolved[NoteArguments, NotePreview]:
        return Resolved(
            NoteArguments(board_id=scope.resource_id, body=request.body),
            NotePreview(board_id=scope.resource_id, body=request.body),
        )

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role == "manager"

    async def revalidate(self, arguments: NoteArguments, scope: Scope, conn: Any) -> Reason | None:
        return await _check_board(arguments.board_id, scope, conn)

    def render_preview(self, preview: NotePreview, locale: Locale) -> RenderedPreview:
        return RenderedPreview(title=f"Note on {preview.board_id}")

    def render_result(self, result: NoteResult, locale: Locale) -> str:
        return f"Added note {result.note_id}."

    async def execute(
        self, arguments: NoteArguments, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> NoteResult:
        self.executed += 1
        if arguments.delay_s:
            await conn.execute(text("SELECT pg_sleep(:s)"), {"s": arguments.delay_s})
        if arguments.explode:
            raise RuntimeError("the operation's own bug (secret detail)")
        note_id = (
            await conn.execute(
                text(
                    f"INSERT INTO {SCHEMA}.notes (contract_id, board_id, body) "
                    "VALUES (:c, :b, :body) RETURNING id"
                ),
                {"c": ctx.contract_id, "b": arguments.board_id, "body": arguments.body},
            )
        ).scalar_one()
        return NoteResult(note_id=note_id)


class ChargeArguments(_Frozen):
    board_id: str
    amount: int


class ChargeRequest(_Frozen):
    amount: int


class ChargePreview(_Frozen):
    amount: int


class ChargeResult(_Frozen):
    charge_ref: str


class ChargeBoard(
    ExternalOperation[ChargeRequest, ChargeArguments, ChargePreview, ChargeResult, FakeProvider]
):
    kind = "board.charge"
    version = 1
    section = "boards"
    resource = "board"
    summary = "Charge a board's card."
    Request = ChargeRequest
    Arguments = ChargeArguments
    Preview = ChargePreview
    Result = ChargeResult

    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider

    async def resolve(
        self, request: ChargeRequest, scope: Scope, conn: Any
    ) -> Resolved[ChargeArguments, ChargePreview]:
        return Resolved(
            ChargeArguments(board_id=scope.resource_id, amount=request.amount),
            ChargePreview(amount=request.amount),
        )

    def authorize(self, actor: Actor, scope: Scope) -> bool:
        return actor.role == "manager"

    async def revalidate(
        self, arguments: ChargeArguments, scope: Scope, conn: Any
    ) -> Reason | None:
        return await _check_board(arguments.board_id, scope, conn)

    def render_preview(self, preview: ChargePreview, locale: Locale) -> RenderedPreview:
        return RenderedPreview(title=f"Charge {preview.amount}")

    def render_result(self, result: ChargeResult, locale: Locale) -> str:
        return f"Charged ({result.charge_ref})."

    def open_provider(self) -> AbstractAsyncContextManager[FakeProvider]:
        return self.provider.session()

    async def begin_attempt(
        self, arguments: ChargeArguments, scope: Scope, ctx: ExecutionContext, conn: Any
    ) -> AttemptRef:
        attempt = AttemptRef(attempt_id=new_id("att"), idempotency_key=f"charge-{ctx.proposal_id}")
        await conn.execute(
            text(
                f"INSERT INTO {SCHEMA}.charges (attempt_id, proposal_id, idempotency_key, "
                "board_id, amount, status) VALUES (:a, :p, :k, :b, :amt, 'pending')"
            ),
            {
                "a": attempt.attempt_id,
                "p": ctx.proposal_id,
                "k": attempt.idempotency_key,
                "b": arguments.board_id,
                "amt": arguments.amount,
            },
        )
        return attempt

    async def perform(
        self, attempt: AttemptRef, arguments: ChargeArguments, provider: FakeProvider
    ) -> Any:
        await asyncio.sleep(0)
        return await provider.charge(attempt.idempotency_key, arguments.amount)

    async def record(self, attempt: AttemptRef, answer: Any, conn: Any) -> OperationOutcome:
        if answer["status"] == "succeeded":
            await self._set(conn, attempt.attempt_id, "succeeded", answer["ref"])
            return Succeeded(result=ChargeResult(charge_ref=answer["ref"]).model_dump())
        await self._set(conn, attempt.attempt_id, "refused", None)
        return RevisionRequired(reason=Reason(code="card_refused"))

    async def mark_unknown(self, attempt: AttemptRef, conn: Any) -> None:
        await self._set(conn, attempt.attempt_id, "unknown", None)

    async def reconcile(
        self, attempt_id: str, conn: Any, provider: FakeProvider
    ) -> OperationOutcome | None:
        row = (
            await conn.execute(
                text(
                    f"SELECT idempotency_key, status, provider_ref FROM {SCHEMA}.charges "
                    "WHERE attempt_id = :a FOR UPDATE"
                ),
                {"a": attempt_id},
            )
        ).one()
        if row.status == "succeeded":
            return Succeeded(result=ChargeResult(charge_ref=row.provider_ref).model_dump())
        found = await provider.lookup(row.idempotency_key)
        if found is None:
            return None  # a real operation concludes "never applied" only after its lease
        await self._set(conn, attempt_id, "succeeded", found["ref"])
        return Succeeded(result=ChargeResult(charge_ref=found["ref"]).model_dump())

    async def _set(self, conn: Any, attempt_id: str, status: str, ref: str | None) -> None:
        await conn.execute(
            text(
                f"UPDATE {SCHEMA}.charges SET status = :s, provider_ref = coalesce(:r, "
                "provider_ref) WHERE attempt_id = :a"
            ),
            {"s": status, "r": ref, "a": attempt_id},
        )
