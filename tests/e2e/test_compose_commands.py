"""Every docker-compose service's command, run here as a process with that service's compose
environment (hosts and ports mapped to this machine), reaches healthy — against a RabbitMQ
vhost holding exactly the users and permissions of ``deploy/rabbitmq/definitions.json``, with
the topology declared from the definitions and not by the services — and then carries a
proposal to its outcome. No Docker engine is needed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aio_pika
import httpx
import pytest
import pytest_asyncio
import yaml
from signoff_runtime.settings import AuthSettings
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.databases import fresh_database
from signoff_runtime.testing.processes import ServiceProcess, free_port
from signoff_runtime.testing.tools import needs_tool
from signoff_runtime.tokens import issue_token
from test_lifecycle import REFUND, refund_request

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ORDER: tuple[str, ...] = (
    "migrate",
    "seed",
    "provider",
    "model",
    "proposals",
    "executor",
    "reconciler",
    "agent",
    "web",
)
ONE_SHOTS = {"migrate", "seed"}


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def vhost() -> Iterator[tuple[str, dict[str, str]]]:
    """A vhost with the definitions' topology, users (fresh passwords) and permissions."""
    needs_tool("rabbitmqctl", "apt-get install rabbitmq-server: it creates the definitions' users")
    definitions = json.loads((ROOT / "deploy/rabbitmq/definitions.json").read_text())
    name = f"signoff-compose-{secrets.token_hex(3)}"
    passwords: dict[str, str] = {}
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        for perm in definitions["permissions"]:
            user = f"{name}-{perm['user']}"
            passwords[perm["user"]] = secrets.token_hex(12)
            rabbitmqctl("add_user", user, passwords[perm["user"]])
            rabbitmqctl(
                "set_permissions", "-p", name, user, perm["configure"], perm["write"], perm["read"]
            )
        yield name, passwords
    finally:
        for user in passwords:
            subprocess.run(["rabbitmqctl", "-q", "delete_user", f"{name}-{user}"], check=False)
        subprocess.run(["rabbitmqctl", "-q", "delete_vhost", name], check=False)


async def load_definitions(amqp_url: str) -> None:
    """What RabbitMQ's ``load_definitions`` does at boot: exchanges, queues, bindings."""
    definitions = json.loads((ROOT / "deploy/rabbitmq/definitions.json").read_text())
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        channel = await connection.channel()
        for ex in definitions["exchanges"]:
            await channel.declare_exchange(ex["name"], type=ex["type"], durable=ex["durable"])
        for q in definitions["queues"]:
            await channel.declare_queue(q["name"], durable=q["durable"], arguments=q["arguments"])
        for b in definitions["bindings"]:
            destination: aio_pika.abc.AbstractQueue | aio_pika.abc.AbstractExchange
            if b["destination_type"] == "exchange":  # a forward (topology.FORWARDS)
                destination = await channel.get_exchange(b["destination"], ensure=False)
            else:
                destination = await channel.get_queue(b["destination"], ensure=False)
            await destination.bind(b["source"], routing_key=b["routing_key"])


def argv(service: dict[str, Any], name: str) -> list[str]:
    command = service.get("command")
    if command is None:  # the CMD of the image's stage (one Dockerfile, a target per image)
        text = (ROOT / service["build"]["dockerfile"]).read_text()
        stage = re.split(r"^FROM .* AS ", text, flags=re.M)
        [own] = [part for part in stage if part.startswith(f"{service['build']['target']}\n")]
        command = json.loads(re.findall(r"^CMD (\[.*\])$", own, re.M)[-1])
    head, *rest = command
    if head == "signoff":
        return [sys.executable, "-c", "from signoff_cli.main import main; main()", *rest]
    assert head == "python", f"{name}: unexpected command {command}"
    return [sys.executable, *rest]


