"""Reading and changing an organization's approval policies: one use case for HTTP and the CLI.

A policy is checked against the operation it governs before it is saved (``domain.problems``:
every condition on a fact the operation declares, with a value of its type); a refused policy
stores nothing. Saving is a new version — the old ones stay as the record of who changed what.
"""

from __future__ import annotations

from typing import Any

import structlog
from signoff_contracts.operations import Actor, Scope
from signoff_runtime.registry import Operations
from sqlalchemy.ext.asyncio import AsyncConnection

from signoff_proposals.policies import domain
from signoff_proposals.policies import repository as policies

log = structlog.get_logger(__name__)


class PolicyRefused(ValueError):
    """The policy cannot be saved for its operation: ``problems`` says why, rule by rule."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


async def save(
    conn: AsyncConnection,
    operations: Operations,
    organization_id: str,
    kind: str,
    policy: domain.Policy,
    set_by: str,
) -> policies.Version:
    """Check ``policy`` against the newest installed version of ``kind`` and store it as the
    next version (``UnknownOperation`` for a kind that is not installed)."""
    op = operations.latest(kind)
    if found := domain.problems(policy, op.fact_types()):
        raise PolicyRefused(found)
    saved = await policies.save(conn, organization_id, kind, policy, set_by)
    log.info(
        "policy.changed",
        organization_id=organization_id,
        kind=kind,
        version=saved.version,
        set_by=set_by,
    )
    return saved


def may_manage(operations: Operations, actor: Actor, kind: str | None = None) -> bool:
    """Who may see and change policies: those the operation itself would let approve (for
    ``kind``), or for the list, those any installed operation would."""
    chosen = [operations.latest(kind)] if kind is not None else list(operations)
    return any(
        op.authorize(
            actor, Scope(organization_id=actor.organization_id, section=op.section, resource_id="")
        )
        for op in chosen
    )


def shown(operations: Operations, kind: str, found: policies.Version | None) -> dict[str, Any]:
    """A kind's policy as the API and the CLI show it: the rules in force (none: the default),
    their version, and the facts its operation lets a rule test."""
    op = operations.latest(kind)
    policy = found.policy if found is not None else domain.Policy()
    return {
        "operation_kind": kind,
        "version": found.version if found is not None else None,
        "rules": policy.model_dump(mode="json")["rules"],
        "summary": domain.describe(policy),
        "facts": {name: kind_.__name__ for name, kind_ in op.fact_types().items()},
        "set_by": found.set_by if found is not None else None,
        "set_at": found.set_at.isoformat() if found is not None else None,
    }


async def listing(
    conn: AsyncConnection, operations: Operations, organization_id: str
) -> list[dict[str, Any]]:
    """Every installed operation kind with its policy in force (or the default)."""
    saved = {v.operation_kind: v for v in await policies.all_in_force(conn, organization_id)}
    kinds = sorted({op.kind for op in operations})
    return [shown(operations, kind, saved.get(kind)) for kind in kinds]
