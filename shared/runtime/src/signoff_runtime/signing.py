"""Signing and checking execution contracts (HMAC-SHA256 over canonical JSON)."""

from __future__ import annotations

import hashlib
import hmac

from pydantic import SecretStr
from signoff_contracts.v1 import ExecutionContract


def _digest(contract: ExecutionContract, key: SecretStr) -> str:
    return hmac.new(
        key.get_secret_value().encode(), contract.signing_payload(), hashlib.sha256
    ).hexdigest()


def sign(contract: ExecutionContract, key: SecretStr) -> ExecutionContract:
    return contract.model_copy(update={"signature": _digest(contract, key)})


def verify(contract: ExecutionContract, key: SecretStr) -> bool:
    return bool(contract.signature) and hmac.compare_digest(
        contract.signature, _digest(contract, key)
    )
