"""The agent's own metrics. Labels are sections, tools and results — never an id."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

MODEL_CALLS = Counter(
    "signoff_agent_model_calls_total",
    "Model calls, by result (ok or the failure code).",
    ["result"],
)
MODEL_TOKENS = Counter(
    "signoff_agent_model_tokens_total",
    "Tokens the model endpoint reported, by kind (prompt / completion).",
    ["kind"],
)
TURNS = Counter(
    "signoff_agent_turns_total",
    "Turns finished, by section and how they ended (answered, proposed, paused, …).",
    ["section", "ending"],
)
TURN_SECONDS = Histogram("signoff_agent_turn_seconds", "Wall time of one turn.", ["section"])
TOOL_CALLS = Counter(
    "signoff_agent_tool_calls_total",
    "Tool calls the model made, by tool and result (ok, invalid, halted).",
    ["tool", "result"],
)
HANDBACKS = Counter(
    "signoff_agent_handbacks_total",
    "Proposal and pause-point events handled, by event and whether they wrote a message.",
    ["event", "written"],
)
