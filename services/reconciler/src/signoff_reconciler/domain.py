"""When to ask again: exponential back-off, capped, from the number of checks already made."""

from __future__ import annotations


def backoff_s(checks_made: int, *, base_s: float, cap_s: float) -> float:
    """Delay before the next check after ``checks_made`` inconclusive ones (``>= 1``)."""
    exponent = max(checks_made - 1, 0)
    if exponent >= 64:  # 2**64 * base is past any cap; avoid float overflow on old checks
        return cap_s
    return float(min(cap_s, base_s * 2**exponent))
