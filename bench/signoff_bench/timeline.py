"""The timeline of one approval: each hop from the approve request to its event's confirm.

``make timeline`` (``BENCH_TIMELINE_N`` approvals, default 200, after ``BENCH_TIMELINE_WARMUP``
unreported ones, default 10; ``BENCH_TIMELINE_JSON`` names a file for every figure) starts
signoff alone as ``make bench`` does, with its spans written as JSON lines
(``OTEL_TRACES_EXPORTER=jsonl``, ``signoff_runtime.tracing``), and approves the club's local
operation (``email_broadcast.apply_draft``) one proposal at a time: the next approval
is sent only after the previous outcome was recorded — the harness hears the ``proposal.outcome``
event on a queue of its own — and ``BENCH_TIMELINE_GAP_MS`` (default 50) later, so every
approval finds the system idle. Then the services are stopped (which flushes their spans) and
each hop is read from its truest source:

- the span of the approve request (its start), the moments the services mark on their spans
  (``transaction.committed``, ``contract.claimed``, ``operation.executed``), the consumers'
  spans (FastStream's, starting when the handler chain takes the delivery), and each outbox
  relay round's span (started when the writer handed the rows over or the ``NOTIFY`` arrived;
  began, rows in hand, publishes started, every confirm back, marked sent), matched to the
  proposal by message id;
- the database's clock where the statement itself is the moment: ``decided_at`` (the claim's
  ``statement_timestamp()``), ``outcome_at`` (the recording statement's), and the outbox row's
  ``created_at`` (``now()``: when the approving transaction began).

Both clocks are this host's wall clock. The table gives each hop's time since the approve
request arrived and the gap from the hop before it (p50 / p99 over the approvals); hops beside the
path (a confirm arrives after the consumer already has the message) are measured from the hop they
follow. The path ends when the ``outcome`` fact is confirmed: no signoff queue hears it for a
proposal made through the machine-facing endpoint (the rig's) with no webhook, so its first
reader is the harness's own queue, which makes no span. ``python -m signoff_bench.timeline REF
[REF ...]`` runs the same against each commit's tree (as ``levers`` does), in the order given,
and prints them side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aio_pika

from signoff_bench.client import Connection
from signoff_bench.driver import percentile
from signoff_bench.levers import export
from signoff_bench.rig import Rig, rig
from signoff_bench.settings import load

Span = dict[str, Any]
_APPROVE = re.compile(r"/v1/proposals/([^/]+)/approve$")
_MOMENTS = """
SELECT p.id, p.status,
  (extract(epoch FROM p.decided_at) * 1e6)::int8 * 1000 AS decided,
  (extract(epoch FROM p.outcome_at) * 1e6)::int8 * 1000 AS recorded,
  (extract(epoch FROM c.created_at) * 1e6)::int8 * 1000 AS began,
  c.message_id AS contract, o.message_id AS outcome, e.message_id AS event
FROM proposals.proposals p
LEFT JOIN proposals.outbox c ON c.correlation_id = p.id AND c.routing_key = 'execution.contract'
LEFT JOIN executor.outbox o ON o.correlation_id = p.id AND o.routing_key = 'execution.outcome'
LEFT JOIN proposals.outbox e ON e.correlation_id = p.id AND e.routing_key = 'proposal.outcome'
WHERE p.id = ANY($1::text[])
"""


@dataclass
class Found:
    """One approval's sources: its database row and the spans that carried it."""

    row: dict[str, Any]
    spans: dict[str, Span | None]

    def start(self, key: str) -> int | None:
        span = self.spans.get(key)
        return None if span is None else int(span["start"])

    def end(self, key: str) -> int | None:
        span = self.spans.get(key)
        return None if span is None or span["end"] is None else int(span["end"])

    def event(self, key: str, name: str) -> int | None:
        span = self.spans.get(key)
        found = [t for n, t in (span or {}).get("events", []) if n == name]
        return int(found[0]) if found else None

    def db(self, column: str) -> int | None:
        value = self.row.get(column)
        return None if value is None else int(value)


@dataclass(frozen=True)
class Hop:
    name: str
    source: str
    at: Callable[[Found], int | None]
    #: beside the path: the hop its gap is measured from (else the path's hop before it)
    after: str | None = None


Moment = Callable[[Found], int | None]


def _start(key: str) -> Moment:
    return lambda f: f.start(key)


