"""Per-service RabbitMQ users on the local broker, for ``make run`` (via ``signoff dev run``).

The same permission regexes as ``deploy/rabbitmq/definitions.json`` (``rabbit_definitions``): the
agent may not publish execution contracts or outcomes, only the proposals service writes to
``contracts`` (and ``amq.default``, to answer requests), only the executor and reconciler to
``outcomes``; ``<prefix>-cli`` is the operators' user (approval commands, dead-letter replays).
Users are named ``<prefix>-<service>`` with the password ``<service>-dev-password``; a service uses
its own user by connecting with ``SIGNOFF_AMQP__URL=amqp://signoff-agent:agent-dev-
password@127.0.0.1:5672/`` and ``SIGNOFF_AMQP__DECLARE_TOPOLOGY=false`` (the topology is then
declared by someone allowed to). Applying them needs ``rabbitmqctl`` on this machine (and the right
to use it); without it this is skipped with a note, never an error.
"""

from __future__ import annotations

import shutil
import subprocess

from signoff_runtime.topology import Topology

from signoff_cli.rabbit_definitions import USERS, permissions


def user_name(prefix: str, service: str) -> str:
    return f"{prefix}-{service}"


def commands(prefix: str = "signoff", vhost: str = "/") -> list[list[str]]:
    """``rabbitmqctl`` argument lists that create (or update) every service's user."""
    topo = Topology(prefix, 5)
    argv: list[list[str]] = []
    for service in USERS:
        name = user_name(prefix, service)
        perms = permissions(service, topo)
        argv += [
            ["add_user", name, f"{service}-dev-password"],
            ["change_password", name, f"{service}-dev-password"],
            [
                "set_permissions",
                "-p",
                vhost,
                name,
                perms["configure"],
                perms["write"],
                perms["read"],
            ],
        ]
    return argv


def apply(prefix: str = "signoff", vhost: str = "/", timeout_s: float = 30.0) -> str:
    """Create the users if ``rabbitmqctl`` is usable; returns what happened, for the console."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None:
        return "rabbitmq users: skipped (no rabbitmqctl here)"
    for args in commands(prefix, vhost):
        try:
            done = subprocess.run(
                [ctl, "-q", *args], capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return "rabbitmq users: skipped (rabbitmqctl did not answer)"
        if done.returncode != 0 and not (args[0] == "add_user" and "already" in done.stderr):
            return (
                f"rabbitmq users: skipped (rabbitmqctl {args[0]} refused: exit {done.returncode})"
            )
    return f"rabbitmq users: {', '.join(user_name(prefix, s) for s in USERS)} (vhost {vhost})"
