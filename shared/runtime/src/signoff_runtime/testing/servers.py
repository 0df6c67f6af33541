"""Where the tests' PostgreSQL and RabbitMQ are.

``SIGNOFF_TEST_PG_URL`` / ``SIGNOFF_TEST_AMQP_URL`` name them; unset, the local services on
their default ports are used. Where neither is given nor reachable and Docker is, testcontainers
starts them (contributors' laptops). The machine's services are never touched beyond a fresh
database and fresh queue names, so a running ``make run`` is unaffected.
"""

from __future__ import annotations

import os
import shutil
import socket
from contextlib import ExitStack
from urllib.parse import urlparse

DEFAULT_PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
DEFAULT_AMQP = "amqp://guest:guest@127.0.0.1:5672/"


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url.replace("+asyncpg", ""))
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=1.0
        ):
            return True
    except OSError:
        return False


def _docker() -> bool:
    return shutil.which("docker") is not None and os.path.exists("/var/run/docker.sock")


def postgres_url(stack: ExitStack) -> str:
    if url := os.environ.get("SIGNOFF_TEST_PG_URL"):
        return url
    if _reachable(DEFAULT_PG, 5432) or not _docker():
        return DEFAULT_PG
    from testcontainers.postgres import PostgresContainer

    container = stack.enter_context(PostgresContainer("postgres:15", driver="asyncpg"))
    return str(container.get_connection_url())


def amqp_url(stack: ExitStack) -> str:
    if url := os.environ.get("SIGNOFF_TEST_AMQP_URL"):
        return url
    if _reachable(DEFAULT_AMQP, 5672) or not _docker():
        return DEFAULT_AMQP
    from testcontainers.rabbitmq import RabbitMqContainer

    container = stack.enter_context(RabbitMqContainer("rabbitmq:3.10-management"))
    params = container.get_connection_params()
    return f"amqp://guest:guest@{params.host}:{params.port}/"
