"""Signing and checking execution contracts: Ed25519 over canonical JSON, with a key id.

Only the proposals service holds the private key (``ContractSigningSettings``); executors hold
public keys (``ContractVerifyingSettings``, ``kid`` → key, two during a rotation). So no other
service — the agent, which talks to the model, least of all — can make a contract an executor
runs, and an executor cannot make one either. The ``key_id`` a contract names only picks which
trusted key to check with: naming another key cannot make a signature valid.
"""

from __future__ import annotations

import base64
import binascii
import functools
from datetime import datetime
from typing import Any

from nacl.exceptions import CryptoError
from nacl.signing import SigningKey, VerifyKey
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract

from signoff_runtime import keys
from signoff_runtime.key_settings import ContractSigningSettings, ContractVerifyingSettings


@functools.lru_cache(maxsize=8)
def _private(text: str) -> SigningKey:
    return keys.private_key(text)


@functools.lru_cache(maxsize=32)
def _public(text: str) -> VerifyKey:
    return keys.public_key(text)


def issue(
    settings: ContractSigningSettings,
    *,
    proposal_id: str,
    contract_id: str,
    organization_id: str,
    section: str,
    resource_id: str,
    operation_kind: str,
    contract_version: int,
    arguments: dict[str, Any],
    approved_by: str,
    approved_at: datetime,
    execute_by: datetime,
    approvers: list[str] | None = None,
) -> ExecutionContract:
    """The signed execution contract of an approved proposal, in a fresh envelope (a new
    ``message_id``; the signed content is the same each time it is issued). The proposals
    service issues every contract through this; tests that play the proposals service do too."""
    contract = ExecutionContract(
        message_id=new_id("msg"),
        source="proposals",
        correlation_id=proposal_id,
        contract_id=contract_id,
        proposal_id=proposal_id,
        organization_id=organization_id,
        section=section,
        resource_id=resource_id,
        operation_kind=operation_kind,
        contract_version=contract_version,
        arguments=arguments,
        approved_by=approved_by,
        approvers=approvers,
        approved_at=approved_at,
        execute_by=execute_by,
    )
    return sign(contract, settings)


def sign(contract: ExecutionContract, settings: ContractSigningSettings) -> ExecutionContract:
    key = _private(settings.signing_key.get_secret_value())
    signature = keys.b64url(key.sign(contract.signing_payload()).signature)
    return contract.model_copy(update={"signature": signature, "key_id": settings.kid()})


def verify(contract: ExecutionContract, settings: ContractVerifyingSettings) -> bool:
    """Signed, by a key these settings trust, over exactly this content."""
    if not contract.signature or not contract.key_id:
        return False
    trusted = settings.verify_keys.get(contract.key_id)
    if trusted is None:
        return False
    try:
        signature = base64.urlsafe_b64decode(
            contract.signature + "=" * (-len(contract.signature) % 4)
        )
        _public(trusted).verify(contract.signing_payload(), signature)
    except (CryptoError, binascii.Error, ValueError):
        return False
    return True
