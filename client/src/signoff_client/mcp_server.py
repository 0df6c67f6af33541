"""signoff as an MCP server: any MCP client's agent may propose; only a person decides.

Tools, listed per caller from the operations catalogue:

- ``propose_<kind>`` (dots become ``__``) for each operation the person may propose: described
  by the operation's title and description, its input ``{"resource_id", "request"}`` where
  ``request`` is exactly the operation's ``Request`` schema. A call stores a proposal and returns
  its id, status and the fixed preview a person will approve. It executes nothing.
- ``get_proposal`` — a proposal's status, preview and outcome.
- ``wait_for_decision`` — returns once a person decided (and, by default, the outcome is known),
  or after ``timeout_s``.

Authentication is a person's token: over stdio (a desktop client starts ``signoff-mcp``) from
``SIGNOFF_TOKEN``; over streamable HTTP (``signoff-mcp --http``) from each request's own
``Authorization: Bearer`` header, so every caller acts as themselves. Refusals come back as tool
errors carrying signoff's problem ``code`` (``forbidden``, ``invalid_request``, a reason code…).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from signoff_client.client import AsyncSignoffClient, Until
from signoff_client.errors import SignoffError, WaitTimeout
from signoff_client.models import Operation, Proposal

PREFIX = "propose_"
WAIT_MAX_S = 600.0


def tool_name(kind: str) -> str:
    return PREFIX + kind.replace(".", "__")


def kind_of(name: str) -> str:
    return name.removeprefix(PREFIX).replace("__", ".")


def propose_tool(op: Operation, locale: str = "en") -> types.Tool:
    return types.Tool(
        name=tool_name(op.kind),
        title=op.title.get(locale) or op.kind,
        description=(
            f"{op.description.get(locale) or op.title.get(locale) or op.kind} "
            "This proposes only: a person reviews and approves it in signoff, which executes it."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "resource_id": {"type": "string", "description": f"The {op.resource}'s id."},
                "request": op.request_schema,
            },
            "required": ["resource_id", "request"],
            "additionalProperties": False,
        },
    )


_ID = {"proposal_id": {"type": "string", "description": "The proposal's id (prp_…)."}}
READ_TOOLS = [
    types.Tool(
        name="get_proposal",
        description="A proposal's status, the preview a person approves, and its outcome.",
        input_schema={"type": "object", "properties": _ID, "required": ["proposal_id"]},
    ),
    types.Tool(
        name="wait_for_decision",
        description=(
            "Wait until a person has decided the proposal (and its outcome is known, unless "
            "until='decided'), or timeout_s passes. Returns the proposal."
        ),
        input_schema={
            "type": "object",
            "properties": {
                **_ID,
                "timeout_s": {"type": "number", "minimum": 1, "maximum": WAIT_MAX_S},
                "until": {"type": "string", "enum": ["decided", "finished"]},
            },
            "required": ["proposal_id"],
        },
    ),
]


def summary(proposal: Proposal | Any) -> dict[str, Any]:
    """What a tool answers about a proposal (never its raw arguments)."""
    view = proposal.model_dump(mode="json")
    keys = ("id", "status", "operation_kind", "resource_id", "preview", "outcome")
    out = {k: view.get(k) for k in keys}
    out["expires_at"] = view.get("expires_at")
    return out


def _result(data: dict[str, Any], error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
        is_error=error,
    )


def _refused(exc: SignoffError) -> types.CallToolResult:
    return _result({"error": exc.code, "status": exc.status, "title": exc.title}, error=True)


class SignoffMcp:
    """The MCP server over one signoff: which token speaks is decided per request."""

    def __init__(self, agent_url: str, proposals_url: str, token: str | None = None) -> None:
        self.agent_url, self.proposals_url, self.token = agent_url, proposals_url, token
        self.server: Server[Any] = Server(
            "signoff",
            instructions=(
                "Propose changes through signoff's tools; a person approves or declines each in "
                "signoff. Never assume a proposal ran: wait_for_decision tells you."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    def _client(self, ctx: Any) -> AsyncSignoffClient:
        token = self.token
        request = getattr(ctx, "request", None)
        header = request.headers.get("authorization", "") if request is not None else ""
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
        if not token:
            raise SignoffError(401, "unauthenticated", "No token: set SIGNOFF_TOKEN.", {})
        return AsyncSignoffClient(self.agent_url, self.proposals_url, token)

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        async with self._client(ctx) as signoff:
            operations = await signoff.operations()
        return types.ListToolsResult(tools=[*map(propose_tool, operations), *READ_TOOLS])

    async def call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        try:
            async with self._client(ctx) as signoff:
                return await self._call(signoff, params.name, args)
        except SignoffError as exc:
            return _refused(exc)

    async def _call(
        self, signoff: AsyncSignoffClient, name: str, args: dict[str, Any]
    ) -> types.CallToolResult:
        if name == "get_proposal":
            return _result(summary(await signoff.get(str(args["proposal_id"]))))
        if name == "wait_for_decision":
            timeout = min(float(args.get("timeout_s", 60)), WAIT_MAX_S)
            until: Until = "decided" if args.get("until") == "decided" else "finished"
            try:
                found = await signoff.wait(str(args["proposal_id"]), timeout, until)
            except WaitTimeout:
                found = await signoff.get(str(args["proposal_id"]))
                return _result({**summary(found), "waiting": True})
            return _result(summary(found))
        if name.startswith(PREFIX):
            proposed = await signoff.propose(
                kind_of(name), str(args.get("resource_id", "")), dict(args.get("request") or {})
            )
            preview = proposed.rendered_preview
            return _result(
                {
                    **summary(proposed.proposal),
                    "rendered_preview": preview.model_dump(mode="json") if preview else None,
                    "next": "A person must approve it in signoff; call wait_for_decision.",
                }
            )
        return _result({"error": "unknown_tool", "title": f"No tool {name!r}."}, error=True)


def main(argv: list[str] | None = None) -> None:
    """``signoff-mcp``: serve over stdio (default) or streamable HTTP (``--http``)."""
    parser = argparse.ArgumentParser(prog="signoff-mcp", description=__doc__.split("\n")[0])
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--host", default=os.environ.get("SIGNOFF_MCP_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("SIGNOFF_MCP_PORT", "8020")))
    options = parser.parse_args(argv)
    app = SignoffMcp(
        os.environ.get("SIGNOFF_AGENT_URL", "http://127.0.0.1:8001"),
        os.environ.get("SIGNOFF_PROPOSALS_URL", "http://127.0.0.1:8002"),
        os.environ.get("SIGNOFF_TOKEN") or None,
    )
    if options.http:
        import uvicorn

        starlette = app.server.streamable_http_app(host=options.host)
        uvicorn.run(starlette, host=options.host, port=options.port, log_level="warning")
        return
    asyncio.run(_stdio(app))


async def _stdio(app: SignoffMcp) -> None:
    async with stdio_server() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


if __name__ == "__main__":
    main()
