"""Approval policies on the running service: quorum, distinct people, the proposer, thresholds,
freezing, decline and expiry — over HTTP and the AMQP approval command alike."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from proposals_testkit import KIND
from signoff_contracts.ids import new_id
from signoff_contracts.v1 import ExecutionContract
from signoff_runtime.settings import ContractVerifyingSettings
from signoff_runtime.signing import verify

pytestmark = pytest.mark.integration

TWO_MANAGERS = [{"approvals": 2, "roles": ["manager"], "proposer_may_approve": False}]


async def _two_of_two(service: Any, org: str) -> tuple[str, str]:
    """A pending proposal of ``org`` needing two managers, and its proposer's token."""
    saved = await service.set_policy(org, TWO_MANAGERS)
    assert saved.status_code == 200, saved.text
    proposer = await service.approver(org, "manager")
    return await service.pending(org, token=proposer), proposer


async def test_two_distinct_managers_make_one_contract_naming_both(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    first, second = await service.member(org, "manager"), await service.member(org, "manager")

    one = await service.approve_http(pid, service.token(first, org))
    assert one.status_code == 200, one.text
    body = one.json()
    assert body["result"] == "approval_recorded"
    assert body["approvals"] == {"recorded": 1, "required": 2}
    assert body["proposal"]["status"] == "pending"
    assert [m["user_id"] for m in body["proposal"]["approvals"]] == [first]
    assert await service.contracts(pid) == []

    two = await service.approve_amqp(pid, service.token(second, org))
    assert (two.result, two.approvals) == ("claimed", two.approvals)
    assert two.approvals is not None and (two.approvals.recorded, two.approvals.required) == (2, 2)
    [raw] = await service.contracts(pid)
    contract = ExecutionContract.model_validate(raw)
    assert contract.approved_by == second and contract.approvers == [first, second]
    assert verify(contract, ContractVerifyingSettings())  # the approvers are signed
    tampered = contract.model_copy(update={"approvers": [second, second]})
    assert not verify(tampered, ContractVerifyingSettings())
    audit = [(a.action, a.actor) for a in await service.audit(pid)]
    assert audit[1:] == [("approved", first), ("approved", second), ("claimed", second)]


async def test_the_same_manager_twice_is_still_waiting(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    token = service.token(await service.member(org, "manager"), org)
    replies = [await service.approve_http(pid, token) for _ in range(3)]
    assert {r.json()["result"] for r in replies} == {"approval_recorded"}
    assert replies[-1].json()["approvals"] == {"recorded": 1, "required": 2}
    assert (await service.row(pid)).status == "pending"
    assert [a.action for a in await service.audit(pid)].count("approved") == 1


async def test_the_proposer_may_not_approve_under_the_rule(service) -> None:
    org = new_id("org")
    pid, proposer = await _two_of_two(service, org)
    resp = await service.approve_http(pid, proposer)
    assert resp.status_code == 403, resp.text
    assert resp.json()["code"] == "forbidden"
    assert resp.json()["reason"]["code"] == "proposer_may_not_approve"
    row = await service.row(pid)
    assert (row.status, row.approvals) == ("pending", [])
    [refused] = [a for a in await service.audit(pid) if a.action == "approve_forbidden"]
    assert refused.detail["why"] == "proposer_may_not_approve"


async def test_a_role_the_policy_does_not_count_is_forbidden(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    admin = service.token(await service.member(org, "admin"), org)  # the operation allows admins
    resp = await service.approve_http(pid, admin)
    assert resp.status_code == 403 and resp.json()["reason"]["code"] == "role_not_counted"


async def test_a_threshold_applies_above_it_and_not_below(service) -> None:
    org = new_id("org")
    # a basic account's outage credit is €10.00, its goodwill credit €5.00
    rule = {"when": {"fact": "amount_cents", "op": ">", "value": 700}, "approvals": 2}
    assert (await service.set_policy(org, [rule])).status_code == 200
    big = await service.pending(org, request={"occasion": "outage"})
    small = await service.pending(org, request={"occasion": "goodwill"})
    manager = service.token(await service.member(org, "manager"), org)

    assert (await service.approve_http(big, manager)).json()["result"] == "approval_recorded"
    assert (await service.approve_http(small, manager)).json()["result"] == "claimed"
    assert (await service.row(big)).approvals_required == 2
    assert (await service.row(small)).approvals_required == 1


async def test_a_policy_changed_after_proposing_does_not_change_the_pending_one(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    assert (await service.set_policy(org, [])).status_code == 200  # back to the default
    manager = service.token(await service.member(org, "manager"), org)
    assert (await service.approve_http(pid, manager)).json()["result"] == "approval_recorded"
    view = (await service.approve_http(pid, manager)).json()["proposal"]
    assert view["requirement"] == {
        "required": 2,
        "roles": ["manager"],
        "proposer_may_approve": False,
        "policy_version": 1,
    }
    later = await service.pending(org)
    assert (await service.approve_http(later, manager)).json()["result"] == "claimed"


async def test_a_decline_after_one_approval_ends_it(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    first = service.token(await service.member(org, "manager"), org)
    other = service.token(await service.member(org, "manager"), org)
    assert (await service.approve_http(pid, first)).json()["result"] == "approval_recorded"
    declined = await service.http.post(
        f"/v1/proposals/{pid}/decline", headers={"Authorization": f"Bearer {other}"}
    )
    assert declined.json()["result"] == "declined", declined.text
    late = await service.approve_http(pid, service.token(await service.member(org, "manager"), org))
    assert late.status_code == 409 and late.json()["reason"]["code"] == "declined"
    assert await service.contracts(pid) == []


async def test_expiry_wins_over_one_of_two(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    first = service.token(await service.member(org, "manager"), org)
    assert (await service.approve_http(pid, first)).json()["result"] == "approval_recorded"
    await service.set(pid, "expires_at = now() - interval '1 second'")
    second = service.token(await service.member(org, "manager"), org)
    late = await service.approve_http(pid, second)
    assert late.status_code == 409 and late.json()["reason"]["code"] == "expired"
    row = await service.row(pid)
    assert row.status == "expired" and len(row.approvals) == 1
    assert await service.contracts(pid) == []


async def test_racing_approvals_of_three_managers_make_exactly_one_contract(service) -> None:
    org = new_id("org")
    pid, _ = await _two_of_two(service, org)
    tokens = [service.token(await service.member(org, "manager"), org) for _ in range(3)]
    replies = await asyncio.gather(*(service.approve_http(pid, tokens[i % 3]) for i in range(50)))
    results = [r.json().get("result") or r.json()["code"] for r in replies]
    assert results.count("claimed") == 1, results
    assert set(results) <= {"claimed", "approval_recorded", "not_approvable"}
    assert len(await service.contracts(pid)) == 1
    row = await service.row(pid)
    counted = [m["user_id"] for m in row.approvals]
    assert row.status == "executing" and len(counted) == 2 and len(set(counted)) == 2
    audit = await service.audit(pid)
    assert [a.actor for a in audit if a.action == "approved"] == counted
    [claim] = [a for a in audit if a.action == "claimed"]
    assert claim.detail["approvers"] == counted


async def test_a_policy_naming_an_undeclared_fact_is_refused(service) -> None:
    org = new_id("org")
    bad = [{"when": {"fact": "account_name", "op": "==", "value": "x"}, "approvals": 2}]
    resp = await service.set_policy(org, bad)
    assert resp.status_code == 422 and resp.json()["code"] == "invalid_policy", resp.text
    assert "account_name" in resp.json()["problems"][0]  # in the preview, but not a fact
    wrong_type = [{"when": {"fact": "amount_cents", "op": ">", "value": "many"}, "approvals": 2}]
    assert (await service.set_policy(org, wrong_type)).status_code == 422
    listed = await service.http.get(
        "/v1/policies", headers={"Authorization": f"Bearer {await service.approver(org)}"}
    )
    assert listed.status_code == 200
    versions = {i["operation_kind"]: i["version"] for i in listed.json()["items"]}
    assert versions[KIND] is None


async def test_only_managers_read_or_change_policies_and_changes_are_versioned(service) -> None:
    org = new_id("org")
    viewer = service.token(await service.member(org, "viewer"), org)
    headers = {"Authorization": f"Bearer {viewer}"}
    assert (await service.http.get("/v1/policies", headers=headers)).status_code == 403
    put = await service.http.put(
        f"/v1/policies/{KIND}", json={"rules": TWO_MANAGERS}, headers=headers
    )
    assert put.status_code == 403
    for rules in (TWO_MANAGERS, []):
        assert (await service.set_policy(org, rules)).status_code == 200
    manager = await service.approver(org, "manager")
    shown = await service.http.get(
        f"/v1/policies/{KIND}", headers={"Authorization": f"Bearer {manager}"}
    )
    body = shown.json()
    assert body["version"] == 2 and body["rules"] == []
    assert [v["version"] for v in body["history"]] == [2, 1]
    other = new_id("org")  # another organization's policies are its own
    other_manager = await service.approver(other, "manager")
    theirs = await service.http.get(
        f"/v1/policies/{KIND}", headers={"Authorization": f"Bearer {other_manager}"}
    )
    assert theirs.json()["version"] is None
