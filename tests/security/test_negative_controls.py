"""The negative-control switches (``SIGNOFF_UNSAFE__*``) cannot reach a real deployment.

Every service's entry point (what ``signoff serve NAME`` runs) refuses to start with a switch
set unless ``SIGNOFF_ENV=test``: exit code 2, one line naming the switch, no traceback. One real
``signoff serve executor`` process shows it end to end, and that the same environment without
the switch starts. (``SIGNOFF_ENV=dev``, and a switch accepted under ``test``, are covered
without processes in ``shared/runtime/tests/test_unsafe_switches.py``.)
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from signoff_runtime import keys
from signoff_runtime.testing.processes import ServiceProcess, service

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))  # e2e_broker_users

import e2e_broker_users

pytestmark = pytest.mark.integration

#: every switch is tried, each on one service (each service reads them all through its settings)
REFUSALS = {
    "proposals": "SIGNOFF_UNSAFE__CLAIM_WITHOUT_STATUS",
    "executor": "SIGNOFF_UNSAFE__NO_DEDUP",
    "reconciler": "SIGNOFF_UNSAFE__RANDOM_IDEMPOTENCY_KEY",
    "agent": "SIGNOFF_UNSAFE__PUBLISH_WITHOUT_OUTBOX",
    "web": "SIGNOFF_UNSAFE__MARK_SENT_BEFORE_CONFIRM",
}


def _production(settings_env: dict[str, str]) -> dict[str, str]:
    """A production environment that is otherwise acceptable: keys made for this run (never a
    committed one), a real session secret, and a broker password that is not ``guest``."""
    _, token_private, token_public = keys.generate()
    _, contract_private, contract_public = keys.generate()
    return {
        **settings_env,
        "SIGNOFF_ENV": "prod",
        "SIGNOFF_AMQP__URL": f"amqp://signoff:{secrets.token_urlsafe(18)}@127.0.0.1:5672/",
        "SIGNOFF_AUTH__PUBLIC_KEYS": json.dumps({"t1": token_public}),
        "SIGNOFF_AUTH__PRIVATE_KEY": token_private,
        "SIGNOFF_AUTH__KEY_ID": "t1",
        "SIGNOFF_CONTRACTS__SIGNING_KEY": contract_private,
        "SIGNOFF_CONTRACTS__VERIFY_KEYS": json.dumps({"c1": contract_public}),
        "SIGNOFF_WEB__SESSION_SECRET": secrets.token_urlsafe(32),
    }


def _exit(process: ServiceProcess, timeout: float = 60.0) -> int:
    process.start()
    assert process.proc is not None
    return process.proc.wait(timeout)


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_every_services_entry_point_refuses_a_switch_outside_test(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ``signoff serve NAME`` runs, in-process: it ends before building anything."""
    for variable, value in {**_production({}), REFUSALS[name]: "true"}.items():
        monkeypatch.setenv(variable, value)
    serve = next(ep for ep in entry_points(group="signoff.services") if ep.name == name).load()

    with pytest.raises(SystemExit) as exited:
        serve()

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"signoff {name}: refusing to start: {REFUSALS[name]}"), err
    assert "SIGNOFF_ENV=test (it is 'prod')" in err and err.count("\n") == 1, err


async def test_signoff_serve_executor_refuses_a_switch_outside_test(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**_production(settings_env), "SIGNOFF_UNSAFE__NO_DEDUP": "true"}
    process = service("executor", env, tmp_path)

    code = await asyncio.to_thread(_exit, process)

    output = process.log_path.read_text()
    assert code == 2, f"exited with {code}:\n{output}"
    assert output.startswith("signoff executor: refusing to start: SIGNOFF_UNSAFE__NO_DEDUP"), (
        output
    )
    assert "Traceback" not in output and output.count("\n") == 1, output


def _executors_broker_user(settings_env: dict[str, str]) -> dict[str, str]:
    """``prod`` refuses ``guest`` and wants every role's broker user named: the executor's own
    test user, with the production permissions (the topology is declared already)."""
    e2e_broker_users.require()
    e2e_broker_users.ensure()
    return {
        "SIGNOFF_AMQP__URL": e2e_broker_users.url(settings_env["SIGNOFF_AMQP__URL"], "executor"),
        "SIGNOFF_AMQP__USERS": e2e_broker_users.users_setting(),
        "SIGNOFF_AMQP__DECLARE_TOPOLOGY": "false",
    }


async def test_without_a_switch_the_same_production_environment_starts(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**_production(settings_env), **_executors_broker_user(settings_env)}
    process = service("executor", env, tmp_path)
    process.start()
    try:
        await asyncio.to_thread(process.wait_healthy, 60.0)
    finally:
        await asyncio.to_thread(process.stop)
    assert "refusing to start" not in process.tail()
