"""``signoff serve NAME``: find a service by its ``signoff.services`` entry point and run it.

Apart from the command group (``commands``) so that a service's process can get here without
typer and without the other commands' modules (``main``'s fast path): what a process imports it
keeps in memory for its whole life.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import EntryPoint, entry_points


def refuse_without_env(service: str) -> None:
    """End the process (exit code 2, one line, no traceback) unless ``SIGNOFF_ENV`` is set: an
    image or unit file that forgot to say what it is."""
    if not os.environ.get("SIGNOFF_ENV"):
        sys.stderr.write(
            f"signoff {service}: refusing to start: SIGNOFF_ENV is not set (prod, test or dev; "
            "`signoff dev run` sets dev)\n"
        )
        raise SystemExit(2)


def find(service: str) -> EntryPoint | None:
    found = {ep.name: ep for ep in entry_points(group="signoff.services")}
    return found.get(service)


def run(service: str, found: EntryPoint) -> None:
    """Run the service in the foreground until SIGTERM or Ctrl-C."""
    refuse_without_env(service)
    found.load()()
