"""Scenario 3's two-approver variant: a policy needs two of three managers, and they race.

``two_approvers`` (before anything is proposed) gives every case's club two more managers and a
policy of two manager approvals, so each proposal is frozen needing two distinct people.
``quorum_races`` then fires, at each proposal at once, approvals from at least two different
managers (a manager often more than once) and sometimes a decline. ``executed_with_quorum``
counts proposals that were claimed with fewer distinct approvals than they needed — zero with
every protection on; ``SIGNOFF_UNSAFE__SKIP_QUORUM`` (the first approval claims) must be caught
by it. The usual checks (one claim, one contract, one refund) run as for every scenario.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING

from signoff_club.passwords import hash_password
from signoff_contracts.ids import new_id
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import issue_token

if TYPE_CHECKING:
    from faults_history import Case
    from faults_scenarios import Run

POLICY = {"rules": [{"approvals": 2, "roles": ["manager"]}]}
REFUND = "order.refund_missing_discount"


async def two_approvers(run: Run) -> None:
    digest = await asyncio.to_thread(hash_password, "fault-suite")
    managers: dict[str, list[str]] = {}
    for case in run.cases:
        org = case.org["id"]
        extra = [new_id("usr") for _ in range(2)]
        for user in extra:
            await run.stack.execute(
                "INSERT INTO club.users (id, email, display_name, locale, password_hash) "
                "VALUES (:i, :e, 'Fault Manager', 'en', :h)",
                i=user,
                e=f"{user}@faults.example",
                h=digest,
            )
            await run.stack.execute(
                "INSERT INTO club.memberships (user_id, organization_id, role) "
                "VALUES (:i, :o, 'manager')",
                i=user,
                o=org,
            )
        managers[case.order_id] = [case.token] + [
            issue_token(AuthSettings(), user, org) for user in extra
        ]
        response = await run.stack.http.put(
            f"{run.stack.url('proposals')}/v1/policies/{REFUND}",
            json=POLICY,
            headers={"Authorization": f"Bearer {case.token}"},
        )
        response.raise_for_status()
    run.state["managers"] = managers


async def quorum_races(run: Run) -> None:
    deadline = time.monotonic() + 120
    gate = asyncio.Semaphore(12)
    managers: dict[str, list[str]] = run.state["managers"]

    async def race(case: Case) -> None:
        tokens = managers[case.order_id]
        picks = run.rng.sample(range(3), 2) + [
            run.rng.randrange(3) for _ in range(run.rng.randint(0, 4))
        ]
        commands = [(tokens[i], "approve") for i in picks]
        if run.rng.random() < 0.25:
            commands.append((tokens[run.rng.randrange(3)], "decline"))
        run.rng.shuffle(commands)
        run.faults += len(commands) - 1
        async with gate:
            await asyncio.gather(
                *(
                    run.driver.decide(dataclasses.replace(case, token=token), command, deadline)
                    for token, command in commands
                )
            )

    await asyncio.gather(*(race(case) for case in run.cases if case.proposal_id))


async def executed_with_quorum(run: Run) -> None:
    rows = await run.stack.rows(
        "SELECT count(*) AS n FROM proposals.proposals p WHERE p.id = ANY(:ids) "
        "AND p.contract_id IS NOT NULL AND p.approvals_required > ("
        "SELECT count(DISTINCT a.approver) FROM proposals.approvals a WHERE a.proposal_id = p.id)",
        ids=[case.proposal_id for case in run.cases if case.proposal_id],
    )
    required = await run.stack.rows(
        "SELECT count(*) AS n FROM proposals.proposals WHERE id = ANY(:ids) "
        "AND approvals_required = 2",
        ids=[case.proposal_id for case in run.cases if case.proposal_id],
    )
    if rows[0]["n"]:
        run.extra["claimed short of its quorum"] = int(rows[0]["n"])
    if required[0]["n"] == 0:  # the policy never applied: the variant tested nothing
        run.extra["proposals frozen without the two-approver policy"] = len(run.cases)
