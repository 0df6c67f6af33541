"""Execution contracts: Ed25519 with a key id; only the proposals service's settings can sign.

An executor's check refuses a contract that is unsigned, signed by another key (under its own
``kid`` or the trusted one), altered after signing, or signed the old HMAC way; during a
rotation it accepts both keys. Which settings hold which key is checked per service.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel, SecretStr
from signoff_agent.settings import AgentSettings
from signoff_contracts.v1 import ExecutionContract
from signoff_executor.settings import ExecutorSettings
from signoff_proposals.settings import ProposalsSettings
from signoff_reconciler.settings import ReconcilerSettings
from signoff_runtime import keys
from signoff_runtime.settings import ContractSigningSettings, ContractVerifyingSettings
from signoff_runtime.signing import sign, verify
from signoff_web.settings import WebSettings


def contract() -> ExecutionContract:
    now = datetime.now(UTC)
    return ExecutionContract(
        correlation_id="prp_1",
        source="proposals",
        contract_id="ctr_1",
        proposal_id="prp_1",
        organization_id="org_1",
        section="orders",
        resource_id="ord_1",
        operation_kind="order.refund_missing_discount",
        contract_version=1,
        arguments={"order_id": "ord_1", "amount_cents": 100},
        approved_by="usr_1",
        approved_at=now,
        execute_by=now + timedelta(minutes=5),
    )


def pair(kid: str) -> tuple[ContractSigningSettings, str]:
    _, private, public = keys.generate()
    return ContractSigningSettings(signing_key=SecretStr(private), key_id=kid), public


def test_a_contract_signed_by_the_trusted_key_verifies_and_names_it() -> None:
    signer, public = pair("c1")
    signed = sign(contract(), signer)
    assert signed.key_id == "c1" and len(signed.signature) == 86
    assert verify(signed, ContractVerifyingSettings(verify_keys={"c1": public}))


def test_the_dev_pair_signs_and_verifies_with_no_configuration() -> None:
    signed = sign(contract(), ContractSigningSettings())
    assert signed.key_id == keys.DEV_ONLY_CONTRACT_KID
    assert verify(signed, ContractVerifyingSettings())


def test_unsigned_foreign_altered_and_hmac_contracts_are_refused() -> None:
    signer, public = pair("c1")
    trusted = ContractVerifyingSettings(verify_keys={"c1": public})
    stranger, _ = pair("c9")
    impostor = ContractSigningSettings(signing_key=stranger.signing_key, key_id="c1")
    good = sign(contract(), signer)
    hmac_key = b"the-old-shared-contract-key-0000000"
    old_style = hmac.new(hmac_key, contract().signing_payload(), hashlib.sha256).hexdigest()
    refused = {
        "unsigned": contract(),
        "no-key-id": good.model_copy(update={"key_id": None}),
        "stranger": sign(contract(), stranger),
        "impostor": sign(contract(), impostor),
        "altered": good.model_copy(update={"arguments": {"order_id": "ord_1", "amount_cents": 9}}),
        "later-execute-by": good.model_copy(
            update={"execute_by": good.execute_by + timedelta(days=1)}
        ),
        "hmac": contract().model_copy(update={"signature": old_style, "key_id": "c1"}),
        "junk-signature": good.model_copy(update={"signature": "!!not base64!!"}),
    }
    for name, candidate in refused.items():
        assert not verify(candidate, trusted), name


def test_during_a_rotation_both_keys_verify_and_after_it_only_the_new() -> None:
    old, old_public = pair("2026-01")
    new, new_public = pair("2026-07")
    during = ContractVerifyingSettings(verify_keys={"2026-01": old_public, "2026-07": new_public})
    after = ContractVerifyingSettings(verify_keys={"2026-07": new_public})
    by_old, by_new = sign(contract(), old), sign(contract(), new)
    assert verify(by_old, during) and verify(by_new, during)
    assert verify(by_new, after) and not verify(by_old, after)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every key in the environment, as a careless deployment might hand every service."""
    signer, public = pair("c1")
    _, token_private, token_public = keys.generate()
    found = {
        "SIGNOFF_ENV": "test",
        "SIGNOFF_CONTRACTS__SIGNING_KEY": signer.signing_key.get_secret_value(),
        "SIGNOFF_CONTRACTS__VERIFY_KEYS": json.dumps({"c1": public}),
        "SIGNOFF_AUTH__PRIVATE_KEY": token_private,
        "SIGNOFF_AUTH__PUBLIC_KEYS": json.dumps({"t1": token_public}),
    }
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    return found


def _secrets_in(value: object) -> str:
    """Every string the settings hold, secrets revealed."""
    if isinstance(value, BaseModel):
        return " ".join(_secrets_in(getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return " ".join(f"{k} {_secrets_in(v)}" for k, v in value.items())
    return str(value)


def test_each_service_reads_only_the_keys_it_needs(env: dict[str, str]) -> None:
    contract_private = env["SIGNOFF_CONTRACTS__SIGNING_KEY"]
    token_private = env["SIGNOFF_AUTH__PRIVATE_KEY"]
    held = {
        "agent": _secrets_in(AgentSettings()),
        "proposals": _secrets_in(ProposalsSettings()),
        "executor": _secrets_in(ExecutorSettings()),
        "reconciler": _secrets_in(ReconcilerSettings()),
        "web": _secrets_in(WebSettings()),
    }
    assert [s for s, text in held.items() if contract_private in text] == ["proposals"]
    assert [s for s, text in held.items() if token_private in text] == ["web"]
    # and the executors' verifying keys: only executors read them
    verifying = json.loads(env["SIGNOFF_CONTRACTS__VERIFY_KEYS"])["c1"]
    assert [s for s, text in held.items() if verifying in text] == ["executor"]
