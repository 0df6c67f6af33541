"""The simulator's clock: wall time plus an offset tests can push forward.

The retention window is a day; tests cannot wait a day, so ``POST /_admin/clock`` advances
this clock instead, and the ledger only ever reads time through it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class OffsetClock:
    """UTC now, shifted by however far the clock has been advanced."""

    def __init__(self) -> None:
        self._offset = timedelta()

    def now(self) -> datetime:
        """The simulated present."""
        return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> datetime:
        """Jump forward (never back: time going backwards would un-expire keys)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self._offset += timedelta(seconds=seconds)
        return self.now()
