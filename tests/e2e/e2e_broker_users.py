"""One broker user per role for tests, with the production permissions, on the tests' broker.

Users ``signoff-test-<role>`` get exactly the configure/write/read patterns of
``deploy/rabbitmq/definitions.json`` (``signoff_cli.rabbit_definitions.permissions``), made
prefix-agnostic: every test uses a queue prefix of its own, so the prefix becomes a pattern and
the rest stays literal. They are created once per session with ``rabbitmqctl`` and never deleted:
creating them again changes nothing, so two xdist workers (or two sessions) may race to create
them, and a worker's teardown cannot pull them from under the other.
"""

from __future__ import annotations

import json
import subprocess
from urllib.parse import quote, urlsplit, urlunsplit

from signoff_cli.rabbit_definitions import permissions
from signoff_runtime.testing.tools import needs_tool
from signoff_runtime.topology import ROLES, Role, Topology

USER_PREFIX = "signoff-test"
#: what ``SIGNOFF_AMQP__PREFIX`` may be (``AmqpSettings``), in place of the literal prefix
PREFIX_PATTERN = "[a-z][a-z0-9_-]{0,40}"
_PLACEHOLDER = "qqprefixqq"


def require() -> None:
    """``rabbitmqctl`` creates the users: without it the test is skipped (failed in CI)."""
    needs_tool("rabbitmqctl", "apt-get install rabbitmq-server: it creates the per-role users")


def user(role: Role) -> str:
    return f"{USER_PREFIX}-{role}"


def password(role: Role) -> str:
    return f"{USER_PREFIX}-{role}-password"


def patterns(role: Role) -> dict[str, str]:
    """The production patterns of ``role`` for any prefix."""
    production = permissions(role, Topology(_PLACEHOLDER))
    return {
        kind: production[kind].replace(_PLACEHOLDER, PREFIX_PATTERN)
        for kind in ("configure", "write", "read")
    }


def _ctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=60, check=False
    )


def ensure(vhost: str = "/") -> None:
    """Create (or bring up to date) every role's user; idempotent, safe to run concurrently."""
    for role in ROLES:
        added = _ctl("add_user", user(role), password(role))
        if added.returncode != 0 and "already" not in added.stderr + added.stdout:
            raise RuntimeError(f"rabbitmqctl add_user {user(role)}: {added.stderr.strip()}")
        for args in (
            ("change_password", user(role), password(role)),
            ("set_permissions", "-p", vhost, user(role), *patterns(role).values()),
        ):
            done = _ctl(*args)
            if done.returncode != 0:
                raise RuntimeError(f"rabbitmqctl {args[0]} {user(role)}: {done.stderr.strip()}")


def url(amqp_url: str, role: Role) -> str:
    """``amqp_url`` (the tests' broker) authenticated as ``role``'s user instead."""
    parts = urlsplit(amqp_url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(user(role), safe='')}:{quote(password(role), safe='')}@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, parts.fragment))


def users_setting() -> str:
    """``SIGNOFF_AMQP__USERS`` for these users."""
    return json.dumps({role: user(role) for role in ROLES})
