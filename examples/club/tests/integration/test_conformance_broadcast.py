"""``email_broadcast.apply_draft`` under the operation conformance kit (a local operation:
the attempt-protocol checks are not collected for it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from signoff_club import tables as t
from signoff_club import testing
from signoff_club.directory import ClubDirectory
from signoff_club.operations.apply_broadcast_draft import ApplyBroadcastDraft
from signoff_conformance import ConformanceCase, OperationConformance, StaleFact, actors
from signoff_contracts.ids import new_id
from signoff_contracts.operations import Resolved
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

OUT_OF_SCOPE_CODES = {
    "other_orgs_segment": "segment_not_found",
    "mine_and_other_orgs_segment": "segment_not_found",
    "no_such_segment": "segment_not_found",
}
STALE_CODES = {
    "member_added": "audience_changed",
    "member_removed": "audience_changed",
    "form_edited": "broadcast_changed",
    "another_draft_applied": "broadcast_changed",
    "segment_deleted": "segment_not_found",
}


def out_of_scope(world: testing.BroadcastWorld) -> dict[str, dict[str, Any]]:
    mine, theirs = world.request["segment_ids"], world.foreign_request["segment_ids"]
    return {
        "other_orgs_segment": {**world.request, "segment_ids": theirs[:1]},
        "mine_and_other_orgs_segment": {**world.request, "segment_ids": [mine[0], theirs[1]]},
        "no_such_segment": {**world.request, "segment_ids": [new_id("seg")]},
    }


def stale_facts(world: testing.BroadcastWorld) -> dict[str, StaleFact]:
    """The audience and the form the draft was prepared against, changed under it."""
    adults, families = world.request["segment_ids"]
    members, forms = t.segment_members, t.broadcast_forms
    form = forms.c.id == world.scope.resource_id

    async def member_added(conn: AsyncConnection) -> None:
        participant_id = new_id("par")
        await conn.execute(
            t.participants.insert().values(
                id=participant_id, organization_id=world.scope.organization_id, name="Riley New"
            )
        )
        await conn.execute(
            members.insert().values(segment_id=families, participant_id=participant_id)
        )

    async def member_removed(conn: AsyncConnection) -> None:
        """Someone in the families segment only (not also an adult) leaves it."""
        in_adults = select(members.c.participant_id).where(members.c.segment_id == adults)
        await conn.execute(
            members.delete().where(
                members.c.segment_id == families, members.c.participant_id.not_in(in_adults)
            )
        )

    async def form_edited(conn: AsyncConnection) -> None:
        await conn.execute(
            update(forms)
            .where(form)
            .values(subject="Edited by hand", revision=forms.c.revision + 1)
        )

    async def another_draft_applied(conn: AsyncConnection) -> None:
        """A second proposal for the same form, prepared and executed first."""
        op = world.operation
        other = op.parse_request({**world.request, "subject": "Curling social on Friday"})
        arguments = (await op.resolve(other, world.scope, conn)).arguments
        await op.execute(arguments, world.scope, testing.execution_context(), conn)

    async def segment_deleted(conn: AsyncConnection) -> None:
        await conn.execute(members.delete().where(members.c.segment_id == families))
        await conn.execute(t.segments.delete().where(t.segments.c.id == families))

    return {
        "member_added": member_added,
        "member_removed": member_removed,
        "form_edited": form_edited,
        "another_draft_applied": another_draft_applied,
        "segment_deleted": segment_deleted,
    }


def revisions_of(engine: AsyncEngine, broadcast_id: str) -> Callable[[], Awaitable[int]]:
    """Drafts applied to this form: its ``revision`` counts every change made to it, so a
    repeat that wrote again shows even though ``applied_proposal_id`` would not change."""

    async def count() -> int:
        async with engine.connect() as conn:
            query = select(t.broadcast_forms.c.revision).where(
                t.broadcast_forms.c.id == broadcast_id
            )
            revision = (await conn.execute(query)).scalar_one()
        return int(revision)

    return count


class TestApplyBroadcastDraftConformance(OperationConformance):
    operation = ApplyBroadcastDraft
    out_of_scope_codes = OUT_OF_SCOPE_CODES
    stale_codes = STALE_CODES

    @pytest.fixture
    async def case(self, engine: AsyncEngine) -> ConformanceCase:
        world = await testing.broadcast_world(engine)
        org = world.organization
        manager, viewer = await actors(
            engine,
            ClubDirectory(),
            org["id"],
            manager=org["users"]["manager"]["id"],
            viewer=org["users"]["viewer"]["id"],
        )
        return ConformanceCase(
            scope=world.scope,
            manager=manager,
            viewer=viewer,
            valid_request=world.request,
            out_of_scope_requests=out_of_scope(world),
            stale_facts=stale_facts(world),
            engine=engine,
            count_effects=revisions_of(engine, world.scope.resource_id),
        )

    async def check_resolved(self, case: ConformanceCase, resolved: Resolved[Any, Any]) -> None:
        """The audience is the distinct people of the chosen segments, counted from the rows."""
        arguments = resolved.arguments
        assert arguments.broadcast_id == case.scope.resource_id
        sql = (
            "SELECT count(DISTINCT m.participant_id) FROM club.segment_members m"
            " JOIN club.segments s ON s.id = m.segment_id"
            " WHERE s.organization_id = :o AND s.id = ANY(:ids)"
        )
        params = {"o": case.scope.organization_id, "ids": list(arguments.segment_ids)}
        async with case.engine.connect() as conn:
            audience = (await conn.execute(text(sql), params)).scalar_one()
        assert arguments.audience_count == audience == resolved.preview.audience_count
