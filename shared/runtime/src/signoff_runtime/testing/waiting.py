"""Waiting on a condition with a deadline — never sleeping and hoping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def wait_until(
    probe: Callable[[], Awaitable[T]],
    *,
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Return the first truthy value ``probe`` gives; fail with ``what`` after ``timeout``."""
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
