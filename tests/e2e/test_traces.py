"""OpenTelemetry: one trace, with a parent chain, from a person's turn to the outcome's hand-back.

Every service of a real stack exports its spans over OTLP/HTTP (configured only by the standard
``OTEL_*`` variables) to a receiver in the test. After a turn proposes, a person approves (a
request, and a trace, of its own) and the contract executes, the trace the turn started holds a
chain of spans, each the parent of the next, that runs agent → proposals → executor → proposals
→ agent: the proposal's request, the contract (its trace stored with the outbox row), the
outcome, and the event the agent hands back.
"""

from __future__ import annotations

import secrets

import pytest
from assistants_kit import Person, model_admin
from e2e_stack import Stack
from otlp_collector import OtlpCollector, Span
from signoff_runtime.testing import eventually

pytestmark = pytest.mark.e2e

COLLECTOR: OtlpCollector | None = None
EXPECTED = [
    "signoff-agent",
    "signoff-proposals",
    "signoff-executor",
    "signoff-proposals",
    "signoff-agent",
]


def extra_stack_env() -> dict[str, str]:
    """The conftest's hook: every process of this module's stack exports to the receiver."""
    global COLLECTOR
    COLLECTOR = COLLECTOR or OtlpCollector()
    return COLLECTOR.env()


def chains(spans: list[Span]) -> list[list[str]]:
    """For each span, the services from its root down to it (repeats collapsed)."""
    by_id = {s.span_id: s for s in spans}
    out = []
    for leaf in spans:
        services: list[str] = []
        span: Span | None = leaf
        seen: set[str] = set()
        while span is not None and span.span_id not in seen:
            seen.add(span.span_id)
            if not services or services[-1] != span.service:
                services.append(span.service)
            span = by_id.get(span.parent_id)
        out.append(services[::-1])
    return out


async def test_one_trace_with_a_parent_chain_runs_agent_proposals_executor_proposals_agent(
    stack: Stack,
) -> None:
    assert COLLECTOR is not None
    trace_id = secrets.token_hex(16)
    person = Person(stack, (await stack.seed())["organizations"][0])
    async with model_admin(stack, "club.order_demo"):
        conversation = await person.open()
        said = await stack.http.post(
            person.agent(f"/v1/conversations/{conversation}/messages"),
            json={"content": "Was this order charged correctly?"},
            headers={**person.headers, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"},
            timeout=60.0,
        )
    assert said.status_code == 200, said.text
    [card] = [m for m in said.json()["messages"] if m["code"] == "proposal_ready"]
    proposal_id = str(card["proposal_id"])
    assert (await person.approve(proposal_id)).status_code == 200
    assert (await stack.settled(person.token, proposal_id))["status"] == "succeeded"

    async def the_chain_is_exported() -> None:
        spans = COLLECTOR.trace(trace_id)
        assert EXPECTED in chains(spans), sorted({tuple(c) for c in chains(spans)})

    await eventually(the_chain_is_exported, timeout=30.0)
    spans = COLLECTOR.trace(trace_id)
    # the root is the turn's HTTP request, continuing the trace the client sent
    roots = [s for s in spans if s.parent_id not in {t.span_id for t in spans}]
    assert {r.service for r in roots} == {"signoff-agent"}, roots
    # each hop has spans of its own: no two services share a span id
    assert len({s.span_id for s in spans}) == len(spans)
