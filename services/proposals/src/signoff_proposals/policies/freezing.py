"""The policy in force is frozen into a proposal when it is stored.

Intake (and a revision's new proposal) calls ``freeze`` in the transaction that inserts the
row: the organization's newest policy for the operation kind, evaluated on the facts of the
preview just resolved, becomes the row's requirement and the policy's version is kept beside
it. Changing the policy later changes no stored proposal: what a card needs is what it said when
it was shown.
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from signoff_contracts.operations import AnyOperation, FactValue
from signoff_runtime.unit_of_work import UnitOfWork

from signoff_proposals.lifecycle.repository import Stored
from signoff_proposals.policies import domain
from signoff_proposals.policies import repository as policies

log = structlog.get_logger(__name__)


async def freeze(tx: UnitOfWork, op: AnyOperation, row: Stored) -> Stored:
    found = await policies.in_force(tx.conn, row.organization_id, row.operation_kind)
    if found is None or not found.policy.rules:
        need = domain.requirement(None, found.version if found else None, {})
        if found is None:
            return row  # the columns' defaults are the default policy
    else:
        need = domain.requirement(found.policy, found.version, facts_of(op, row.preview))
    log.info(
        "proposal.policy_frozen",
        proposal_id=row.id,
        policy_version=need.policy_version,
        required=need.required,
    )
    return await policies.freeze(tx.conn, row.id, need)


def facts_of(op: AnyOperation, preview: Any) -> dict[str, FactValue]:
    """The preview's declared facts; none when it no longer parses (every condition then
    holds: an unreadable fact never lowers what a proposal needs)."""
    try:
        return op.facts(preview)
    except ValidationError:
        return {}
