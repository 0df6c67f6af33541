"""``email_broadcast.apply_draft``: resolve, recount at execution, idempotent by proposal."""

from __future__ import annotations

from typing import Any

import pytest
from signoff_club import tables as t
from signoff_club.operations import apply_broadcast_draft
from signoff_club.testing import BroadcastWorld, count_rows, execution_context
from signoff_contracts.ids import new_id
from signoff_contracts.operations import ExecutionContext, Rejected
from signoff_runtime.testing.statements import statements
from sqlalchemy import delete, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


async def _resolve(engine: AsyncEngine, world: BroadcastWorld, request: dict[str, Any]) -> Any:
    op = world.operation
    async with engine.connect() as conn:
        return await op.resolve(op.parse_request(request), world.scope, conn)


async def _run(
    engine: AsyncEngine, world: BroadcastWorld, arguments: Any, ctx: ExecutionContext
) -> Any:
    """What the executor does for a local operation: revalidate and execute in one tx."""
    op = world.operation
    async with engine.begin() as conn:
        reason = await op.revalidate(arguments, world.scope, conn)
        if reason is not None:
            return reason
        return await op.execute(arguments, world.scope, ctx, conn)


async def _form(engine: AsyncEngine, world: BroadcastWorld) -> Any:
    b = t.broadcast_forms
    async with engine.connect() as conn:
        return (await conn.execute(select(b).where(b.c.id == world.scope.resource_id))).one()


async def _join_segment(engine: AsyncEngine, world: BroadcastWorld, segment_id: str) -> None:
    participant_id = new_id("par")
    async with engine.begin() as conn:
        await conn.execute(
            t.participants.insert().values(
                id=participant_id, organization_id=world.organization["id"], name="Riley New"
            )
        )
        await conn.execute(
            t.segment_members.insert().values(segment_id=segment_id, participant_id=participant_id)
        )


async def test_resolve_counts_each_person_once(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    resolved = await _resolve(engine, broadcast_world, broadcast_world.request)
    assert resolved.preview.model_dump() == {
        "broadcast_name": "Spring bonspiel announcement",
        "segment_names": ("Adult league", "Junior clinic families"),
        "audience_count": 3,
        "subject": broadcast_world.request["subject"],
        "body": broadcast_world.request["body"],
    }
    assert resolved.arguments.audience_count == 3
    assert list(resolved.arguments.segment_ids) == broadcast_world.request["segment_ids"]


@pytest.mark.parametrize("which", ["segment", "broadcast"])
async def test_another_organizations_ids_are_not_found(
    engine: AsyncEngine, broadcast_world: BroadcastWorld, which: str
) -> None:
    op = broadcast_world.operation
    if which == "segment":
        foreign = broadcast_world.foreign_request["segment_ids"][0]
        request = {**broadcast_world.request, "segment_ids": [foreign]}
        scope = broadcast_world.scope
    else:
        request = broadcast_world.request
        scope = broadcast_world.scope.model_copy(
            update={"resource_id": broadcast_world.other_scope.resource_id}
        )
    async with engine.connect() as conn:
        before = await count_rows(conn)
        with pytest.raises(Rejected) as caught:
            await op.resolve(op.parse_request(request), scope, conn)
        assert await count_rows(conn) == before
    assert caught.value.reason.code == f"{which}_not_found"


async def test_a_changed_audience_requires_a_new_proposal(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    await _join_segment(engine, broadcast_world, broadcast_world.request["segment_ids"][0])
    reason = await _run(engine, broadcast_world, arguments, execution_context())
    assert reason.model_dump() == {
        "code": "audience_changed",
        "params": {"previous_count": 3, "current_count": 4},
    }
    form = await _form(engine, broadcast_world)
    assert (form.subject, form.revision, form.applied_proposal_id) == ("", 0, None)


async def test_a_shrunk_audience_also_counts_as_changed(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    async with engine.begin() as conn:
        await conn.execute(
            delete(t.segment_members).where(
                t.segment_members.c.segment_id == broadcast_world.request["segment_ids"][1]
            )
        )
    reason = await _run(engine, broadcast_world, arguments, execution_context())
    assert reason.code == "audience_changed" and reason.params["current_count"] == 2


async def test_apply_copies_the_draft_once_per_proposal(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    op = broadcast_world.operation
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    ctx = execution_context()
    result = await _run(engine, broadcast_world, arguments, ctx)
    form = await _form(engine, broadcast_world)
    assert result == op.Result(
        broadcast_id=broadcast_world.scope.resource_id,
        audience_count=3,
        broadcast_name=form.name,
        subject=arguments.subject,
        rechecked=apply_broadcast_draft.RECHECKED,
    )
    assert (form.subject, form.body) == (arguments.subject, arguments.body)
    assert form.segment_ids == list(arguments.segment_ids)
    assert [f["name"] for f in form.filters] == ["Adult league", "Junior clinic families"]
    assert form.filters[0]["filter"] == {"registered_for": "adult_league", "season": "fall"}
    assert (form.audience_count, form.revision, form.applied_proposal_id) == (3, 1, ctx.proposal_id)
    async with engine.begin() as conn:
        again = await op.execute(arguments, broadcast_world.scope, ctx, conn)
    assert again == result
    assert (await _form(engine, broadcast_world)).revision == 1


async def test_a_draft_prepared_before_another_was_applied_fails_closed(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    first = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    second = (
        await _resolve(engine, broadcast_world, {**broadcast_world.request, "subject": "Other"})
    ).arguments
    await _run(engine, broadcast_world, second, execution_context())
    reason = await _run(engine, broadcast_world, first, execution_context())
    assert reason.code == "broadcast_changed"
    assert (await _form(engine, broadcast_world)).subject == "Other"


async def test_revalidate_holds_the_form(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    """While one execution holds the form, another edit waits for it (no lost update)."""
    op = broadcast_world.operation
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    b = t.broadcast_forms
    async with engine.begin() as holder:
        assert await op.revalidate(arguments, broadcast_world.scope, holder) is None
        async with engine.connect() as other:
            await other.exec_driver_sql("SET lock_timeout = '200ms'")
            with pytest.raises(DBAPIError, match="lock timeout"):
                await other.execute(
                    update(b).where(b.c.id == arguments.broadcast_id).values(subject="edit")
                )
            await other.rollback()


async def test_revalidate_and_execute_cost_two_statements(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    """Round trips in the executor's transaction: the form's lock with the segments and their
    audience, and the UPDATE that copies the draft (its filters by a subquery), each a hot
    statement. A performance budget: more is a regression, and one back on SQLAlchemy Core
    costs its CPU again (docs/benchmarks.md)."""
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    with statements(engine) as (core, hot):
        result = await _run(engine, broadcast_world, arguments, execution_context())
    assert result.audience_count == 3
    assert not core and len(hot) == 2, (core, hot)


async def test_a_segment_gone_between_revalidate_and_execute_applies_nothing(
    engine: AsyncEngine, broadcast_world: BroadcastWorld
) -> None:
    """The copy of the filters must name every segment approved; one missing fails the
    execution (its UPDATE rolled back with the raise), as before it was one statement."""
    op = broadcast_world.operation
    arguments = (await _resolve(engine, broadcast_world, broadcast_world.request)).arguments
    gone = arguments.model_copy(update={"segment_ids": (*arguments.segment_ids, new_id("seg"))})
    with pytest.raises(LookupError, match="vanished"):
        async with engine.begin() as conn:
            await op.execute(gone, broadcast_world.scope, execution_context(), conn)
    assert (await _form(engine, broadcast_world)).revision == 0
