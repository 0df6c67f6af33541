"""Pause points: storing what the model asks (``wait_for_approval``) and a person's answer to it.

Storing (``PausePointRequested``, request-reply) checks the rules (``pause_rules``), identifies
the person from their token or a resolved pause point of the conversation (``identity``: never
from the agent's fields), takes the organization's quota lock, inserts the row (its own dedup
record) and counts. A v1 request, which named its own organization and person, is refused.

Resolving is the one code path behind ``POST /v1/pause-points/{id}/resolve`` and the AMQP
``ResolvePausePoint`` command: token → current membership → the organization's own pause point
that the person may answer (else "not found", like an unknown id): by default only the person
whose conversation asked (the seed's owner-only rule), unless the assistant declared its pause
points team-answerable → a role that may do more than look → its status → an answer that fits
its kind, with any edited payload (checked by ``pause_rules``) → ONE conditional UPDATE, with
``PausePointResolved`` written to the outbox in the same transaction. The agent turns that event
into the next turn of the conversation. A pause point that expires unanswered (the sweep, or a
late answer noticing it) is announced with the same message under ``pause_point.expired``, its
status ``expired``, so the conversation hears of it instead of waiting forever.

Resolving a pause point executes nothing: no contract, no proposal changes. Anything that
changes state still goes through an operation's contract and its own approval.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import structlog
from pydantic import ValidationError
from signoff_contracts.reasons import Reason
from signoff_contracts.status import PausePointStatus
from signoff_contracts.v1 import (
    PausePointRequestReply,
    PausePointResolved,
)
from signoff_contracts.v2 import ApprovalReply, ApprovalResult, PausePointRequested
from signoff_runtime.tokens import PROPOSALS_AUDIENCE, TokenInvalid, verify_token_async
from signoff_runtime.unit_of_work import UnitOfWork
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.context import Context
from signoff_proposals.intake import identity, quotas
from signoff_proposals.lifecycle import outbox
from signoff_proposals.lifecycle.domain import HTTP_STATUS
from signoff_proposals.lifecycle.outbox import SOURCE
from signoff_proposals.metrics import PAUSE_POINTS
from signoff_proposals.pause_points import repository as pause_repo
from signoff_proposals.pause_points import rules as pause_rules
from signoff_proposals.pause_points.rules import Resolution

log = structlog.get_logger(__name__)
RESOLVED_ROUTING_KEY = "pause_point.resolved"
EXPIRED_ROUTING_KEY = "pause_point.expired"


class _Refused(Exception):
    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.code)
        self.reason = reason


# --- storing ---------------------------------------------------------------------------------


async def store(ctx: Context, msg: PausePointRequested) -> PausePointRequestReply:
    try:
        if (reason := pause_rules.check_request(msg)) is not None:
            raise _Refused(reason)
        async with ctx.engine.begin() as conn:
            row, created = await _store(ctx, conn, msg)
    except identity.NotIdentified as exc:
        log.info("pause_point.refused", pause_point_id=msg.pause_point_id, reason=exc.reason.code)
        return _request_reply(msg.pause_point_id, msg.message_id, reason=exc.reason)
    except _Refused as refused:
        log.info(
            "pause_point.refused", pause_point_id=msg.pause_point_id, reason=refused.reason.code
        )
        return _request_reply(msg.pause_point_id, msg.message_id, reason=refused.reason)
    if created:
        PAUSE_POINTS.labels(kind=msg.kind, status="pending").inc()
        log.info("pause_point.stored", pause_point_id=row.id, kind=row.kind)
    return _request_reply(msg.pause_point_id, msg.message_id, row=row)


async def _store(
    ctx: Context, conn: AsyncConnection, msg: PausePointRequested
) -> tuple[Row[Any], bool]:
    """The stored row, and whether this request created it (``False``: a replay)."""
    group = ctx.settings.proposals
    person = await identity.identify(
        ctx,
        conn,
        token=msg.token,
        resumed_from=msg.resumed_from,
        conversation_id=msg.conversation_id,
    )
    org = person.organization_id
    row = await pause_repo.insert(
        conn,
        msg,
        timedelta(seconds=group.pause_point_ttl_s),
        organization_id=org,
        requested_by=person.user_id,
    )
    if row is None:
        stored = await pause_repo.get(conn, msg.pause_point_id)
        if stored is None or stored.organization_id != org or stored.requested_by != person.user_id:
            raise _Refused(Reason(code="pause_point_id_conflict"))
        log.info("pause_point.duplicate_request", pause_point_id=msg.pause_point_id)
        return stored, False
    excess = await quotas.excess(
        conn,
        "pause_points",
        org,
        msg.conversation_id,
        per_conversation=group.max_pending_pause_points_per_conversation,
        per_organization=group.max_pending_per_organization,
    )
    if excess is not None:
        raise _Refused(excess)
    return row, True


def invalid_request(body: bytes, exc: ValidationError) -> PausePointRequestReply:
    """The typed refusal of a request that did not parse (title too long, unknown kind, …)."""
    return _request_reply(_claimed_id(body), None, reason=pause_rules.reason_for_invalid(exc))


def _claimed_id(body: bytes) -> str | None:
    try:
        claimed = json.loads(body).get("pause_point_id")
    except (ValueError, AttributeError):
        return None
    return claimed[:128] if isinstance(claimed, str) else None


def _request_reply(
    pause_point_id: str | None,
    causation_id: str | None,
    *,
    row: Row[Any] | None = None,
    reason: Reason | None = None,
) -> PausePointRequestReply:
    return PausePointRequestReply(
        accepted=row is not None,
        pause_point=None if row is None else pause_repo.view(row),
        reason=reason,
        source=SOURCE,
        correlation_id=pause_point_id,
        causation_id=causation_id,
    )


# --- resolving -------------------------------------------------------------------------------


async def resolve(
    ctx: Context, tx: UnitOfWork, token: str | None, pause_point_id: str, answer: Resolution
) -> ApprovalReply:
    try:
        claims = await verify_token_async(ctx.settings.auth, token, audience=PROPOSALS_AUDIENCE)
    except TokenInvalid:
        return _reply("unauthenticated")
    member = await ctx.directory.membership(tx.conn, claims.sub, claims.org)
    if member is None or member.organization_id != claims.org:
        log.info("pause_point.forbidden", pause_point_id=pause_point_id, why="not_a_member")
        return _reply("forbidden")
    row = await pause_repo.get(tx.conn, pause_point_id)
    # SIGNOFF_UNSAFE__ANYONE_ANSWERS_PAUSE_POINTS (tests only): the owner-only rule is off
    anyone = ctx.settings.unsafe.anyone_answers_pause_points
    if (
        row is None
        or row.organization_id != claims.org
        or not (anyone or pause_repo.may_answer(row, claims.sub))
    ):
        # someone else's owner-only pause point is as unknown as another organization's
        return _reply("not_found")
    if member.role in ctx.settings.proposals.look_only_roles:
        log.info("pause_point.forbidden", pause_point_id=row.id, why="role", role=member.role)
        return _reply("forbidden")
    if row.status != PausePointStatus.PENDING or row.lapsed:
        return await _not_resolvable(ctx, tx, row)
    refusal = pause_rules.check_resolution(
        row.kind, row.options, row.form_schema, answer, payload=row.payload
    )
    if refusal is not None:
        return _reply("invalid", row, refusal)
    resolved = await pause_repo.resolve(tx.conn, row.id, claims.sub, answer.stored())
    if resolved is None:
        again = await pause_repo.get(tx.conn, row.id)
        assert again is not None, "pause points are never deleted"
        return await _not_resolvable(ctx, tx, again)
    await _announce(ctx, tx, [resolved], RESOLVED_ROUTING_KEY)
    PAUSE_POINTS.labels(kind=resolved.kind, status="resolved").inc()
    log.info("pause_point.resolved", pause_point_id=row.id, action=answer.action)
    return _reply("resolved", resolved)


async def _not_resolvable(ctx: Context, tx: UnitOfWork, row: Row[Any]) -> ApprovalReply:
    """Already resolved (shown with its stored resolution) or expired — changing nothing else.

    A pending row past its time is marked expired on the spot (``expire``, as the sweep would).
    """
    shown = row
    if row.status == PausePointStatus.PENDING:
        shown = next(iter(await _expire(ctx, tx, pause_point_id=row.id)), row)
    status = PausePointStatus(shown.status)
    code = "resolved" if status is PausePointStatus.RESOLVED else "expired"
    return _reply("not_approvable", shown, Reason(code=code))


async def _announce(ctx: Context, tx: UnitOfWork, rows: Sequence[Row[Any]], key: str) -> None:
    """``PausePointResolved`` for each of ``rows`` under ``key``, through the service's outbox."""
    views = [pause_repo.view(row) for row in rows]
    messages = [
        outbox.announcement(
            ctx,
            PausePointResolved(pause_point=view, source=SOURCE, correlation_id=view.id),
            key,
            view.conversation_id,
        )
        for view in views
    ]
    await outbox.enqueue(ctx, tx, messages)


def _reply(
    result: ApprovalResult, row: Row[Any] | None = None, reason: Reason | None = None
) -> ApprovalReply:
    return ApprovalReply(
        result=result,
        http_status=HTTP_STATUS[result],
        pause_point=None if row is None else pause_repo.view(row),
        reason=reason,
        source=SOURCE,
        correlation_id=None if row is None else row.id,
    )


# --- expiry ----------------------------------------------------------------------------------


async def expire(ctx: Context, tx: UnitOfWork, *, batch: int) -> int:
    """The expiry sweep's share for pause points, each expiry announced to the conversation."""
    rows = await _expire(ctx, tx, batch=batch)
    if rows:
        log.info("pause_points.expired", count=len(rows))
    return len(rows)


async def _expire(
    ctx: Context, tx: UnitOfWork, *, pause_point_id: str | None = None, batch: int = 1
) -> Sequence[Row[Any]]:
    rows = await pause_repo.expire(tx.conn, pause_point_id=pause_point_id, batch=batch)
    if rows:
        await _announce(ctx, tx, rows, EXPIRED_ROUTING_KEY)
    for kind, count in Counter(row.kind for row in rows).items():
        PAUSE_POINTS.labels(kind=kind, status="expired").inc(count)
    return rows
