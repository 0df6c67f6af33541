"""The operations catalogue: ``GET /v1/operations`` and ``GET /v1/operations/{kind}``.

What a client needs to propose without reading our code: for each operation the caller may
propose (the latest version of each kind; ``may_propose`` with the caller's current role, in
their organization), its kind, version, section, effect, a title and description per locale,
and the strict JSON Schema of its model-facing ``Request`` — the same schema the assistants give
the model (``strict_parameters``), so a tool generated from the catalogue (an MCP server, an
agent framework's function tool) asks exactly what ``POST /v1/operations/{kind}/propose``
accepts. An operation the caller may not propose is as unknown as one that does not exist (404).
The resource is not known here: ``may_propose`` is asked for the organization as a whole, and a
particular resource may still refuse at proposing.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from signoff_contracts.assistants import strict_parameters
from signoff_contracts.catalogue import Catalogue, OperationInfo
from signoff_contracts.operations import LOCALES, Actor, Membership, Scope
from signoff_runtime.members import Authorization, current_member_now
from signoff_runtime.problems import Problem, responses
from signoff_runtime.registry import UnknownOperation
from signoff_runtime.tokens import AGENT_AUDIENCE

from signoff_agent.proposing import Proposer

router = APIRouter()


def entry(op: Any) -> OperationInfo:
    return OperationInfo(
        kind=op.kind,
        version=op.version,
        section=op.section,
        resource=op.resource,
        effect=op.effect,
        title={loc: op.title_in(loc) for loc in LOCALES},
        description={loc: op.description_in(loc) for loc in LOCALES},
        request_schema=strict_parameters(op.Request),
        propose_path=f"/v1/operations/{op.kind}/propose",
    )


def _may_propose(op: Any, member: Membership) -> bool:
    actor = Actor(user_id=member.user_id, organization_id=member.organization_id, role=member.role)
    scope = Scope(organization_id=member.organization_id, section=op.section, resource_id="")
    return bool(op.may_propose(actor, scope))


async def _caller(request: Request, authorization: str | None) -> tuple[Proposer, Membership]:
    proposer: Proposer = request.app.state.proposer
    member = await current_member_now(
        proposer.auth, proposer.directory, proposer.engine, authorization, audience=AGENT_AUDIENCE
    )
    return proposer, member


@router.get("/v1/operations", response_model=Catalogue)
async def list_operations(request: Request, authorization: Authorization = None) -> Catalogue:
    """The operations the caller may propose, newest version of each kind, by kind."""
    proposer, member = await _caller(request, authorization)
    latest = {op.kind: proposer.operations.latest(op.kind) for op in proposer.operations}
    return Catalogue(
        items=[entry(op) for kind, op in sorted(latest.items()) if _may_propose(op, member)]
    )


@router.get("/v1/operations/{kind}", response_model=OperationInfo, responses=responses(404))
async def show_operation(
    kind: str, request: Request, authorization: Authorization = None
) -> OperationInfo:
    proposer, member = await _caller(request, authorization)
    try:
        op = proposer.operations.latest(kind)
    except UnknownOperation:
        op = None
    if op is None or not _may_propose(op, member):
        raise Problem(404, "unknown_operation", f"No operation is called {kind!r}.")
    return entry(op)