def _end(key: str) -> Moment:
    return lambda f: f.end(key)


def _event(key: str, name: str) -> Moment:
    return lambda f: f.event(key, name)


def _db(column: str) -> Moment:
    return lambda f: f.db(column)


def _relay(key: str, what: str) -> list[Hop]:
    return [
        Hop(f"{what}: relay woken", "relay span start (hand-over or NOTIFY)", _start(key)),
        Hop(f"{what}: relay round began", "relay span event", _event(key, "began")),
        Hop(
            f"{what}: row in hand",
            "relay span event (taken, or handed over)",
            _event(key, "selected"),
        ),
        Hop(f"{what}: publish started", "relay span event", _event(key, "publishing")),
    ]


def _beside(key: str, what: str) -> list[Hop]:
    published, confirmed = f"{what}: publish started", f"{what}: confirmed"
    return [
        Hop(confirmed, "relay span event", _event(key, "confirmed"), after=published),
        Hop(f"{what}: marked sent", "relay span end", _end(key), after=confirmed),
    ]


COMMITTED = "transaction.committed"
REQUEST, CONSUMED = "request span event", "consumer span event"
PATH: tuple[Hop, ...] = (
    Hop("approve received", "proposals: request span start", _start("approve")),
    Hop("approval began", "proposals.outbox.created_at (db now())", _db("began")),
    Hop("claim", "proposals.decided_at (db statement)", _db("decided")),
    Hop("claim + contract row committed", REQUEST, _event("approve", COMMITTED)),
    *_relay("contract_relay", "contract"),
    Hop("executor received", "executor: consumer span start", _start("executor")),
    Hop("executor claimed", CONSUMED, _event("executor", "contract.claimed")),
    Hop("executed", CONSUMED, _event("executor", "operation.executed")),
    Hop("outcome row committed", CONSUMED, _event("executor", COMMITTED)),
    *_relay("outcome_relay", "outcome"),
    Hop("proposals received", "proposals: consumer span start", _start("recording")),
    Hop("recorded", "proposals.outcome_at (db statement)", _db("recorded")),
    Hop("recorded + event row committed", CONSUMED, _event("recording", COMMITTED)),
    *_relay("event_relay", "event"),
)
BESIDE: tuple[Hop, ...] = (
    Hop("approve answered", "request span end", _end("approve"), "claim + contract row committed"),
    *_beside("contract_relay", "contract"),
    Hop("executor acked", "consumer span end", _end("executor"), "outcome row committed"),
    *_beside("outcome_relay", "outcome"),
    *_beside("event_relay", "event"),
)
#: the issue's measure: the claim statement to the recording statement (one clock)
SPANS = {
    "claim → outcome recorded": ("claim", "recorded"),
    "claim committed → recorded committed": (
        "claim + contract row committed",
        "recorded + event row committed",
    ),
    # the fact leaves signoff: no signoff queue hears a machine-made proposal's ``outcome`` (the
    # agent hears a conversation's, the notifier what a webhook wants), so it ends here
    "approve received → event confirmed": ("approve received", "event: confirmed"),
}


@dataclass
class Timeline:
    label: str
    found: list[Found]
    load: tuple[tuple[float, float, float], tuple[float, float, float]]
    notes: list[str] = field(default_factory=list)

    def moments(self, hop: Hop) -> list[int | None]:
        return [hop.at(f) for f in self.found]

    def gaps_ms(self, first: Hop, second: Hop) -> list[float]:
        return [
            (b - a) / 1e6
            for a, b in zip(self.moments(first), self.moments(second), strict=True)
            if a is not None and b is not None
        ]


def _hop(name: str) -> Hop:
    return next(h for h in (*PATH, *BESIDE) if h.name == name)


def _p(values: list[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 99):.1f}" if values else "-"


