"""Signed execution contracts for the tests, issued as the proposals service issues them
(``signoff_runtime.signing.issue``), with a key made for this test run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import SecretStr
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import keys
from signoff_runtime.settings import ContractSigningSettings, ContractVerifyingSettings
from signoff_runtime.signing import issue

from support.domain import ORG

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
    approved_by: str = "usr_approver",
    approvers: list[str] | None = None,
) -> ExecutionContract:
    now = datetime.now(UTC)
    return issue(
        key,
        proposal_id=new_id("prp"),
        contract_id=new_id("ctr"),
        organization_id=ORG,
        section="boards",
        resource_id=resource_id,
        operation_kind=kind,
        contract_version=version,
        arguments=arguments,
        approved_by=approved_by,
        approved_at=now,
        execute_by=now + timedelta(seconds=execute_in_s),
    )


def note(
    board_id: str,
    body: str = "hello",
    *,
    approved_by: str = "usr_approver",
    key: ContractSigningSettings = SIGNING,
    approvers: list[str] | None = None,
    **extra: Any,
) -> ExecutionContract:
    return contract(
        "board.add_note",
        {"board_id": board_id, "body": body, **extra},
        resource_id=board_id,
        approved_by=approved_by,
        key=key,
        approvers=approvers,
    )


def charge(
    board_id: str, amount: int = 500, *, approved_by: str = "usr_approver"
) -> ExecutionContract:
    return contract(
        "board.charge",
        {"board_id": board_id, "amount": amount},
        resource_id=board_id,
        approved_by=approved_by,
    )
