"""glibc's allocator told to hand large freed blocks back: a service's peak memory under load.

glibc serves a request above its mmap threshold (128 KiB at first) from a mapping of its own,
unmapped when freed. But each time such a block is freed it *raises* the threshold to that
block's size (up to 32 MiB), so the next large buffers (a batch of outbox rows, a page of
proposals, a burst of message bodies) come from the heap instead, where small long-lived blocks
allocated among them keep the heap from shrinking. Measured under the benchmark's load
(``python -m signoff_bench.memory``, issue 18): fixed thresholds take the proposals service's
peak from 112 to 114 MB to 108 MB, and the others' by up to 3 MB.

``tune()`` fixes the mmap and trim thresholds at their starting 128 KiB (which also stops the
adjustment), as ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` would. An operator's own
``MALLOC_*`` variables win; on a C library other than glibc (Alpine's musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024
_ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune() -> bool:
    """Fix glibc's thresholds; ``False`` where it is not glibc or the environment set them."""
    if any(name in os.environ for name in _ENVIRONMENT):
        return False
    libc = ctypes.CDLL(None)  # the process's own symbols: its C library among them
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False
    return bool(  # mallopt answers 1 on success
        libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)
        and libc.mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES)
    )
