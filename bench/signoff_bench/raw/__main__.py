"""``python -m signoff_bench.raw front|executor|listener`` (configured by ``BENCH_RAW_*``)."""

from __future__ import annotations

import asyncio
import sys

from signoff_bench.raw.pipeline import main

if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else ""
    if role not in ("front", "executor", "listener"):
        raise SystemExit("usage: python -m signoff_bench.raw front|executor|listener")
    asyncio.run(main(role))
