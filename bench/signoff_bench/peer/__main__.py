"""``python -m signoff_bench.peer`` (configured by ``BENCH_PEER_*``)."""

from __future__ import annotations

import asyncio

from signoff_bench.peer.server import main

if __name__ == "__main__":
    asyncio.run(main())
