"""``never``: "nothing more happens" is watched for, with a deadline — not slept on."""

from __future__ import annotations

import time

import pytest
from signoff_runtime.testing import never


async def test_never_fails_the_moment_the_unwanted_event_shows() -> None:
    started = time.monotonic()
    seen: list[str] = []

    async def late_duplicate() -> list[str]:
        if time.monotonic() - started > 0.1:
            seen.append("second copy")
        return seen

    with pytest.raises(AssertionError, match=r"a duplicate happened: \['second copy'\]"):
        await never(late_duplicate, within=5.0, interval=0.01, what="a duplicate")
    assert time.monotonic() - started < 2.0  # it did not wait out the window


async def test_never_returns_once_the_window_passed_without_it() -> None:
    looks = 0

    async def nothing() -> bool:
        nonlocal looks
        looks += 1
        return False

    started = time.monotonic()
    await never(nothing, within=0.2, interval=0.02)

    assert 0.2 <= time.monotonic() - started < 2.0
    assert looks > 2  # watched throughout, not looked at once
