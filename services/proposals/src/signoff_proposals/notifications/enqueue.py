"""The ``proposals.notifications`` consumer: proposal events in, delivery rows out.

Every delivery row has a ``dedup_key`` of the event's message id and its recipient (unique), so
a redelivered event adds nothing: the rows are inserted with ``ON CONFLICT DO NOTHING``. Most
events have nobody to tell (no webhook subscribes to them, e-mail only on ``created``), so
events are read first, on a connection in autocommit: a SELECT, no transaction, no inbox row, no
commit (three such commits per proposal were the proposals service's busiest writes, issue 18);
their rows, if any, are one INSERT, atomic by itself. The events waiting together are handled
together (``signoff_runtime.batching.consume_runs``): one SELECT of the subscriptions of all
their organizations and one INSERT for all their rows, where each event alone cost a SELECT; at
low load a batch is one event, as before; an event with nobody to tell is not rendered, and an
organization's people (for e-mail) are read once for all its events in a batch. It sends
nothing itself (``delivery`` does, outside any transaction), so a slow or failing endpoint never
holds a consumer, let alone a decision. E-mail goes to the people who may approve a waiting
proposal: the directory's ``Roster`` lists the organization's members, the operation's own
``authorize`` and the proposal's frozen approval policy (its roles, whether the proposer counts)
pick the approvers, minus anyone who turned notices off; a reminder row waits until shortly
before the proposal expires.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from faststream.rabbit.message import RabbitMessage as Message
from signoff_contracts.operations import Actor, Scope
from signoff_contracts.roster import Contact, Roster
from signoff_contracts.v1 import ProposalEvent, ProposalView, ReconciliationChecked
from signoff_runtime import hot
from signoff_runtime.inbox import first_delivery
from signoff_runtime.registry import UnknownOperation
from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.context import Context
from signoff_proposals.lifecycle import repository
from signoff_proposals.notifications.payloads import Summary, summarize, summary_of
from signoff_proposals.notifications.tables import deliveries, preferences, subscriptions
from signoff_proposals.tables import inbox


async def on_events(ctx: Context, messages: Sequence[Message]) -> None:
    """Proposal events in, their delivery rows out: a SELECT and at most one INSERT for them all
    (each statement atomic by itself, so a batch that fails is safe to redo message by message)."""
    events = [ProposalEvent.model_validate_json(msg.body) for msg in messages]
    notify = ctx.settings.notify
    async with ctx.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        subscribed = await _subscribers(conn, {e.proposal.organization_id for e in events})
        people: People = {}
        rows: list[dict[str, Any]] = []
        for event in events:
            hooks = _wanted(subscribed, event.proposal.organization_id, event.event)
            email = event.event == "created" and notify.email_enabled
            if not hooks and not email:  # the common case: nothing to render, nobody to tell
                continue
            summary = summarize(event, ctx.operations, notify.web_url)
            rows += _webhook_rows_of(hooks, summary)
            if email:
                rows += await _email_rows(ctx, conn, event, summary, people)
        if rows:
            await conn.execute(_insert(rows))


def _insert(rows: list[dict[str, Any]]) -> Any:
    """The delivery rows, each at most once whatever redelivers their event."""
    return insert(deliveries).values(rows).on_conflict_do_nothing(index_elements=["dedup_key"])


async def on_reconciliation_checked(ctx: Context, msg: Message) -> None:
    """An uncertain attempt past the reconciler's escalation bound: ``escalated`` webhooks, once
    per attempt (the check itself was recorded by ``outcomes`` just before)."""
    check = ReconciliationChecked.model_validate_json(msg.body)
    if not check.escalated:
        return
    async with ctx.engine.begin() as conn:
        row = await repository.get(conn, check.proposal_id)
        key = f"notify:escalated:{check.proposal_id}:{check.attempt_id}"
        if row is None or not await first_delivery(conn, inbox, key):
            return
        summary = summary_of(
            repository.view(row),
            "escalated",
            check.occurred_at,
            key,
            ctx.operations,
            ctx.settings.notify.web_url,
        )
        rows = await _webhook_rows(conn, summary)
        if rows:
            await conn.execute(_insert(rows))


#: each organization's webhooks: ``(subscription id, the events it wants)``
Subscribed = dict[str, list[tuple[str, list[str]]]]


#: ``_subscribers``: asked for each batch of events the notifier hears, so a hot statement
_SUBSCRIBERS = (
    f"SELECT organization_id, id, events FROM {subscriptions.fullname} "  # noqa: S608
    "WHERE organization_id = ANY($1::text[]) ORDER BY organization_id, id"
)


async def _subscribers(conn: AsyncConnection, organizations: Iterable[str]) -> Subscribed:
    """The webhooks of ``organizations``, in one query (one statement text whatever their
    number: an array, not an IN list, so one prepared statement serves every batch)."""
    found = await hot.fetch(conn, _SUBSCRIBERS, sorted(set(organizations)))
    subscribed: Subscribed = defaultdict(list)
    for org, sub_id, events in found:
        subscribed[org].append((sub_id, events))
    return subscribed


def _wanted(subscribed: Subscribed, organization_id: str, event: str) -> list[str]:
    """The organization's webhooks that want ``event``."""
    return [sub_id for sub_id, events in subscribed.get(organization_id, ()) if event in events]


