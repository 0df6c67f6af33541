"""Loading what ``deploy/`` and ``docs/`` hold, for the deploy checks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

_ROW = re.compile(r"^\| `(signoff_[a-z_]+)` \| (\w+) \| [^|]* \| ([^|]+) \| (yes|no) \|", re.M)
#: PromQL words that are not metric names
_PROMQL = {
    "sum", "max", "min", "by", "rate", "increase", "deriv", "histogram_quantile", "clamp_min",
    "min_over_time", "and", "or", "le", "without", "on", "ignoring", "absent", "time",
}  # fmt: skip
#: rows of docs/metrics.md's table of metrics scraped from others (Prometheus, RabbitMQ)
_EXTERNAL_ROW = re.compile(
    r"^\| `((?:rabbitmq_|up\b)[a-z_]*)` \| (\w+) \| [^|]* \| ([^|]+) \|", re.M
)
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def documented() -> dict[str, dict[str, Any]]:
    """``docs/metrics.md``: metric → type, services, lifecycle."""
    text = (ROOT / "docs/metrics.md").read_text()
    return {
        name: {
            "type": kind,
            "services": [s.strip() for s in services.split(",")],
            "lifecycle": lifecycle == "yes",
        }
        for name, kind, services, lifecycle in _ROW.findall(text)
    }


def external() -> set[str]:
    """``docs/metrics.md``'s metrics that are not signoff's own: ``up`` and RabbitMQ's."""
    return {name for name, _, _ in _EXTERNAL_ROW.findall((ROOT / "docs/metrics.md").read_text())}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (label matchers, strings and ranges removed)."""
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r'"[^"]*"', "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"(?<![\w.])\d+(\.\d+)?(e[-+]?\d+)?", "", expr)  # numbers, 1e-9 included
    return {w for w in _NAME.findall(expr) if w not in _PROMQL}


def base_name(series: str) -> str:
    """``x_bucket``/``x_sum``/``x_count`` → ``x`` (histograms are documented by base name)."""
    return re.sub(r"_(bucket|sum|count)$", "", series)


def dashboard_exprs() -> list[str]:
    board = json.loads((DEPLOY / "grafana/dashboards/signoff.json").read_text())
    return [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]


def alert_exprs() -> list[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
