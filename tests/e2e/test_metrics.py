"""Every metric in docs/metrics.md is exposed by its running service, and the lifecycle ones move
while a proposal goes from proposal to outcome (scraped before and after)."""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from assistants_kit import Person
from e2e_stack import Stack
from signoff_runtime.testing import wait_until

sys.path.insert(0, str(Path(__file__).parents[1] / "deploy"))
from deploy_files import (
    alert_exprs,
    base_name,
    dashboard_exprs,
    documented,
    external,
    metric_names,
)

pytestmark = pytest.mark.e2e

SERVICES = ("agent", "proposals", "executor", "reconciler")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


async def scrape(stack: Stack, service: str) -> tuple[set[str], dict[str, float]]:
    """``(families announced by # HELP, series name → sum over its labels)``."""
    response = await stack.http.get(f"{stack.url(service)}/metrics")
    response.raise_for_status()
    families: set[str] = set()
    totals: defaultdict[str, float] = defaultdict(float)
    for line in response.text.splitlines():
        if line.startswith("# HELP "):
            families.add(line.split()[2])
        elif (m := _SAMPLE.match(line)) and not line.startswith("#"):
            totals[m.group(1)] += float(m.group(3))
    return families, dict(totals)


def moved_series(name: str, kind: str) -> str:
    return f"{name}_count" if kind == "histogram" else name


async def scrape_all(stack: Stack) -> dict[str, tuple[set[str], dict[str, float]]]:
    return {s: await scrape(stack, s) for s in SERVICES}


async def test_documented_metrics_are_exposed_and_move(stack: Stack) -> None:
    docs = documented()
    before = await scrape_all(stack)
    for name, info in docs.items():
        for service in SERVICES if info["services"] == ["all"] else info["services"]:
            families, _ = before[service]
            assert name in families, f"{name} not on {service}"

    # a conversation's proposal: the agent hears only those (``signoff_agent_handbacks_total``)
    person = Person(stack, (await stack.seed())["organizations"][0])
    token = person.token
    _, proposal_id = await person.propose_in_conversation()
    assert (await stack.approve(token, proposal_id)).status_code == 200
    assert (await stack.settled(token, proposal_id))["status"] == "succeeded"

    lifecycle = {n: i for n, i in docs.items() if i["lifecycle"]}
    gauges = {n for n, i in lifecycle.items() if i["type"] == "gauge"}

    async def all_moved() -> dict[str, object] | None:
        after = await scrape_all(stack)
        still: list[str] = []
        for name, info in lifecycle.items():
            services = SERVICES if info["services"] == ["all"] else info["services"]
            series = moved_series(name, info["type"])
            if name in gauges:
                # a gauge must be present with a sample after the run (states, lag: may be 0)
                if not any(series in after[s][1] for s in services):
                    still.append(name)
            elif not any(
                after[s][1].get(series, 0.0) > before[s][1].get(series, 0.0) for s in services
            ):
                still.append(name)
        return None if still else {"after": after}

    try:
        await wait_until(all_moved, timeout=30.0, what="every lifecycle metric to move")
    except AssertionError:
        after = await scrape_all(stack)
        stuck = [
            n
            for n, i in lifecycle.items()
            if not any(
                after[s][1].get(moved_series(n, i["type"]), 0.0)
                > before[s][1].get(moved_series(n, i["type"]), 0.0)
                for s in SERVICES
            )
        ]
        raise AssertionError(f"lifecycle metrics that did not move: {stuck}") from None


async def test_state_gauge_counts_from_the_database(stack: Stack) -> None:
    async def agrees() -> bool | None:
        _, totals = await scrape(stack, "proposals")
        db = await stack.scalar("SELECT count(*) FROM proposals.proposals")
        return True if totals.get("signoff_proposals_in_state") == float(db) else None

    await wait_until(agrees, timeout=15.0, what="the state gauge to match the database")


async def test_dashboard_and_alerts_read_only_live_metrics(stack: Stack) -> None:
    live = set()
    for service in SERVICES:
        families, totals = await scrape(stack, service)
        live |= families | {base_name(n) for n in totals}
    live |= {f"{n}_total" for n in live}
    used = {base_name(n) for e in dashboard_exprs() + alert_exprs() for n in metric_names(e)}
    used -= external()  # Prometheus's own `up` and RabbitMQ's plugin: not signoff's to expose
    assert used <= live, f"not exposed by any running service: {sorted(used - live)}"
