"""The approvers' authorization, checked again at execution.

An approval can wait in the queue for minutes (or be re-published by the stuck-execution sweep);
the approver's membership can end or their role shrink in between. So in the transaction that
would execute, the executor asks the domain's directory (entry point ``signoff.directory``, read on
the same connection) whether each approver — ``approved_by``, and every one of ``approvers`` when
an approval policy needed more than one person — is still a member of the contract's organization
with a role the operation's ``authorize`` accepts. If one is not, the contract ends as
``RevisionRequired(approver_no_longer_authorized)`` naming them and nothing runs: the quorum that
approved it no longer stands, and the proposal needs fresh approvals by people who may give them.
"""

from __future__ import annotations

from typing import Any

from signoff_contracts.operations import Actor, AnyOperation, Directory
from signoff_contracts.v1 import ExecutionContract

from signoff_executor import domain


async def approver_still_authorized(
    directory: Directory, conn: Any, contract: ExecutionContract, op: AnyOperation
) -> bool:
    return await unauthorized_approver(directory, conn, contract, op) is None


async def unauthorized_approver(
    directory: Directory, conn: Any, contract: ExecutionContract, op: AnyOperation
) -> str | None:
    """The first of the contract's approvers who may no longer approve it, or ``None``."""
    for user_id in contract.all_approvers():
        member = await directory.membership(conn, user_id, contract.organization_id)
        if member is None or member.organization_id != contract.organization_id:
            return user_id
        actor = Actor(user_id=user_id, organization_id=member.organization_id, role=member.role)
        if not op.authorize(actor, domain.scope_of(contract)):
            return user_id
    return None
