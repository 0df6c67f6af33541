"""The approver's authorization, checked again at execution.

An approval can wait in the queue for minutes (or be re-published by the stuck-execution sweep);
the approver's membership can end or their role shrink in between. So in the transaction that
would execute, the executor asks the domain's directory (entry point ``signoff.directory``, read on
the same connection) whether ``approved_by`` is still a member of the contract's organization
with a role the operation's ``authorize`` accepts. If not, the contract ends as
``RevisionRequired(approver_no_longer_authorized)`` and nothing runs: the proposal needs a fresh
approval by someone who may give it.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.operations import Actor, AnyOperation, Directory
from signoff_contracts.v1 import ExecutionContract

from signoff_executor import domain


async def approver_still_authorized(
    directory: Directory, conn: Any, contract: ExecutionContract, op: AnyOperation
) -> bool:
    member = await directory.membership(conn, contract.approved_by, contract.organization_id)
    if member is None or member.organization_id != contract.organization_id:
        return False
    actor = Actor(user_id=member.user_id, organization_id=member.organization_id, role=member.role)
    return op.authorize(actor, domain.scope_of(contract))
