"""pytest plugin (auto-loaded by entry point): registers the markers the kit's tests carry.

Kept free of imports of the kit itself, so loading it costs nothing in runs that never use it,
and an adopter's ``--strict-markers`` run accepts the kit's tests without any configuration.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: talks to real PostgreSQL and/or RabbitMQ")
    config.addinivalue_line("markers", "conformance: a check of the operation conformance kit")
