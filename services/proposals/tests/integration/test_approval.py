"""Approvals over HTTP: the claim, and every way an approval must NOT produce a contract."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from datetime import timedelta
from typing import Any

import jwt
import pytest
from proposals_testkit import drain_queue
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime import keys
from signoff_runtime.settings import ContractVerifyingSettings
from signoff_runtime.signing import verify
from signoff_runtime.testing import wait_until
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE
from sqlalchemy import text

pytestmark = pytest.mark.integration


def problem(resp, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == code and body["status"] == status
    return body


async def test_an_approval_claims_and_writes_one_signed_dated_contract(service, settings, amqp_url):
    org = new_id("org")
    pid = await service.pending(org)
    user = await service.member(org, "manager")

    resp = await service.approve_http(pid, service.token(user, org))

    assert resp.status_code == 200
    body = resp.json()
    assert (body["result"], body["http_status"], body["proposal"]["status"]) == (
        "claimed",
        200,
        "executing",
    )
    row = await service.row(pid)
    assert (row.status, row.decided_by) == ("executing", user)
    [raw] = await service.contracts(pid)
    contract = ExecutionContract.model_validate(raw)
    # what an executor holds: the public half only
    assert contract.key_id == settings.contracts.kid()
    assert verify(contract, ContractVerifyingSettings())
    assert contract.contract_id == row.contract_id and contract.approved_by == user
    assert contract.approved_at == row.decided_at and contract.execute_by == row.execute_by
    assert contract.execute_by - contract.approved_at == timedelta(
        seconds=settings.contracts.execute_within_s
    )
    assert contract.arguments == row.arguments
    audit = await service.audit(pid)
    assert [(a.action, a.from_status, a.to_status) for a in audit] == [
        ("created", None, "pending"),
        ("claimed", "pending", "executing"),
    ]
    assert [r.routing_key for r in await service.outbox(pid, "proposal.event")] == [
        "proposal.created",
        "proposal.executing",
    ]
    [delivered] = await drain_queue(amqp_url, service.topology.name("executor.contracts"))
    assert ExecutionContract.model_validate_json(delivered.body).contract_id == row.contract_id


async def test_approving_a_lapsed_proposal_answers_expired_even_before_the_sweep(service):
    org = new_id("org")
    pid = await service.pending(org)
    await service.set(pid, "expires_at = now() - interval '1 second'")

    body = problem(
        await service.approve_http(pid, await service.approver(org)), 409, "not_approvable"
    )

    assert body["reason"]["code"] == "expired"
    assert (await service.row(pid)).status == "expired"
    assert await service.contracts(pid) == []


async def test_around_the_expiry_instant_the_database_clock_decides(service):
    """Approvals fired densely across a proposal's expiry: whoever won, won before it."""
    org = new_id("org")
    token = await service.approver(org)
    pids = [await service.pending(org) for _ in range(12)]
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE proposals.proposals SET expires_at = clock_timestamp() "
                "+ interval '1 second' WHERE id = ANY(:ids)"
            ),
            {"ids": pids},
        )

    async def approve_at(pid: str, delay_ms: int) -> int:
        await asyncio.sleep(delay_ms / 1000)
        return (await service.approve_http(pid, token)).status_code

    # proposal i is approved three times at i*150 ms (+0/+3/+6): 0 ms … 1656 ms around 1 s
    # (wide enough that a busy machine still answers the first in time and the last too late)
    statuses = await asyncio.gather(
        *(approve_at(pid, i * 150 + offset) for i, pid in enumerate(pids) for offset in (0, 3, 6))
    )

    assert set(statuses) == {200, 409}, "the approvals should straddle the expiry"
    for pid in pids:
        row = await service.row(pid)
        contracts = await service.contracts(pid)
        if row.status == "executing":
            assert row.decided_at < row.expires_at
            assert len(contracts) == 1
        else:
            assert row.status in ("pending", "expired") and contracts == []

    # once the database says it has expired, no approval succeeds
    late = await service.pending(org)
    await service.set(late, "expires_at = clock_timestamp() + interval '50 milliseconds'")

    async def lapsed() -> bool:
        async with service.engine.connect() as conn:
            return (
                await conn.execute(
                    text(
                        "SELECT clock_timestamp() > expires_at "
                        "FROM proposals.proposals WHERE id = :i"
                    ),
                    {"i": late},
                )
            ).scalar_one()

    await wait_until(lapsed, interval=0.005, what="the database clock to pass expires_at")
    problem(await service.approve_http(late, token), 409, "not_approvable")
    assert await service.contracts(late) == []