def table(t: Timeline) -> str:
    """Markdown: each hop's time since the request arrived and its gap, p50 / p99 ms."""
    origin = PATH[0]
    lines = [
        f"{t.label}: {len(t.found)} approvals one at a time; load average (1, 5, 15 min) "
        f"{', '.join(f'{x:.2f}' for x in t.load[0])} → {', '.join(f'{x:.2f}' for x in t.load[1])}.",
        "",
        "| hop | source | since approve received p50 / p99 ms | gap p50 / p99 ms | from |",
        "|---|---|---|---|---|",
    ]
    previous: Hop | None = None
    for hop in (*PATH, *BESIDE):
        ref = _hop(hop.after) if hop.after else previous
        gap = _p(t.gaps_ms(ref, hop)) if ref is not None else "-"
        lines.append(
            f"| {hop.name} | {hop.source} | {_p(t.gaps_ms(origin, hop))} | {gap} | "
            f"{ref.name if ref is not None else ''} |"
        )
        if hop.after is None:
            previous = hop
    lines.append("")
    for name, (a, b) in SPANS.items():
        lines.append(f"- {name}: p50 / p99 **{_p(t.gaps_ms(_hop(a), _hop(b)))} ms**")
    lines.extend(f"- {note}" for note in t.notes)
    return "\n".join(lines)


def figures(t: Timeline) -> dict[str, Any]:
    """Every hop's figures (ms), for ``BENCH_TIMELINE_JSON``: how many approvals had the hop,
    p50 and p99 since the request arrived, and of the gap from the hop it follows."""
    origin, hops = PATH[0], {}
    previous: Hop | None = None
    for hop in (*PATH, *BESIDE):
        ref = _hop(hop.after) if hop.after else previous
        since = t.gaps_ms(origin, hop)
        gaps = t.gaps_ms(ref, hop) if ref is not None else []
        hops[hop.name] = {
            "source": hop.source,
            "n": len(since),
            "since": [percentile(since, 50), percentile(since, 99)],
            "gap": [percentile(gaps, 50), percentile(gaps, 99)] if gaps else None,
            "from": ref.name if ref is not None else None,
        }
        if hop.after is None:
            previous = hop
    spans = {name: t.gaps_ms(_hop(a), _hop(b)) for name, (a, b) in SPANS.items()}
    return {
        "label": t.label,
        "approvals": len(t.found),
        "load": t.load,
        "hops": hops,
        "spans": {k: [percentile(v, 50), percentile(v, 99)] for k, v in spans.items()},
    }


def side_by_side(timelines: list[Timeline]) -> str:
    """Each hop's gap (p50 / p99 ms) for each run, in columns."""
    head = " | ".join(t.label for t in timelines)
    lines = [f"| hop | {head} |", "|---|" + "---|" * len(timelines)]
    previous: Hop | None = None
    for hop in PATH:
        if previous is not None:
            cells = " | ".join(_p(t.gaps_ms(previous, hop)) for t in timelines)
            lines.append(f"| {previous.name} → {hop.name} | {cells} |")
        previous = hop
    for name, (a, b) in SPANS.items():
        cells = " | ".join(f"**{_p(t.gaps_ms(_hop(a), _hop(b)))}**" for t in timelines)
        lines.append(f"| **{name}** | {cells} |")
    return "\n".join(lines)


class Outcomes:
    """The ``proposal.outcome`` events, heard on a queue of the harness's own (exclusive,
    not durable: the services' own queues are untouched)."""

    def __init__(self) -> None:
        self._heard: dict[str, asyncio.Event] = {}

    def _event(self, proposal_id: str) -> asyncio.Event:
        return self._heard.setdefault(proposal_id, asyncio.Event())

    @contextlib.asynccontextmanager
    async def listening(self, amqp_url: str, prefix: str) -> AsyncIterator[Outcomes]:
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(exclusive=True, auto_delete=True)
            await queue.bind(f"{prefix}.events", routing_key="proposal.outcome")

            async def heard(msg: aio_pika.abc.AbstractIncomingMessage) -> None:
                if msg.correlation_id:
                    self._event(msg.correlation_id).set()

            await queue.consume(heard, no_ack=True)
            yield self

    async def wait(self, proposal_id: str, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._event(proposal_id).wait(), timeout)


async def approve_one_by_one(r: Rig, ids: list[str], gap_s: float) -> None:
    conn = Connection(r.stack.url("proposals"), r.signoff.club.headers)
    try:
        async with Outcomes().listening(r.amqp_url, r.stack.prefix) as outcomes:
            for pid in ids:
                status, body = await conn.request("POST", f"/v1/proposals/{pid}/approve")
                if status != 200:
                    raise AssertionError(f"approving {pid}: {status} {body[:200]!r}")
                await outcomes.wait(pid)
                await asyncio.sleep(gap_s)  # the tail (marking sent, the hand-back) settles
    finally:
        await conn.close()


