"""``python -m signoff_scripted_model``: read settings from the environment and serve.

Unusable settings — or a default script nobody installed — end the process with exit code
2 and one readable line on stderr, before anything listens.
"""

from __future__ import annotations

import logging
import sys

import structlog
import uvicorn
from pydantic import ValidationError

from signoff_scripted_model.app import create_app
from signoff_scripted_model.registry import ScriptRegistry
from signoff_scripted_model.settings import Settings


def _configure_logging(level: str) -> None:
    """JSON lines on stderr, like the other services."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(message)s")
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
    )


def main() -> int:
    """Serve until interrupted; 2 when the settings are unusable."""
    try:
        settings = Settings()
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors()
        )
        sys.stderr.write(f"signoff_scripted_model: invalid settings: {reasons}\n")
        return 2
    _configure_logging(settings.log_level)
    registry = ScriptRegistry.discover()
    if not registry.knows(settings.script):
        known = ", ".join(registry.names())
        sys.stderr.write(
            f"signoff_scripted_model: SIGNOFF_MODEL_SCRIPT={settings.script!r} is no installed "
            f"script (installed: {known}; or say:<text>)\n"
        )
        return 2
    config = uvicorn.Config(
        create_app(settings, registry),
        host=settings.host,
        port=settings.port,
        ws="none",
        lifespan="off",
        log_level=settings.log_level,
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
