"""``/v1/webhooks`` (an organization's subscriptions, managers only) and a person's preferences.

The organization comes from the token, never from a body or a path: another organization's
subscription is "not found", like another organization's proposal. A subscription's secret is
made here and shown once, in the answer to its creation; reads never show it again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field
from signoff_contracts.ids import new_id
from signoff_runtime.members import Caller, Reader
from signoff_runtime.problems import Problem, responses
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from signoff_proposals.context import Context
from signoff_proposals.notifications import bindings, signing
from signoff_proposals.notifications.tables import deliveries, preferences, subscriptions

Event = Literal["created", "decided", "executing", "outcome", "superseded", "expired", "escalated"]
LOG_SIZE = 100


class NewWebhook(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(description="Where each event is POSTed (http or https).")
    format: Literal["signoff", "slack"] = Field(
        default="signoff",
        description="`signoff`: the JSON event; `slack`: a Slack incoming-webhook message.",
    )
    events: list[Event] = Field(min_length=1, max_length=7)
    description: str = Field(default="", max_length=200)


class Webhook(BaseModel):
    id: str
    url: str
    format: str
    events: list[str]
    description: str
    created_by: str
    created_at: datetime


class CreatedWebhook(Webhook):
    secret: str = Field(description="The signing secret, shown this once.")


class WebhookPage(BaseModel):
    items: list[Webhook]
    next_cursor: str | None = None


class Delivery(BaseModel):
    id: str
    proposal_id: str
    event: str
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    response_status: int | None
    created_at: datetime
    finished_at: datetime | None


class DeliveryPage(BaseModel):
    items: list[Delivery]
    next_cursor: str | None = None


class Preferences(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: bool = Field(description="E-mail me when a proposal waits for my approval.")


_PUBLIC = [c for c in subscriptions.c if c.name != "secret" and c.name != "organization_id"]


def router(ctx: Context) -> APIRouter:
    api = APIRouter(tags=["notifications"])
    managers = set(ctx.settings.notify.manager_roles)

    def manager(reader: Reader) -> None:
        if reader.member.role not in managers:
            raise Problem(403, "forbidden", "Only managers manage webhooks.")

    @api.post(
        "/v1/webhooks",
        status_code=201,
        operation_id="create_webhook",
        responses=responses(403, 503),
    )
    async def create_webhook(body: NewWebhook, reader: Caller) -> CreatedWebhook:
        """Subscribe a URL to the organization's proposal events; the answer holds the secret."""
        manager(reader)
        row = {
            "id": new_id("whk"),
            "organization_id": reader.organization_id,
            "url": str(body.url),
            "format": body.format,
            "events": sorted(set(body.events)),
            "secret": signing.new_secret(),
            "description": body.description,
            "created_by": reader.user_id,
        }
        async with ctx.engine.begin() as conn:
            try:  # before the row commits: every event published after this answer is heard
                await bindings.bind(ctx, conn, row["events"])
            except bindings.BROKER_FAILURES as exc:
                raise Problem(
                    503, "temporarily_unavailable", "The broker could not be reached; try again."
                ) from exc
            stored = (
                await conn.execute(insert(subscriptions).values(row).returning(*subscriptions.c))
            ).one()
        return CreatedWebhook.model_validate(dict(stored._mapping))

    @api.get("/v1/webhooks", operation_id="list_webhooks")
    async def list_webhooks(reader: Caller) -> WebhookPage:
        """The organization's subscriptions (without their secrets)."""
        manager(reader)
        rows = await reader.conn.execute(
            select(*_PUBLIC)
            .where(subscriptions.c.organization_id == reader.organization_id)
            .order_by(subscriptions.c.id)
        )
        return WebhookPage(items=[Webhook.model_validate(dict(r._mapping)) for r in rows])

    @api.get("/v1/webhooks/{webhook_id}", operation_id="get_webhook")
    async def get_webhook(webhook_id: str, reader: Caller) -> Webhook:
        manager(reader)
        return Webhook.model_validate(await _owned(reader, webhook_id))

    @api.delete("/v1/webhooks/{webhook_id}", status_code=204, operation_id="delete_webhook")
    async def delete_webhook(webhook_id: str, reader: Caller) -> Response:
        """Unsubscribe; deliveries not yet sent are skipped."""
        manager(reader)
        await _owned(reader, webhook_id)
        async with ctx.engine.begin() as conn:
            await conn.execute(delete(subscriptions).where(subscriptions.c.id == webhook_id))
        # the kinds nobody wants now, an event less per proposal each; if it cannot, the delete
        # stands all the same and the next start or delete unbinds them
        await bindings.settled(ctx)
        return Response(status_code=204)

    @api.get("/v1/webhooks/{webhook_id}/deliveries", operation_id="list_webhook_deliveries")
    async def webhook_deliveries(webhook_id: str, reader: Caller) -> DeliveryPage:
        """The delivery log: the latest deliveries, newest first, dead ones included."""
        manager(reader)
        await _owned(reader, webhook_id)
        rows = await reader.conn.execute(
            select(deliveries)
            .where(deliveries.c.subscription_id == webhook_id)
            .order_by(deliveries.c.id.desc())
            .limit(LOG_SIZE)
        )
        return DeliveryPage(items=[_delivery(r._mapping) for r in rows])

    @api.post(
        "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
        operation_id="retry_webhook_delivery",
    )
    async def retry_delivery(webhook_id: str, delivery_id: str, reader: Caller) -> Delivery:
        """Send a dead delivery again (after the endpoint is fixed): attempts start over."""
        manager(reader)
        await _owned(reader, webhook_id)
        number = delivery_id.removeprefix("dlv_")
        async with ctx.engine.begin() as conn:
            row = (
                await conn.execute(
                    update(deliveries)
                    .where(
                        deliveries.c.id == (int(number) if number.isdigit() else -1),
                        deliveries.c.subscription_id == webhook_id,
                        deliveries.c.status == "dead",
                    )
                    .values(status="pending", attempts=0, next_attempt_at=func.now())
                    .returning(*deliveries.c)
                )
            ).first()
        if row is None:
            raise Problem(404, "not_found", "No dead delivery with this id.")
        return _delivery(row._mapping)

    @api.get("/v1/notifications/preferences", operation_id="get_notification_preferences")
    async def get_preferences(reader: Caller) -> Preferences:
        """Whether the caller gets e-mail notices in this organization (yes unless turned off)."""
        found = await reader.conn.execute(
            select(preferences.c.email).where(
                preferences.c.user_id == reader.user_id,
                preferences.c.organization_id == reader.organization_id,
            )
        )
        return Preferences(email=found.scalar_one_or_none() is not False)

    @api.put("/v1/notifications/preferences", operation_id="set_notification_preferences")
    async def set_preferences(body: Preferences, reader: Caller) -> Preferences:
        """Turn the caller's e-mail notices on or off (this organization only)."""
        row = {"user_id": reader.user_id, "organization_id": reader.organization_id}
        async with ctx.engine.begin() as conn:
            await conn.execute(
                insert(preferences)
                .values(**row, email=body.email)
                .on_conflict_do_update(
                    index_elements=["user_id", "organization_id"],
                    set_={"email": body.email, "updated_at": func.now()},
                )
            )
        return body

    return api


async def _owned(reader: Reader, webhook_id: str) -> dict[str, Any]:
    row = (
        await reader.conn.execute(
            select(*_PUBLIC).where(
                subscriptions.c.id == webhook_id,
                subscriptions.c.organization_id == reader.organization_id,
            )
        )
    ).first()
    if row is None:
        raise Problem(404, "not_found", "No such webhook.")
    return dict(row._mapping)


def _delivery(row: Any) -> Delivery:
    return Delivery.model_validate({**row, "id": f"dlv_{row['id']}"})