def read_spans(folder: Path) -> Iterable[Span]:
    for path in sorted(folder.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            yield from (json.loads(line) for line in lines if line.strip())


def match(rows: list[dict[str, Any]], spans: Iterable[Span]) -> list[Found]:
    """Each approval's spans: by the proposal id in the request's path, by message id else."""
    approvals: dict[str, Span] = {}
    consumed: dict[tuple[str, str], Span] = {}
    relayed: dict[str, Span] = {}
    for span in spans:
        attrs = span["attributes"]
        if span["name"].startswith("outbox.relay"):
            for mid in attrs.get("signoff.outbox.message_ids", []):
                relayed.setdefault(mid, span)  # the first round that carried it
        elif span["name"].endswith(" process") and "messaging.message.id" in attrs:
            key = (span["service"], attrs["messaging.message.id"])
            if key not in consumed or span["start"] < consumed[key]["start"]:
                consumed[key] = span
        elif found := _APPROVE.search(str(attrs.get("url.path") or attrs.get("http.target", ""))):
            if span["parent_id"] is None or "http.route" in attrs:
                approvals.setdefault(found.group(1), span)
    return [
        Found(
            row,
            {
                "approve": approvals.get(row["id"]),
                "contract_relay": relayed.get(row["contract"] or ""),
                "executor": consumed.get(("signoff-executor", row["contract"] or "")),
                "outcome_relay": relayed.get(row["outcome"] or ""),
                "recording": consumed.get(("signoff-proposals", row["outcome"] or "")),
                "event_relay": relayed.get(row["event"] or ""),
            },
        )
        for row in rows
    ]


async def measure(label: str, n: int, warmup: int, gap_s: float) -> Timeline:
    config = replace(load(), doc=None, json_out=None, profile=False)
    traces = Path(tempfile.mkdtemp(prefix="signoff-timeline-"))
    env = {
        "OTEL_TRACES_EXPORTER": "jsonl",
        "SIGNOFF_TRACES_DIR": str(traces),
        "OTEL_BSP_SCHEDULE_DELAY": "1000",
    }
    async with rig(config, sides=False, env=env) as r:
        ids = await r.signoff.prepare(warmup + n)
        await _until_quiet(r)
        before = os.getloadavg()
        await approve_one_by_one(r, ids, gap_s)
        after = os.getloadavg()
        rows = [dict(x) for x in await r.probe.fetch(_MOMENTS, ids[warmup:])]
        await asyncio.to_thread(r.stack.stop)  # each service flushes its spans as it stops
    order = {pid: i for i, pid in enumerate(ids)}
    rows.sort(key=lambda row: order[row["id"]])
    found = match(rows, read_spans(traces))
    statuses = {row["status"] for row in rows}
    notes = [f"statuses: {', '.join(sorted(statuses))}; spans in {traces}"]
    return Timeline(label, found, (before, after), notes)


async def _until_quiet(r: Rig, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not await r.signoff.quiet():
        if time.monotonic() > deadline:
            raise AssertionError(f"the system did not go quiet within {timeout}s")
        await asyncio.sleep(0.2)


async def at_ref(ref: str, n: int, warmup: int, gap_s: float) -> Timeline:
    """``measure`` with ``ref``'s tree ahead of the editable installs (``levers.export``)."""
    with tempfile.TemporaryDirectory(prefix="signoff-timeline-tree-") as tree:
        base = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [export(ref, Path(tree)), base]))
        try:
            return await measure(ref, n, warmup, gap_s)
        finally:
            os.environ["PYTHONPATH"] = base


def main() -> None:
    n = int(os.environ.get("BENCH_TIMELINE_N", "200"))
    warmup = int(os.environ.get("BENCH_TIMELINE_WARMUP", "10"))
    gap_s = float(os.environ.get("BENCH_TIMELINE_GAP_MS", "50")) / 1000
    out = os.environ.get("BENCH_TIMELINE_JSON")
    timelines = []
    refs: list[str | None] = [*sys.argv[1:]] or [None]
    for ref in refs:
        found = asyncio.run(
            measure("working tree", n, warmup, gap_s)
            if ref is None
            else at_ref(ref, n, warmup, gap_s)
        )
        timelines.append(found)
        sys.stdout.write(table(found) + "\n\n")
        sys.stdout.flush()
    if len(timelines) > 1:
        sys.stdout.write(side_by_side(timelines) + "\n")
    if out:
        Path(out).write_text(json.dumps([figures(t) for t in timelines], indent=2))


if __name__ == "__main__":
    main()
