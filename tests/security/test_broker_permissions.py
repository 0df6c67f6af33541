"""Per-service broker users: the agent cannot publish execution contracts, the web cannot
publish outcomes.

Creates the users of ``signoff_cli.rabbit_users`` in a fresh vhost of the local broker with
``rabbitmqctl`` (as ``make run`` does in ``/``), declares the topology as guest, and publishes as
the agent's user. Skipped where there is no ``rabbitmqctl``.
"""

from __future__ import annotations

import subprocess
import uuid
from urllib.parse import quote

import aio_pika
import pytest
from aio_pika.exceptions import ChannelClosed
from signoff_cli.rabbit_definitions import USERS
from signoff_cli.rabbit_users import commands
from signoff_runtime.testing.tools import needs_tool
from signoff_runtime.topology import ROUTING_KEYS, Topology

pytestmark = pytest.mark.integration
needs_tool("rabbitmqctl", "apt-get install rabbitmq-server: it creates the broker users")


def ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def vhost() -> str:  # type: ignore[misc]
    name = f"signoff-sec-{uuid.uuid4().hex[:8]}"
    prefix = f"sec{uuid.uuid4().hex[:6]}"
    ctl("add_vhost", name)
    ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    for args in commands(prefix, name):
        if args[0] != "change_password":
            ctl(*args)
    yield f"{name}|{prefix}"
    ctl("delete_vhost", name)
    for service in USERS:
        subprocess.run(
            ["rabbitmqctl", "-q", "delete_user", f"{prefix}-{service}"],
            capture_output=True,
            timeout=60,
            check=False,
        )


async def publish(url: str, exchange: str, key: str) -> None:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        target = await channel.get_exchange(exchange, ensure=False)
        await target.publish(aio_pika.Message(b"{}"), routing_key=key)
        await channel.close()
    finally:
        await connection.close()


async def test_the_agents_user_may_ask_proposals_but_never_publish_contracts_or_outcomes(
    vhost: str,
) -> None:
    name, prefix = vhost.split("|")
    topology = Topology(prefix, 3)
    guest = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:5672/{quote(name, safe='')}")
    async with guest:
        await topology.declare(await guest.channel())
    agent = f"amqp://{prefix}-agent:agent-dev-password@127.0.0.1:5672/{quote(name, safe='')}"

    await publish(agent, topology.name("commands"), ROUTING_KEYS["proposals.requests"])
    for refused in ("contracts", "outcomes"):
        with pytest.raises(ChannelClosed, match="ACCESS_REFUSED"):
            await publish(agent, topology.name(refused), ROUTING_KEYS["executor.contracts"])
    if "agent.resolve" not in ROUTING_KEYS:  # it answered revision requests over reply-to
        with pytest.raises(ChannelClosed, match="ACCESS_REFUSED"):
            await publish(agent, "", topology.name("proposals.outcomes"))


async def test_the_webs_user_may_send_approval_commands_but_never_outcomes_or_contracts(
    vhost: str,
) -> None:
    name, prefix = vhost.split("|")
    topology = Topology(prefix, 3)
    guest = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:5672/{quote(name, safe='')}")
    async with guest:
        await topology.declare(await guest.channel())
    web = f"amqp://{prefix}-web:web-dev-password@127.0.0.1:5672/{quote(name, safe='')}"

    await publish(web, topology.name("commands"), ROUTING_KEYS["proposals.approvals"])
    for refused, key in (("outcomes", "proposals.outcomes"), ("contracts", "executor.contracts")):
        with pytest.raises(ChannelClosed, match="ACCESS_REFUSED"):
            await publish(web, topology.name(refused), ROUTING_KEYS[key])
    # nor around them: the default exchange routes to any queue by name
    with pytest.raises(ChannelClosed, match="ACCESS_REFUSED"):
        await publish(web, "", topology.name("proposals.outcomes"))
