"""The sender check without a broker: who may send what, replays, and what ``prod`` refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from signoff_runtime.senders import SENDER_HEADER, Senders, broker_user
from signoff_runtime.settings import AmqpSettings, ServiceSettings
from signoff_runtime.topology import QUEUES, ROLES, QueueSpec, Topology

USERS = {role: [f"signoff-{role}"] for role in ROLES}
SPEC = Topology("t").spec


def senders(me: str = "signoff-proposals", **kw: bool) -> Senders:
    return Senders.from_amqp(AmqpSettings(url=f"amqp://{me}:pw@127.0.0.1:5672/", users=USERS), **kw)


def test_every_queue_names_its_consumer_and_senders() -> None:
    for spec in QUEUES:
        assert spec.consumer in ROLES and spec.senders and set(spec.senders) <= set(ROLES)
    expected = {
        "proposals.outcomes": ("executor", "reconciler"),
        "proposals.reconciliation": ("reconciler",),
        "executor.contracts": ("proposals",),
        "proposals.approvals": ("web", "cli"),
        "proposals.requests": ("agent",),
        "proposals.pause-points": ("agent",),
        "agent.events": ("proposals",),
        "reconciler.required": ("executor",),
    }
    assert {key: SPEC(key).senders for key in expected} == expected


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.key)
def test_only_the_allowed_roles_users_are_accepted(spec: QueueSpec) -> None:
    check = senders()
    for role in ROLES:
        refusal = check.refusal(spec, f"signoff-{role}", {})
        assert (refusal is None) == (role in spec.senders), (spec.key, role)
    assert check.refusal(spec, None, {}) == "the message has no user_id property"
    assert check.refusal(spec, "", {}) is not None


def test_a_replay_is_accepted_only_for_a_sender_the_queue_allows_and_only_from_a_replayer() -> None:
    check, outcomes = senders(), SPEC("proposals.outcomes")
    vouched = {SENDER_HEADER: "signoff-executor"}
    assert check.refusal(outcomes, "signoff-cli", vouched) is None
    assert check.refusal(outcomes, "signoff-cli", {SENDER_HEADER: "signoff-agent"}) is not None
    assert check.refusal(outcomes, "signoff-cli", {}) is not None
    # nobody else may vouch: the header from the agent (or the web) changes nothing
    assert check.refusal(outcomes, "signoff-agent", vouched) is not None
    assert check.refusal(outcomes, "signoff-web", {SENDER_HEADER: b"signoff-executor"}) is not None
    assert check.refusal(outcomes, "signoff-cli", {SENDER_HEADER: b"signoff-executor"}) is None


def test_the_archive_believes_a_letters_sender_only_from_the_queues_own_consumer() -> None:
    check, outcomes = senders(), SPEC("proposals.outcomes")
    named = {SENDER_HEADER: "signoff-executor"}
    assert check.original_sender(outcomes, "signoff-proposals", named) == "signoff-executor"
    assert check.original_sender(outcomes, "signoff-agent", named) == "signoff-agent"
    assert check.original_sender(outcomes, "signoff-cli", named) == "signoff-executor"
    assert check.original_sender(outcomes, "signoff-executor", {}) == "signoff-executor"
    assert check.original_sender(outcomes, None, {}) is None


def test_the_negative_control_accepts_anyone() -> None:
    check = senders(any_sender=True)
    assert check.refusal(SPEC("proposals.outcomes"), None, {}) is None
    assert check.refusal(SPEC("proposals.outcomes"), "signoff-agent", {}) is None


def test_unconfigured_every_role_is_the_connections_own_user() -> None:
    check = Senders.from_amqp(AmqpSettings(url="amqp://guest:guest@127.0.0.1:5672/"))
    assert check.me == "guest" and all(check.users[role] == {"guest"} for role in ROLES)
    assert check.refusal(SPEC("proposals.outcomes"), "guest", {}) is None
    assert check.refusal(SPEC("proposals.outcomes"), "someone-else", {}) is not None


def test_broker_user_reads_the_url() -> None:
    assert broker_user("amqp://signoff-web:pw@host:5672/") == "signoff-web"
    assert broker_user("amqp://a%40b:pw@host/") == "a@b"
    assert broker_user("amqp://host:5672/") == "guest"


def test_users_accept_one_name_or_several(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNOFF_AMQP__USERS", '{"web": ["web-1", "web-2"], "agent": "a"}')
    assert ServiceSettings().amqp.users == {"web": ["web-1", "web-2"], "agent": ["a"]}
    monkeypatch.setenv("SIGNOFF_AMQP__USERS", '{"nobody": "x"}')
    with pytest.raises(ValidationError):
        ServiceSettings()


def _prod(**amqp: object) -> ServiceSettings:
    return ServiceSettings(
        env="prod",
        auth={"secret": "a-production-token-secret-that-is-long-enough-0000"},
        contracts={"signing_key": "a-production-contract-key-long-enough-000000"},
        amqp=AmqpSettings(**amqp),
    )


def test_prod_refuses_shared_or_guest_broker_users() -> None:
    url = "amqp://signoff-proposals:a-long-enough-broker-password@rabbitmq:5672/"
    assert _prod(url=url, users=USERS).amqp.users == USERS
    with pytest.raises(ValidationError, match="every role"):
        _prod(url=url)
    with pytest.raises(ValidationError, match="its own broker user"):
        _prod(url=url, users={**USERS, "web": ["signoff-agent"]})
    with pytest.raises(ValidationError, match="guest"):
        _prod(url=url, users={**USERS, "cli": ["guest"]})
    with pytest.raises(ValidationError, match="guest"):
        _prod(url="amqp://guest:guest@rabbitmq:5672/", users=USERS)
