"""Waiting on a condition with a deadline — never sleeping and hoping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_until(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Return the first truthy value ``probe`` gives (never its ``None``); fail with ``what``
    after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last={last!r})")
        await asyncio.sleep(interval)


async def eventually(
    check: Callable[[], Awaitable[None]], *, timeout: float = 15.0, interval: float = 0.05
) -> None:
    """Retry an asserting ``check`` until it passes; re-raise its last failure at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)


async def never(
    probe: Callable[[], Awaitable[object]],
    *,
    within: float,
    interval: float = 0.05,
    what: str = "the unwanted event",
) -> None:
    """Watch for an event that must not happen: fail the moment ``probe`` is truthy (with its
    value), return once ``within`` seconds passed without it. For "nothing more happens" —
    a late duplicate, a second effect — in place of a sleep followed by one look."""
    deadline = time.monotonic() + within
    while True:
        seen = await probe()
        if seen:
            raise AssertionError(f"{what} happened: {seen!r}")
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(interval)
