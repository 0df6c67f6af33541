"""Python's cyclic garbage collector, told once what a service's start left behind.

A service process imports some 1,100 modules before it serves: their functions, classes and
constants, about 120,000 tracked objects, live as long as the process. The collector's oldest
generation holds them all, and every full collection walks them again: 0.1 s each in the
proposals service under load (``gc.callbacks``, measured beside the benchmark's load), during
which its event loop answers nothing — a pause that lands on some request's latency — and about
2 % of the service's CPU. ``settle``, once the service is up, collects what the start left as
garbage and then moves everything that remains out of the collector's reach (``gc.freeze``):
later collections walk only what was made since. Those objects are still freed when their last
reference goes; only a reference cycle among them would now outlive its use, and a module's
objects form none that is released.

Only in a process that runs one service for its whole life (``signoff serve`` calls
``install``): a test process starts and stops services by the dozen, and freezing in it would
keep each one's cycles until the process ends.
"""

from __future__ import annotations

import gc

_installed = False


def install() -> None:
    """``settle`` does its work in this process from now on."""
    global _installed  # one switch for the process, set once at its start
    _installed = True


def settle() -> bool:
    """Once the service is up: collect, then freeze what is left; ``False`` where not
    installed (nothing done)."""
    if not _installed:
        return False
    gc.collect()
    gc.freeze()
    return True
