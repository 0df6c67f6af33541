"""Structured logs: JSON lines with the proposal id, never a secret.

Any key that names a credential is redacted by a processor, so a careless ``log.info(...,
token=token)`` cannot leak one.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from signoff_runtime import tracing

_SECRET_KEYS = re.compile(
    r"(token|secret|password|authorization|signing_key|private_key|api_key|card)", re.I
)


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        if _SECRET_KEYS.search(key):
            event[key] = "[redacted]"
    return event


def configure(service: str, level: str = "INFO", json_lines: bool = True) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer()
    )
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        tracing.add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(message)s")
    # per-message and per-request lines: httpx logs every provider call and webhook at INFO (a
    # line per refund, unstructured, written synchronously on the event loop); their failures
    # are logged by signoff with the attempt or delivery they belong to
    for noisy in ("faststream", "aiormq", "aio_pika", "uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
