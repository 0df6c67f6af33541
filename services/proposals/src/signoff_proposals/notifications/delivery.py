"""The delivery loop: due rows out of ``notification_deliveries``, sent, and the result recorded.

A round takes due rows with ``SKIP LOCKED`` (replicas share the work) and moves their
``next_attempt_at`` a lease ahead before it commits, so a process that dies mid-send leaves the
row to be tried again once the lease is over — nothing is lost across a restart, and a row is
sent twice only when a process dies between a receiver's answer and recording it (receivers
dedupe by the body's ``id`` / the ``Signoff-Delivery`` header). Sending happens outside any
transaction. A failure waits ``backoff_base_s * 2**(attempts-1)`` (capped) before the next try;
after ``max_attempts`` failures the row is ``dead``: kept in the delivery log, never tried again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from signoff_proposals.notifications import metrics, payloads, signing
from signoff_proposals.notifications.settings import NotifyGroup

log = structlog.get_logger(__name__)

_CLAIM = text(
    "UPDATE proposals.notification_deliveries d "
    "SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => :lease) "
    "FROM (SELECT id FROM proposals.notification_deliveries "
    "      WHERE status = 'pending' AND next_attempt_at <= now() "
    "      ORDER BY next_attempt_at LIMIT :batch FOR UPDATE SKIP LOCKED) due "
    "WHERE d.id = due.id "
    "RETURNING d.id, d.channel, d.event, d.payload, d.attempts, d.recipient, d.subscription_id"
)
_SUBSCRIPTION = text(
    "SELECT url, format, secret FROM proposals.webhook_subscriptions WHERE id = :id"
)
_STILL_WANTED = text(
    "SELECT p.status = 'pending' AND coalesce(n.email, true) "
    "FROM proposals.proposals p LEFT JOIN proposals.notification_preferences n "
    "ON n.user_id = :user AND n.organization_id = p.organization_id WHERE p.id = :proposal"
)
_FINISH = text(
    "UPDATE proposals.notification_deliveries SET status = :status, finished_at = now(), "
    "last_error = :error, response_status = :code WHERE id = :id"
)
_RETRY = text(
    "UPDATE proposals.notification_deliveries SET next_attempt_at = now() + "
    "make_interval(secs => :wait), last_error = :error, response_status = :code WHERE id = :id"
)
_BACKLOG = text(
    "SELECT channel, count(*) FROM proposals.notification_deliveries "
    "WHERE status = 'pending' AND next_attempt_at <= now() GROUP BY channel"
)


class Undeliverable(Exception):
    """This attempt failed; ``code`` is the receiver's HTTP status when it answered."""

    def __init__(self, detail: str, code: int | None = None) -> None:
        super().__init__(detail)
        self.code = code


class Skip(Exception):
    """Nothing to send any more (the subscription was deleted, the proposal was decided)."""


@dataclass(frozen=True, slots=True)
class Due:
    id: int
    channel: str
    event: str
    payload: dict[str, Any]
    attempts: int
    recipient: str | None
    subscription_id: str | None


