"""The notifier makes its webhook client when a webhook is first due, not at start: the client
holds httpcore and a TLS context loaded with the CA bundle (≈ 2.5 MB of the service's memory,
issue 18), which a service with no webhook subscribed never needs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import cast

from signoff_proposals.notifications.delivery import Notifier
from signoff_proposals.notifications.settings import NotifyGroup
from sqlalchemy.ext.asyncio import AsyncEngine


class NothingDue:
    """An engine whose every statement finds no rows."""

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[NothingDue]:
        yield self

    connect = begin

    async def execute(self, *_: object) -> list[object]:
        return []


async def test_rounds_with_no_webhook_due_make_no_http_client() -> None:
    notifier = Notifier(cast(AsyncEngine, NothingDue()), NotifyGroup())
    assert await notifier.once() == 0
    assert await notifier.once() == 0
    assert notifier._client is None
