"""What the figures were measured on: the machine, its load, and every version that matters."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from typing import Any

from signoff_bench.settings import REPO

PACKAGES = (
    "faststream",
    "aio-pika",
    "asyncpg",
    "sqlalchemy",
    "fastapi",
    "uvicorn",
    "pydantic",
    "langgraph",
    "langgraph-checkpoint-postgres",
    "psycopg",
)


def describe() -> dict[str, Any]:
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo", encoding="ascii") as mem:
        total_kb = int(mem.readline().split()[1])
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gb": round(total_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "load_at_start": os.getloadavg(),
    }


def versions(postgres: str, rabbitmq: str) -> dict[str, str]:
    found = {"python": platform.python_version(), "postgresql": postgres, "rabbitmq": rabbitmq}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    found["signoff"] = _commit()
    return found


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "services", "shared"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (+ uncommitted service changes)" if dirty else head
