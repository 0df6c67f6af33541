"""glibc's thresholds are fixed by ``signoff serve``, unless the environment set them."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = """
import ctypes, sys
from signoff_runtime import allocator
print(allocator.tune())
libc = ctypes.CDLL(None)
# a freed 1 MiB block raises glibc's dynamic threshold; a fixed one stays, so the next 256 KiB
# block is a mapping of its own (mallinfo2's hblks counts them) rather than heap
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(1 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(256 * 1024)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


def _probe(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=clean | env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_large_block_is_mapped_on_its_own_after_tuning() -> None:
    assert _probe() == ["True", "1"]


def test_the_operators_own_setting_wins() -> None:
    # their 1 MiB threshold, not ours: the 256 KiB block comes from the heap
    assert _probe(MALLOC_MMAP_THRESHOLD_=str(1 << 20)) == ["False", "0"]
