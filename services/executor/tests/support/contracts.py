"""Signed execution contracts for the tests, issued as the proposals service issues them
(``signoff_runtime.signing.issue``), with a key made for this test run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import SecretStr
from signoff_conformance.toy.domain import SECTION
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import keys
from signoff_runtime.settings import ContractSigningSettings, ContractVerifyingSettings
from signoff_runtime.signing import issue

from support.toy import APPROVER, GRANT, ORG, VOUCHER, grant_arguments, voucher_arguments

_, _PRIVATE, _PUBLIC = keys.generate()
#: what the proposals service would hold (a key made for this test run, never committed)
SIGNING = ContractSigningSettings(signing_key=SecretStr(_PRIVATE), key_id="test-contract")
#: what the executors under test trust
VERIFYING = ContractVerifyingSettings(verify_keys={"test-contract": _PUBLIC})


def contract(
    kind: str,
    arguments: dict[str, Any],
    *,
    resource_id: str,
    version: int = 1,
    execute_in_s: float = 300.0,
    key: ContractSigningSettings = SIGNING,
    approved_by: str = APPROVER,
    approvers: list[str] | None = None,
) -> ExecutionContract:
    now = datetime.now(UTC)
    return issue(
        key,
        proposal_id=new_id("prp"),
        contract_id=new_id("ctr"),
        organization_id=ORG,
        section=SECTION,
        resource_id=resource_id,
        operation_kind=kind,
        contract_version=version,
        arguments=arguments,
        approved_by=approved_by,
        approved_at=now,
        execute_by=now + timedelta(seconds=execute_in_s),
        approvers=approvers,
    )


def grant(
    account_id: str,
    *,
    approved_by: str = APPROVER,
    key: ContractSigningSettings = SIGNING,
    approvers: list[str] | None = None,
    **knobs: Any,
) -> ExecutionContract:
    """A goodwill credit to ``account_id``, as approved; ``knobs``: ``FaultyGrant``'s."""
    return contract(
        GRANT,
        grant_arguments(account_id, **knobs),
        resource_id=account_id,
        approved_by=approved_by,
        key=key,
        approvers=approvers,
    )


def voucher(account_id: str, *, approved_by: str = APPROVER) -> ExecutionContract:
    return contract(
        VOUCHER,
        voucher_arguments(account_id),
        resource_id=account_id,
        approved_by=approved_by,
    )
