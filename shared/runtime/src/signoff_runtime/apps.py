"""Which kind of ASGI app a service has: FastAPI's (it has an API) or plain Starlette's (only
probes and the scrape: the executor and the reconciler), without importing FastAPI to ask."""

from __future__ import annotations

import sys

from starlette.applications import Starlette


def is_fastapi(app: Starlette) -> bool:
    fastapi = sys.modules.get("fastapi")  # an app cannot be FastAPI's unless it is imported
    return fastapi is not None and isinstance(app, fastapi.FastAPI)