def local_env(
    env: dict[str, Any], ports: dict[str, int], database_url: str, amqp_url: str, vhost: str
) -> dict[str, str]:
    """Compose's environment with its hosts mapped to this machine (and its broker users to
    this vhost's: ``<vhost>-<user>``)."""
    out = {}
    for key, value in env.items():
        value = str(value)
        if key.startswith("OTEL_"):  # compose's trace backend (Jaeger) does not run here
            continue
        if key == "SIGNOFF_DB__URL":
            value = database_url
        elif key == "SIGNOFF_AMQP__URL":
            value = amqp_url
        elif key == "SIGNOFF_AMQP__USERS":
            users = json.loads(value)
            value = json.dumps({role: f"{vhost}-{user}" for role, user in users.items()})
        elif key.endswith("HOST") and value == "0.0.0.0":
            value = "127.0.0.1"
        for host, port in ports.items():
            value = value.replace(f"http://{host}:", "http://127.0.0.1:").replace(
                f"127.0.0.1:{_compose_port(host)}", f"127.0.0.1:{port}"
            )
        out[key] = value
    for key in [k for k in out if k.endswith("PORT")]:
        # the metrics port of its own: any free one here (compose's are fixed per container)
        out[key] = str(free_port() if key == "SIGNOFF_METRICS__PORT" else ports[_owner(key)])
    return out


_COMPOSE_PORTS = {"provider": 8010, "model": 8020, "proposals": 8002, "agent": 8001}
_COMPOSE_PORTS |= {"executor": 9103, "reconciler": 9104, "web": 8000}


def _compose_port(host: str) -> int:
    return _COMPOSE_PORTS[host]


def _owner(port_key: str) -> str:
    name = port_key.removeprefix("SIGNOFF_").split("_")[0].lower()
    return {"card": "provider"}.get(name, name)


@pytest_asyncio.fixture(loop_scope="session")
async def own_database(database_url: str) -> AsyncIterator[str]:
    """A database of this test's own: compose's relays publish every unsent outbox row they
    find, and the session's database holds other tests' rows, addressed to topologies this
    vhost does not have (the broker refuses them)."""
    async with fresh_database(database_url, "signoff_compose") as url:
        yield url


@pytest.mark.timeout(480)  # nine processes started one after another, then a whole proposal
async def test_compose_commands_reach_healthy_and_carry_a_proposal(
    vhost: tuple[str, dict[str, str]], own_database: str, tmp_path: Path
) -> None:
    database_url = own_database
    name, passwords = vhost
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    await load_definitions(f"amqp://guest:guest@127.0.0.1:5672/{quote(name, safe='')}")
    ports = {service: free_port() for service in _COMPOSE_PORTS}
    running: dict[str, ServiceProcess] = {}
    seeded: dict[str, Any] = {}
    try:
        for service_name in ORDER:
            service = compose[service_name]
            user = service_name if service_name in passwords else "admin"
            amqp = f"amqp://{name}-{user}:{passwords[user]}@127.0.0.1:5672/{quote(name, safe='')}"
            env = local_env(service.get("environment", {}), ports, database_url, amqp, name)
            command = argv(service, service_name)
            if service_name in ONE_SHOTS:
                done = await asyncio.to_thread(
                    subprocess.run,
                    command,
                    env={**_base_env(), **env},
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode == 0, f"{service_name}: {done.stdout}{done.stderr}"
                if service_name == "seed":
                    seeded = json.loads(done.stdout)
                continue
            proc = ServiceProcess(service_name, command, env, ports[service_name], tmp_path)
            running[service_name] = proc.start()
            if service_name in {"provider", "model"}:  # what the others depend on
                proc.wait_healthy(60.0)
        for proc in running.values():  # the services start side by side
            proc.wait_healthy(90.0)
        await _carry_a_proposal(seeded, ports)
    finally:
        for proc in running.values():
            proc.stop()


def _base_env() -> dict[str, str]:
    return dict(os.environ)


async def _carry_a_proposal(seeded: dict[str, Any], ports: dict[str, int]) -> None:
    org = seeded["organizations"][0]
    token = issue_token(AuthSettings(), org["users"]["manager"]["id"], org["id"])
    auth = {"Authorization": f"Bearer {token}"}
    case = org["refund_case"]
    async with httpx.AsyncClient(timeout=20.0) as http:
        created = await http.post(
            f"http://127.0.0.1:{ports['agent']}/v1/operations/{REFUND}/propose",
            json={"resource_id": case["order_id"], "request": refund_request(case)},
            headers=auth,
        )
        assert created.status_code == 201, created.text
        proposal_id = created.json()["proposal"]["id"]
        proposals = f"http://127.0.0.1:{ports['proposals']}/v1/proposals/{proposal_id}"
        approved = await http.post(f"{proposals}/approve", headers=auth)
        assert approved.status_code == 200, approved.text

        async def settled() -> str | None:
            status = str((await http.get(proposals, headers=auth)).json()["status"])
            return status if status not in {"pending", "executing"} else None

        assert await wait_until(settled, timeout=30.0, what="the outcome") == "succeeded"