def _webhook_rows_of(hooks: list[str], summary: Summary) -> list[dict[str, Any]]:
    return [
        _row(summary, "webhook", f"{summary.message_id}:{sub_id}", subscription_id=sub_id)
        for sub_id in hooks
    ]


async def _webhook_rows(conn: AsyncConnection, summary: Summary) -> list[dict[str, Any]]:
    subscribed = await _subscribers(conn, [summary.organization_id])
    return _webhook_rows_of(_wanted(subscribed, summary.organization_id, summary.event), summary)


async def _email_rows(
    ctx: Context, conn: AsyncConnection, event: ProposalEvent, summary: Summary, people: People
) -> list[dict[str, Any]]:
    recipients = await approvers(ctx, conn, event, people)
    rows = [
        _row(summary, "email", f"{summary.message_id}:notice:{user}", recipient=user, email=address)
        for user, address in recipients
    ]
    lead = timedelta(seconds=ctx.settings.notify.reminder_before_s)
    remind_at = event.proposal.expires_at - lead
    if lead and remind_at > datetime.now(UTC):
        rows += [
            _row(
                summary,
                "email",
                f"{summary.message_id}:reminder:{user}",
                recipient=user,
                email=address,
                kind="reminder",
                at=remind_at,
            )
            for user, address in recipients
        ]
    return rows


#: each organization's members with an address, and those who turned notices off, read once
#: for all the events of a batch
People = dict[str, tuple[list[Contact], set[str]]]


async def approvers(
    ctx: Context, conn: AsyncConnection, event: ProposalEvent, people: People
) -> list[tuple[str, str]]:
    """``(user_id, address)`` of each member who may approve and has not turned notices off
    (the organization's people from ``people`` if it holds them, else read and kept there)."""
    view = event.proposal
    if not isinstance(ctx.directory, Roster):
        return []
    try:
        op = ctx.operations.get(view.operation_kind, view.contract_version)
    except UnknownOperation:
        return []
    scope = Scope(
        organization_id=view.organization_id, section=view.section, resource_id=view.resource_id
    )
    org = view.organization_id
    if org not in people:
        muted = await muted_people(conn, org)
        people[org] = (await ctx.directory.contacts(conn, org), muted)
    contacts, muted = people[org]
    return [
        (c.user_id, c.email)
        for c in contacts
        if c.user_id not in muted
        and counts(c, view)
        and op.authorize(
            Actor(user_id=c.user_id, organization_id=c.organization_id, role=c.role), scope
        )
    ]


def counts(contact: Contact, view: ProposalView) -> bool:
    """Whether the proposal's frozen approval policy lets this person's approval count."""
    need = view.requirement
    if need is None:
        return True
    if not need.proposer_may_approve and contact.user_id == view.requested_by:
        return False
    return need.roles is None or contact.role in need.roles


async def muted_people(conn: AsyncConnection, organization_id: str) -> set[str]:
    rows = await conn.execute(
        select(preferences.c.user_id).where(
            preferences.c.organization_id == organization_id, preferences.c.email.is_(False)
        )
    )
    return {user for (user,) in rows}


def _row(
    summary: Summary,
    channel: str,
    dedup_key: str,
    *,
    subscription_id: str | None = None,
    recipient: str | None = None,
    email: str | None = None,
    kind: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    payload = {**summary.as_json(), "kind": kind or summary.event, "email": email}
    return {
        "dedup_key": dedup_key,
        "organization_id": summary.organization_id,
        "proposal_id": summary.proposal_id,
        "event": kind or summary.event,
        "channel": channel,
        "subscription_id": subscription_id,
        "recipient": recipient,
        "payload": payload,
        "next_attempt_at": at if at is not None else func.now(),
    }