@pytest.mark.parametrize("how", ["declined", "superseded"])
async def test_a_decided_or_replaced_proposal_cannot_be_approved(service, how):
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    if how == "declined":
        resp = await service.http.post(
            f"/v1/proposals/{pid}/decline", headers={"Authorization": f"Bearer {token}"}
        )
        assert resp.status_code == 200 and resp.json()["result"] == "declined"
    else:
        resp = await service.http.post(
            f"/v1/proposals/{pid}/revise",
            headers={"Authorization": f"Bearer {token}"},
            json={"request": {**(await service.row(pid)).request, "occasion": "outage"}},
        )
        assert resp.status_code == 200 and resp.json()["result"] == "revised"

    body = problem(await service.approve_http(pid, token), 409, "not_approvable")

    assert body["reason"]["code"] == how
    assert await service.contracts(pid) == []


async def test_a_viewer_is_forbidden_and_the_attempt_is_audited(service):
    org = new_id("org")
    pid = await service.pending(org)
    viewer = await service.member(org, "viewer")

    problem(await service.approve_http(pid, service.token(viewer, org)), 403, "forbidden")

    assert (await service.row(pid)).status == "pending"
    assert await service.contracts(pid) == []
    [attempt] = [a for a in await service.audit(pid) if a.action == "approve_forbidden"]
    assert (attempt.actor, attempt.detail) == (viewer, {"why": "role", "role": "viewer"})


async def test_a_person_removed_from_the_organization_is_forbidden_though_the_token_is_valid(
    service,
):
    org = new_id("org")
    pid = await service.pending(org)
    admin = await service.member(org, "admin")
    token = service.token(admin, org)
    await service.remove_member(org, admin)

    problem(await service.approve_http(pid, token), 403, "forbidden")

    assert await service.contracts(pid) == []
    [attempt] = [a for a in await service.audit(pid) if a.action == "approve_forbidden"]
    assert attempt.detail == {"why": "not_a_member"}


async def test_another_organizations_proposal_is_indistinguishable_from_an_unknown_one(service):
    pid = await service.pending(new_id("org"))
    mine = new_id("org")
    token = await service.approver(mine)

    theirs = problem(await service.approve_http(pid, token), 404, "not_found")
    unknown = problem(await service.approve_http(new_id("prp"), token), 404, "not_found")
    shown = problem(
        await service.http.get(
            f"/v1/proposals/{pid}", headers={"Authorization": f"Bearer {token}"}
        ),
        404,
        "not_found",
    )

    assert theirs == unknown == shown
    assert await service.contracts(pid) == []
    assert [a.action for a in await service.audit(pid)] == ["created"]


