"""The whole of signoff as separate processes, for end-to-end tests.

Starts the card provider simulator and the four services exactly as ``make run`` does
(``signoff serve NAME``), on free ports, against the test database and a queue prefix of their
own; gives tests small typed verbs over the public HTTP APIs. Each service connects as its own
database role, with only its privileges, as deployed (``own_roles=False``: all as the test
database's superuser — the negative control of the database roles).

With ``separate_users`` each process connects as its own role's broker user
(``e2e_broker_users``: the production permissions) and the consumers know every role's user
(``SIGNOFF_AMQP__USERS``), as deployed; the topology is then declared by the test (as the broker's
administrator would load definitions), since no service's user may declare all of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import e2e_broker_users
import httpx
from pydantic import SecretStr
from signoff_club.seed import seed_demo
from signoff_contracts.operations import Scope
from signoff_runtime import keys
from signoff_runtime.registry import load_operations
from signoff_runtime.settings import AuthSettings, IssuerSettings, broker_user
from signoff_runtime.testing import wait_until
from signoff_runtime.testing.processes import (
    SERVICES,
    ServiceProcess,
    as_own_role,
    free_port,
    provider,
    service,
)
from signoff_runtime.tokens import issue_token
from signoff_runtime.topology import Role, Topology
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

TERMINAL = {"succeeded", "revision_required", "failed", "declined", "expired", "superseded"}


@dataclass(frozen=True)
class StackKeys:
    """One token pair and one contract pair, made for a stack (never a committed key)."""

    token_private: str
    token_public: str
    contract_private: str
    contract_public: str

    @classmethod
    def generate(cls) -> StackKeys:
        _, token_private, token_public = keys.generate()
        _, contract_private, contract_public = keys.generate()
        return cls(token_private, token_public, contract_private, contract_public)

    def issuer(self) -> IssuerSettings:
        return IssuerSettings(private_key=SecretStr(self.token_private), key_id="stack-token")

    def env_of(self, name: str) -> dict[str, str]:
        """What service ``name`` holds as deployed (``deploy/k8s/base``): nothing more."""
        verifier = json.dumps({"stack-token": self.token_public})
        held = {
            "agent": {"SIGNOFF_AUTH__PUBLIC_KEYS": verifier},
            "proposals": {
                "SIGNOFF_AUTH__PUBLIC_KEYS": verifier,
                "SIGNOFF_CONTRACTS__SIGNING_KEY": self.contract_private,
                "SIGNOFF_CONTRACTS__KEY_ID": "stack-contract",
            },
            "executor": {
                "SIGNOFF_CONTRACTS__VERIFY_KEYS": json.dumps(
                    {"stack-contract": self.contract_public}
                )
            },
            "web": {
                "SIGNOFF_AUTH__PRIVATE_KEY": self.token_private,
                "SIGNOFF_AUTH__KEY_ID": "stack-token",
                "SIGNOFF_AUTH__PUBLIC_KEYS": verifier,
            },
        }
        return held.get(name, {})


@dataclass
class Stack:
    engine: AsyncEngine
    amqp_url: str
    topology: Topology
    env: dict[str, str]
    log_dir: Path
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    http: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=20.0))
    #: each service as its own database role (``False``: every one as the superuser of ``env``)
    own_roles: bool = True
    #: each process as its own role's broker user (call ``e2e_broker_users.ensure()`` first)
    separate_users: bool = False
    #: keys made for this stack, each process given only the ones it needs as deployed (the
    #: token private key to the web, the contract signing key to proposals, public keys to the
    #: verifiers); ``False``: every process trusts the committed dev-only pairs
    own_keys: bool = False
    keyring: StackKeys = field(default_factory=lambda: StackKeys.generate())

    def role_url(self, role: Role) -> str:
        """The broker URL ``role`` connects with (the shared one unless ``separate_users``)."""
        return e2e_broker_users.url(self.amqp_url, role) if self.separate_users else self.amqp_url

    def env_of(self, name: str) -> dict[str, str]:
        """The environment service ``name`` runs with; ``self.env`` stays the operator's."""
        env = as_own_role(self.env, name) if self.own_roles else dict(self.env)
        if self.own_keys:
            env |= self.keyring.env_of(name)
        if self.separate_users:
            env |= {
                "SIGNOFF_AMQP__URL": self.role_url(name),  # type: ignore[arg-type]
                "SIGNOFF_AMQP__USERS": e2e_broker_users.users_setting(),
                "SIGNOFF_AMQP__DECLARE_TOPOLOGY": "false",
            }
        return env

    # -- processes -------------------------------------------------------------------------
    def start(self) -> None:
        sim = provider(self.env, self.log_dir).start()
        self.processes["provider"] = sim
        self.env["SIGNOFF_CLUB_PROVIDER_URL"] = sim.url
        model = model_server(self.env, self.log_dir).start()
        self.processes["model"] = model
        # the agent reaches the model as any OpenAI-compatible endpoint, through the SDK's own
        # variables (as ``make run`` does once OPENAI_BASE_URL is set)
        self.env["OPENAI_BASE_URL"] = f"{model.url}/v1"
        self.env["OPENAI_API_KEY"] = "scripted"
        for name in SERVICES:
            self.processes[name] = service(name, self.env_of(name), self.log_dir).start()
        for proc in self.processes.values():
            proc.wait_healthy(60.0)

    def start_extra(self, name: str, label: str) -> ServiceProcess:
        """Another replica of ``name`` (e.g. a second executor)."""
        proc = service(name, self.env_of(name), self.log_dir)
        proc.name = label
        self.processes[label] = proc.start()
        proc.wait_healthy(60.0)
        return proc

    def start_web(self) -> ServiceProcess:
        """The web frontend (``signoff serve web``), talking to this stack's agent and proposals
        service; the browser tests and the web's authorization table share it."""
        env = {
            **self.env_of("web"),
            "SIGNOFF_WEB__AGENT_URL": self.url("agent"),
            "SIGNOFF_WEB__PROPOSALS_URL": self.url("proposals"),
        }
        proc = service("web", env, self.log_dir)
        self.processes["web"] = proc.start()
        proc.wait_healthy(60.0)
        return proc

    def stop(self) -> None:
        for proc in self.processes.values():
            proc.stop()

    def url(self, name: str) -> str:
        return self.processes[name].url

    # -- people and state ------------------------------------------------------------------
    async def seed(self) -> dict[str, Any]:
        async with self.engine.begin() as conn:
            return await seed_demo(conn)

    def token(self, user: dict[str, Any], org: dict[str, Any], audience: str | None = None) -> str:
        """A person's token from this stack's issuer (both APIs unless ``audience`` is given)."""
        issuer = self.keyring.issuer() if self.own_keys else AuthSettings()
        return issue_token(issuer, user["id"], org["id"], audience=audience)

    @staticmethod
    def auth(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    # -- verbs over the public APIs ----------------------------------------------------------
    async def propose(
        self, token: str, kind: str, resource_id: str, request: dict[str, Any]
    ) -> httpx.Response:
        return await self.http.post(
            f"{self.url('agent')}/v1/operations/{kind}/propose",
            json={"resource_id": resource_id, "request": request},
            headers=self.auth(token),
        )

    async def approve(self, token: str, proposal_id: str) -> httpx.Response:
        return await self.http.post(
            f"{self.url('proposals')}/v1/proposals/{proposal_id}/approve", headers=self.auth(token)
        )

    async def proposal(self, token: str, proposal_id: str) -> dict[str, Any]:
        response = await self.http.get(
            f"{self.url('proposals')}/v1/proposals/{proposal_id}", headers=self.auth(token)
        )
        response.raise_for_status()
        return dict(response.json())

    async def settled(self, token: str, proposal_id: str, within: float = 30.0) -> dict[str, Any]:
        """Wait until the proposal reaches a terminal status; return it."""

        async def probe() -> dict[str, Any] | None:
            view = await self.proposal(token, proposal_id)
            return view if view["status"] in TERMINAL else None

        return await wait_until(probe, timeout=within, what=f"{proposal_id} to settle")

    async def ledger(self) -> dict[str, Any]:
        response = await self.http.get(f"{self.url('provider')}/v1/ledger")
        response.raise_for_status()
        return dict(response.json())

    async def faults(self, rules: list[dict[str, Any]]) -> None:
        response = await self.http.post(
            f"{self.url('provider')}/_admin/faults", json={"rules": rules}
        )
        response.raise_for_status()

    async def resolved(
        self, kind: str, org: str, resource_id: str, request: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """What operation ``kind`` resolves for this request and scope, asked here, apart from
        the services: (arguments, preview) as JSON."""
        op = load_operations().latest(kind)
        scope = Scope(organization_id=org, section=op.section, resource_id=resource_id)
        async with self.engine.connect() as conn:
            resolved = await op.resolve(op.parse_request(request), scope, conn)
            await conn.rollback()
        return resolved.arguments.model_dump(mode="json"), resolved.preview.model_dump(mode="json")

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(text(sql), params)).scalar()

    async def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        role: Role = "proposals",
        **props: Any,
    ) -> None:
        """Publish as ``role``'s broker user (``user_id`` set to it unless ``props`` says)."""
        amqp_url = self.role_url(role)
        connection = await aio_pika.connect(amqp_url)
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            ex = await channel.get_exchange(self.topology.name(exchange))
            await ex.publish(
                aio_pika.Message(
                    body,
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    **{"user_id": broker_user(amqp_url), **props},
                ),
                routing_key=routing_key,
            )

    async def queue_depth(self, queue: str) -> int:
        connection = await aio_pika.connect(self.amqp_url)
        async with connection:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, passive=True)
            return int(declared.declaration_result.message_count or 0)

    # -- operators and faults ----------------------------------------------------------------
    async def reconciliation(self, token: str, proposal_id: str) -> dict[str, Any]:
        """The proposal's reconciliation status page (its ``status_path``)."""
        response = await self.http.get(
            f"{self.url('proposals')}/v1/proposals/{proposal_id}/reconciliation",
            headers=self.auth(token),
        )
        response.raise_for_status()
        return dict(response.json())

    async def dead_letters(self, queue: str) -> list[dict[str, Any]]:
        """Dead letters of ``queue`` (a topology key) the reconciler archived, oldest first."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT * FROM reconciler.dead_letters WHERE queue = :q ORDER BY id"),
                {"q": queue},
            )
            return [dict(row._mapping) for row in rows]

    async def signoff(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the ``signoff`` CLI against this stack (its database and queue prefix), as the
        operators' ``cli`` broker user."""
        argv = [sys.executable, "-c", "from signoff_cli.main import main; main()", *args]
        env = {**os.environ, **self.env_of("cli")}
        return await asyncio.to_thread(
            subprocess.run, argv, env=env, capture_output=True, text=True, timeout=120
        )

    def restart(self, name: str, *, kill: bool = False) -> ServiceProcess:
        """Stop a process (``kill``: SIGKILL, no shutdown) and start it again on its port."""
        old = self.processes[name]
        if kill:
            old.kill()
        else:
            old.stop()
        fresh = ServiceProcess(old.name, old.argv, old.env, old.port, old.log_dir).start()
        self.processes[name] = fresh
        fresh.wait_healthy(60.0)
        return fresh


def model_server(env: dict[str, str], log_dir: Path) -> ServiceProcess:
    """The scripted OpenAI-compatible model server (``python -m signoff_scripted_model``);
    its default script is the club's (``club``), tests force others through its admin routes."""
    port = free_port()
    env = {**env, "SIGNOFF_MODEL_PORT": str(port), "SIGNOFF_MODEL_SCRIPT": "club"}
    return ServiceProcess(
        "model", [sys.executable, "-m", "signoff_scripted_model"], env, port, log_dir
    )


def new_prefix() -> str:
    return f"e{secrets.token_hex(4)}"


async def declare_topology(amqp_url: str, topology: Topology) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await topology.declare(await connection.channel())


async def delete_topology(amqp_url: str, topology: Topology) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        await topology.delete(await connection.channel())


def gather(*aws: Any) -> Any:
    return asyncio.gather(*aws)
