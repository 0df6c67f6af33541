"""The LangGraph graph: one node asks for approval with ``interrupt()``, then applies the draft.

This is LangGraph's documented human-in-the-loop shape: the node runs until ``interrupt``, the
checkpointer stores the thread, and ``Command(resume=...)`` runs the node again with the
decision, which then performs the same local mutation signoff's ``apply_draft`` makes (an
UPDATE of a broadcast-form row). Checkpoints use LangGraph's default durability.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from psycopg_pool import AsyncConnectionPool

SCHEMA = "bench_peer"
DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.forms (
    id text PRIMARY KEY, subject text NOT NULL DEFAULT '', body text NOT NULL DEFAULT '',
    revision int NOT NULL DEFAULT 0, applied_thread text,
    updated_at timestamptz NOT NULL DEFAULT now());
"""
_APPLY = (
    f"UPDATE {SCHEMA}.forms SET subject = %s, body = %s, revision = revision + 1, "  # noqa: S608
    "applied_thread = %s, updated_at = now() WHERE id = %s"
)


class Draft(TypedDict, total=False):
    thread_id: str
    form_id: str
    subject: str
    body: str
    approved: bool
    applied: bool


def build(pool: AsyncConnectionPool[Any]) -> Any:
    async def review_and_apply(state: Draft) -> Draft:
        decision = interrupt(
            {"form_id": state["form_id"], "subject": state["subject"], "body": state["body"]}
        )
        if not decision.get("approved"):
            return {"approved": False, "applied": False}
        async with pool.connection() as conn:
            await conn.execute(
                _APPLY, (state["subject"], state["body"], state["thread_id"], state["form_id"])
            )
        return {"approved": True, "applied": True}

    builder = StateGraph(Draft)
    builder.add_node("review_and_apply", review_and_apply)
    builder.add_edge(START, "review_and_apply")
    builder.add_edge("review_and_apply", END)
    return builder.compile(checkpointer=AsyncPostgresSaver(pool))
