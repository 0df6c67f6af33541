"""The ``signoff`` entry point: ``signoff serve NAME`` straight to the service, the rest to typer.

A service's process (``signoff serve NAME``) runs one service for its whole life, and every module
it imports stays in its memory: the command group (``commands``: typer, the token issuer, the
database, dev, docs and status commands) and the other packages' groups (the web, the proposals
service, the club's seeding: ``signoff.cli`` entry points) are not loaded for it — ≈ 1.5 MB of
each service. Anything else, ``serve --help`` and an unknown service's name included, goes
through ``commands.app`` as before. ``app`` and ``mount_plugins`` are still reachable here (a
lazy attribute) for the tests and tools that drive the command group in-process.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) == 2 and argv[0] == "serve" and not argv[1].startswith("-"):
        from signoff_cli import serving

        serving.refuse_without_env(argv[1])
        found = serving.find(argv[1])
        if found is not None:
            serving.run(argv[1], found)
            return
    from signoff_cli import commands

    if argv[:1] != ["serve"]:
        commands.mount_plugins()
    sys.exit(commands.app())


def __getattr__(name: str) -> Any:
    if name in ("app", "mount_plugins"):
        from signoff_cli import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