@dataclass
class Notifier:
    engine: AsyncEngine
    settings: NotifyGroup
    transport: httpx.AsyncBaseTransport | None = None

    _client: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    async def run(self) -> None:
        try:
            while True:
                try:
                    if await self.once() < self.settings.batch:
                        await asyncio.sleep(self.settings.interval_s)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("notifications.round_failed")
                    await asyncio.sleep(self.settings.interval_s)
        finally:
            if self._client is not None:
                await self._client.aclose()

    def _webhooks(self) -> httpx.AsyncClient:
        """The webhook client, made by the first webhook sent rather than at start: it holds
        httpcore and a TLS context loaded with the CA bundle (≈ 2.5 MB, issue 18), which a
        service with no webhook subscribed never needs."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self.settings.send_timeout_s, transport=self.transport
            )
        return self._client

    async def once(self) -> int:
        """One round: claim, send concurrently, record; the number of rows taken."""
        lease = self.settings.send_timeout_s * 3 + 5
        async with self.engine.begin() as conn:
            taken = [
                Due(**row._mapping)
                for row in await conn.execute(
                    _CLAIM, {"lease": lease, "batch": self.settings.batch}
                )
            ]
        await asyncio.gather(*(self._settle(due) for due in taken))
        await self._refresh_backlog()
        return len(taken)

    async def _settle(self, due: Due) -> None:
        send: Callable[[], Awaitable[int | None]] = (
            (lambda: self._post(due)) if due.channel == "webhook" else (lambda: self._mail(due))
        )
        try:
            code = await send()
        except Skip as skipped:
            await self._record(_FINISH, id=due.id, status="skipped", error=str(skipped), code=None)
        except Undeliverable as failed:
            await self._failed(due, str(failed)[:500], failed.code)
        else:
            metrics.SENT.labels(channel=due.channel).inc()
            await self._record(_FINISH, id=due.id, status="sent", error=None, code=code)

    async def _failed(self, due: Due, error: str, code: int | None) -> None:
        dead = due.attempts >= self.settings.max_attempts
        metrics.FAILED.labels(channel=due.channel, dead=str(dead).lower()).inc()
        log.warning(
            "notifications.attempt_failed", channel=due.channel, attempt=due.attempts, dead=dead
        )
        if dead:
            await self._record(_FINISH, id=due.id, status="dead", error=error, code=code)
            return
        wait = min(
            self.settings.backoff_base_s * 2 ** (due.attempts - 1), self.settings.backoff_max_s
        )
        await self._record(_RETRY, id=due.id, wait=wait, error=error, code=code)

    async def _post(self, due: Due) -> int:
        async with self.engine.connect() as conn:
            sub = (await conn.execute(_SUBSCRIPTION, {"id": due.subscription_id})).first()
        if sub is None:
            raise Skip("subscription_deleted")
        summary = payloads.Summary.from_json(_summary_part(due.payload))
        body_json = (
            payloads.slack_body(summary)
            if sub.format == "slack"
            else payloads.signoff_body(summary, due.id)
        )
        body = json.dumps(body_json, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "signoff-webhooks",
            "Signoff-Delivery": f"dlv_{due.id}",
            "Signoff-Event": f"proposal.{due.event}",
            signing.HEADER: signing.signature(sub.secret, int(time.time()), body),
        }
        try:
            answer = await self._webhooks().post(sub.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise Undeliverable(f"{type(exc).__name__}: {exc}") from None
        if not answer.is_success:
            raise Undeliverable(f"HTTP {answer.status_code}", answer.status_code)
        return answer.status_code

    async def _mail(self, due: Due) -> None:
        async with self.engine.connect() as conn:
            wanted = (
                await conn.execute(
                    _STILL_WANTED, {"user": due.recipient, "proposal": due.payload["proposal_id"]}
                )
            ).scalar_one_or_none()
        if not wanted:
            raise Skip("no_longer_waiting_or_muted")
        summary = payloads.Summary.from_json(_summary_part(due.payload))
        cfg = self.settings
        message = payloads.email(summary, due.event, cfg.mail_from, str(due.payload["email"]))
        # loaded by the first e-mail sent, not with the service: with e-mail off
        # (SIGNOFF_NOTIFY__EMAIL_ENABLED=false) it is never needed (issue 18, ≈ 0.8 MB)
        import aiosmtplib

        try:
            await aiosmtplib.send(
                message,
                hostname=cfg.smtp_host,
                port=cfg.smtp_port,
                username=cfg.smtp_user,
                password=cfg.smtp_password.get_secret_value() if cfg.smtp_password else None,
                start_tls=cfg.smtp_starttls,
                timeout=cfg.send_timeout_s,
            )
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise Undeliverable(f"{type(exc).__name__}: {exc}") from None
        return None

    async def _record(self, statement: Any, **params: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(statement, params)

    async def _refresh_backlog(self) -> None:
        async with self.engine.connect() as conn:
            counts: dict[str, int] = {ch: n for ch, n in await conn.execute(_BACKLOG)}
        for channel in ("webhook", "email"):
            metrics.BACKLOG.labels(channel=channel).set(counts.get(channel, 0))


def _summary_part(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in ("kind", "email")}
