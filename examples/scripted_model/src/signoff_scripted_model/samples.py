"""A reference script for authors, registered as ``sample.lookup_then_act``.

It plays an assistant with two tools — ``find_orders {"query"}`` answering
``{"items": [{"id", ...}]}``, and ``refund_order {"order_id", "reason"}`` — and shows the
three habits a domain script needs: it takes ids from tool results (never hard-coded), it
corrects itself when a tool error says how (an error with ``"allowed": [...]`` reasons), and
it explains an error it cannot fix instead of looping. Each turn is decided from the
conversation alone, latest news first.
"""

from __future__ import annotations

from signoff_scripted_model.conversation import (
    ToolError,
    last_tool_error,
    last_user_message,
    latest_results,
)
from signoff_scripted_model.reply import Reply
from signoff_scripted_model.request import ChatRequest
from signoff_scripted_model.script import script

FIRST_REASON = "missing_discount"


@script("sample.lookup_then_act")
def LOOKUP_THEN_ACT(request: ChatRequest) -> Reply:
    """Find the order the user means, refund it, report."""
    error = last_tool_error(request)
    if error is not None:
        return _after_error(error)
    latest = latest_results(request)
    if not latest:
        return Reply.call("find_orders", {"query": last_user_message(request)})
    result = latest[-1]
    if result.name == "find_orders":
        items = result.value.get("items", []) if isinstance(result.value, dict) else []
        if not items:
            return Reply.say(f"No order matches {result.arguments['query']!r}.")
        order_id = items[0]["id"]
        return Reply.call("refund_order", {"order_id": order_id, "reason": FIRST_REASON})
    return Reply.say(f"Refund of order {result.arguments['order_id']} requested.")


def _after_error(error: ToolError) -> Reply:
    """Retry once with a reason the tool said it accepts; otherwise explain."""
    allowed = error.details.get("allowed") or []
    tried = error.result.arguments if isinstance(error.result.arguments, dict) else {}
    if error.result.name == "refund_order" and allowed and tried.get("reason") != allowed[0]:
        return Reply.call("refund_order", {**tried, "reason": allowed[0]})
    return Reply.say(f"I could not do that: {error.message}")