def _unsigned(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    head = f"{part(json.dumps(header).encode())}.{part(json.dumps(claims).encode())}"
    return f"{head}.{part(signature)}"


def _hs256_with_the_public_key(claims: dict[str, Any]) -> str:
    """The key-confusion forgery: HMAC keyed with the (public) verifying key."""
    header = {"alg": "HS256", "typ": "JWT", "kid": keys.DEV_ONLY_TOKEN_KID}
    head = _unsigned(header, claims).rstrip(".")
    mac = hmac.new(keys.DEV_ONLY_TOKEN_PUBLIC_KEY.encode(), head.encode(), hashlib.sha256)
    return _unsigned(header, claims, mac.digest())


def _bad_tokens(service, user: str, org: str) -> dict[str, str | None]:
    auth = service.auth
    now = int(time.time())
    claims = {
        "sub": user,
        "org": org,
        "iss": auth.issuer,
        "aud": PROPOSALS_AUDIENCE,
        "exp": now + 600,
    }
    _, other_private, _ = keys.generate()
    # PyJWT's annotations name cryptography's key types; it takes PyNaCl's (signoff_runtime.eddsa)
    other: Any = keys.private_key(other_private)
    kid = {"kid": keys.DEV_ONLY_TOKEN_KID}
    dev: Any = keys.private_key(keys.DEV_ONLY_TOKEN_PRIVATE_KEY)
    return {
        "missing": None,
        "garbage": "not-a-jwt",
        "other_key_same_kid": jwt.encode(claims, other, algorithm="EdDSA", headers=kid),
        "unknown_kid": jwt.encode(claims, dev, algorithm="EdDSA", headers={"kid": "k-unknown"}),
        "no_kid": jwt.encode(claims, dev, algorithm="EdDSA"),
        "expired": service.token(user, org, ttl_s=-120),
        "agent_audience": service.token(user, org, audience=AGENT_AUDIENCE),
        "wrong_audience": jwt.encode({**claims, "aud": "someone-else"}, dev, "EdDSA", kid),
        "wrong_issuer": jwt.encode({**claims, "iss": "someone-else"}, dev, "EdDSA", kid),
        "alg_none": _unsigned({"alg": "none", "typ": "JWT", **kid}, claims),
        "hs256_public_key": _hs256_with_the_public_key(claims),
        "no_org": jwt.encode({k: v for k, v in claims.items() if k != "org"}, dev, "EdDSA", kid),
    }


async def test_bad_tokens_are_401_with_www_authenticate_and_write_nothing(service):
    org = new_id("org")
    pid = await service.pending(org)
    admin = await service.member(org, "admin")

    for name, token in _bad_tokens(service, admin, org).items():
        resp = await service.approve_http(pid, token)
        problem(resp, 401, "unauthenticated")
        assert resp.headers["www-authenticate"] == "Bearer", name
        reply = await service.approve_amqp(pid, token or "")
        assert (reply.result, reply.http_status, reply.proposal) == ("unauthenticated", 401, None)

    assert (await service.row(pid)).status == "pending"
    assert await service.contracts(pid) == []
    assert [a.action for a in await service.audit(pid)] == ["created"]


async def test_approving_while_executing_is_in_progress(service):
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    assert (await service.approve_http(pid, token)).status_code == 200

    body = problem(await service.approve_http(pid, token), 409, "not_approvable")
    reply = await service.approve_amqp(pid, token)

    assert body["reason"]["code"] == "in_progress"
    assert (reply.result, reply.http_status, reply.reason.code) == (
        "not_approvable",
        409,
        "in_progress",
    )
    await service.set(pid, "status = 'needs_reconciliation'")
    assert (
        problem(await service.approve_http(pid, token), 409, "not_approvable")["reason"]["code"]
        == "in_progress"
    )
    assert len(await service.contracts(pid)) == 1


async def test_corrupted_stored_arguments_fail_the_proposal_with_only_a_correlation_id(service):
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    await service.set(
        pid,
        "arguments = CAST(:a AS jsonb)",
        a=json.dumps({**(await service.row(pid)).arguments, "amount_cents": "DROP TABLE x; --"}),
    )

    resp = await service.approve_http(pid, token)
    again = await service.approve_amqp(pid, token)

    assert resp.status_code == 200
    body = resp.json()
    assert body["result"] == "already_completed"
    outcome = body["outcome"]
    assert outcome["type"] == "failed" and outcome["correlation_id"].startswith("cor_")
    assert again.outcome is not None and again.outcome.model_dump() == outcome
    for text_seen in (resp.text, again.model_dump_json()):
        for leak in (
            "Traceback",
            "SELECT",
            "UPDATE",
            "sqlalchemy",
            "asyncpg",
            "DROP TABLE",
            "int_parsing",
            "validation error",
        ):
            assert leak not in text_seen, leak
    row = await service.row(pid)
    assert row.status == "failed" and row.outcome == outcome
    failed = [a for a in await service.audit(pid) if a.action == "failed"]
    assert failed and failed[0].detail["correlation_id"] == outcome["correlation_id"]
    assert await service.contracts(pid) == []


async def test_decline_records_the_reason_and_follows_the_table_afterwards(service):
    org = new_id("org")
    pid = await service.pending(org)
    token = await service.approver(org)
    headers = {"Authorization": f"Bearer {token}"}

    too_long = await service.http.post(
        f"/v1/proposals/{pid}/decline", headers=headers, json={"reason": "x" * 501}
    )
    problem(too_long, 422, "invalid_request")
    resp = await service.http.post(
        f"/v1/proposals/{pid}/decline", headers=headers, json={"reason": "not this month"}
    )
    again = await service.http.post(f"/v1/proposals/{pid}/decline", headers=headers)

    assert resp.status_code == 200 and resp.json()["result"] == "declined"
    row = await service.row(pid)
    assert (row.status, row.decline_reason) == ("declined", "not this month")
    assert problem(again, 409, "not_approvable")["reason"]["code"] == "declined"
    assert [r.routing_key for r in await service.outbox(pid)] == [
        "proposal.created",
        "proposal.decided",
    ]


async def test_a_viewer_cannot_decline_either(service):
    org = new_id("org")
    pid = await service.pending(org)
    viewer = await service.member(org, "viewer")
    headers = {"Authorization": f"Bearer {service.token(viewer, org)}"}
    resp = await service.http.post(f"/v1/proposals/{pid}/decline", headers=headers)
    problem(resp, 403, "forbidden")
    assert (await service.row(pid)).status == "pending"
    assert [a.action for a in await service.audit(pid)] == ["created", "decline_forbidden"]
