"""Production refuses to start unsafe, and ``signoff serve`` refuses to start without SIGNOFF_ENV.

In ``prod``: no committed key (the dev-only pairs, private or public), no placeholder, no value
committed in this repository (the manifests' ``CHANGE-ME``, compose's dev passwords, ``guest``),
no secret shorter than its minimum, no cookie without ``Secure``. The repository is scanned, so a
secret committed later that the check would let through fails here.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import ValidationError
from signoff_agent.settings import AgentSettings
from signoff_executor.settings import ExecutorSettings
from signoff_proposals.settings import ProposalsSettings
from signoff_runtime import keys, secret_policy
from signoff_runtime.settings import ServiceSettings, refusals
from signoff_runtime.topology import ROLES
from signoff_web.settings import DEV_SESSION_SECRET, WebSettings

ROOT = Path(__file__).resolve().parents[2]


def good_env() -> dict[str, str]:
    """A production environment nothing in it is refused: everything made for this run."""
    _, token_private, token_public = keys.generate()
    _, contract_private, contract_public = keys.generate()
    return {
        "SIGNOFF_ENV": "prod",
        "SIGNOFF_DB__URL": f"postgresql+asyncpg://signoff:{secrets.token_urlsafe(18)}@db/signoff",
        "SIGNOFF_AMQP__URL": f"amqp://web:{secrets.token_urlsafe(18)}@rabbitmq:5672/",
        "SIGNOFF_AMQP__USERS": json.dumps({role: role for role in ROLES}),
        "SIGNOFF_AUTH__PUBLIC_KEYS": json.dumps({"t1": token_public}),
        "SIGNOFF_AUTH__PRIVATE_KEY": token_private,
        "SIGNOFF_CONTRACTS__SIGNING_KEY": contract_private,
        "SIGNOFF_CONTRACTS__VERIFY_KEYS": json.dumps({"c1": contract_public}),
        "SIGNOFF_WEB__SESSION_SECRET": secrets.token_urlsafe(32),
    }


@pytest.fixture
def prod(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in os.environ:
        if name.startswith("SIGNOFF_"):
            monkeypatch.delenv(name)
    for name, value in good_env().items():
        monkeypatch.setenv(name, value)
    return monkeypatch


def refused(settings_class: type[ServiceSettings]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        settings_class()
    return refusals(caught.value)


@pytest.mark.parametrize(
    "settings_class", [ServiceSettings, ProposalsSettings, ExecutorSettings, WebSettings]
)
def test_a_real_production_environment_starts(
    prod: pytest.MonkeyPatch, settings_class: type[ServiceSettings]
) -> None:
    assert settings_class().env == "prod"


def test_cookies_are_secure_in_prod_and_false_is_refused(prod: pytest.MonkeyPatch) -> None:
    assert WebSettings().web.secure_cookies is True
    prod.setenv("SIGNOFF_WEB__SECURE_COOKIES", "false")
    [line] = refused(WebSettings)
    assert "SIGNOFF_WEB__SECURE_COOKIES=false is refused" in line
    prod.setenv("SIGNOFF_ENV", "dev")
    assert WebSettings().web.secure_cookies is False


#: variable, refused value, the service settings that read it, what the refusal says
REFUSED = [
    ("SIGNOFF_AUTH__PUBLIC_KEYS", json.dumps({"dev-only-token": keys.DEV_ONLY_TOKEN_PUBLIC_KEY}),
     ProposalsSettings, "committed dev-only token key"),
    ("SIGNOFF_AUTH__PUBLIC_KEYS", json.dumps({"t0": keys.DEV_ONLY_TOKEN_PUBLIC_KEY}),
     AgentSettings, "committed dev-only token key"),
    ("SIGNOFF_AUTH__PRIVATE_KEY", keys.DEV_ONLY_TOKEN_PRIVATE_KEY, WebSettings,
     "committed dev-only token key"),
    ("SIGNOFF_CONTRACTS__SIGNING_KEY", keys.DEV_ONLY_CONTRACT_PRIVATE_KEY, ProposalsSettings,
     "committed dev-only contract key"),
    ("SIGNOFF_CONTRACTS__VERIFY_KEYS",
     json.dumps({"c0": keys.DEV_ONLY_CONTRACT_PUBLIC_KEY}), ExecutorSettings,
     "committed dev-only contract key"),
    ("SIGNOFF_WEB__SESSION_SECRET", DEV_SESSION_SECRET, WebSettings, "placeholder"),
    ("SIGNOFF_WEB__SESSION_SECRET", "CHANGE-ME-at-least-32-characters-long-secret", WebSettings,
     "placeholder"),
    ("SIGNOFF_WEB__SESSION_SECRET", "Zq81vN0x-short-but-random", WebSettings,
     "shorter than 32"),
    ("SIGNOFF_DB__URL", "postgresql+asyncpg://signoff:CHANGE-ME@postgres:5432/signoff",
     ServiceSettings, "placeholder"),
    ("SIGNOFF_DB__URL", "postgresql+asyncpg://signoff:signoff@postgres:5432/signoff",
     ServiceSettings, "committed"),
    ("SIGNOFF_AMQP__URL", "amqp://guest:guest@127.0.0.1:5672/", ServiceSettings, "committed"),
    ("SIGNOFF_AMQP__URL", "amqp://agent:agent-dev-password@rabbitmq:5672/", ServiceSettings,
     "placeholder"),
    ("SIGNOFF_AMQP__URL", "amqp://agent:Zq81vN0x@rabbitmq:5672/", ServiceSettings,
     "shorter than 16"),
    ("SIGNOFF_AUTH__JWKS_URL", "http://idp.internal/jwks.json", AgentSettings, "https"),
]  # fmt: skip


@pytest.mark.parametrize(("variable", "value", "settings_class", "says"), REFUSED)
def test_prod_refuses_committed_placeholder_and_short_secrets(
    prod: pytest.MonkeyPatch,
    variable: str,
    value: str,
    settings_class: type[ServiceSettings],
    says: str,
) -> None:
    prod.setenv(variable, value)
    [line] = refused(settings_class)
    assert variable in line and says in line, line
    if "KEY" in variable or "SECRET" in variable or "URL" in variable:
        secret_part = value.rsplit("@", 1)[0].rsplit(":", 1)[-1] if "URL" in variable else value
        assert secret_part not in line or len(secret_part) < 8, "a refusal never quotes a secret"
    prod.setenv("SIGNOFF_ENV", "dev")
    assert settings_class()  # development accepts it: make run needs no configuration


@pytest.mark.parametrize(
    ("settings_class", "expected"),
    [
        (
            WebSettings,
            ["SIGNOFF_AMQP__USERS", "SIGNOFF_AUTH__PRIVATE_KEY", "SIGNOFF_WEB__SESSION_SECRET"],
        ),
        (
            ProposalsSettings,
            ["SIGNOFF_AMQP__USERS", "SIGNOFF_AUTH__PUBLIC_KEYS", "SIGNOFF_CONTRACTS__SIGNING_KEY"],
        ),
        (AgentSettings, ["SIGNOFF_AMQP__USERS", "SIGNOFF_AUTH__PUBLIC_KEYS"]),
        (ExecutorSettings, ["SIGNOFF_AMQP__USERS", "SIGNOFF_CONTRACTS__VERIFY_KEYS"]),
    ],
)
def test_with_nothing_configured_prod_names_each_committed_default_a_service_uses(
    monkeypatch: pytest.MonkeyPatch, settings_class: type[ServiceSettings], expected: list[str]
) -> None:
    for name in os.environ:
        if name.startswith("SIGNOFF_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SIGNOFF_ENV", "prod")
    [line] = refused(settings_class)
    named = sorted(set(re.findall(r"SIGNOFF_[A-Z_]+", line)))
    assert named == sorted(expected), line


def test_a_service_that_checks_no_token_needs_no_token_key(prod: pytest.MonkeyPatch) -> None:
    """The executor, reconciler and migrations read no SIGNOFF_AUTH__*: none is required."""
    prod.delenv("SIGNOFF_AUTH__PUBLIC_KEYS")
    assert ExecutorSettings().env == "prod" and ServiceSettings().env == "prod"
    with pytest.raises(ValidationError):
        ProposalsSettings()


# -- every secret committed in the repository is refused ---------------------------------------

_KEYLIKE = re.compile(r"(?<![\w-])[A-Za-z0-9_-]{43}(?![\w-])")
_SECRET_NAME = re.compile(r"secret|password|private|signing|key", re.I)


def committed_values() -> list[tuple[str, str]]:
    """(where, value) of each secret-like value in the deploy files and the example env."""
    found: list[tuple[str, str]] = []
    env_example = (ROOT / ".env.example").read_text()
    for line in env_example.splitlines():
        name, _, value = line.partition("=")
        if not line.startswith("#") and value and (_SECRET_NAME.search(name) or "URL" in name):
            found.append((f".env.example {name}", value))
    for compose_file in ("docker-compose.yml", "deploy/rabbitmq/cluster.compose.yml"):
        compose = yaml.safe_load((ROOT / compose_file).read_text())
        for service, spec in (compose.get("services") or {}).items():
            for name, value in (spec.get("environment") or {}).items():
                if _SECRET_NAME.search(name) or "URL" in name:
                    found.append((f"{compose_file} {service} {name}", str(value)))
    for path in sorted((ROOT / "deploy").rglob("*")):
        if path.suffix in {".yaml", ".yml", ".env", ".json", ".example"} and path.is_file():
            text = path.read_text()
            if path.name.endswith((".env", ".env.example")):  # the Secret an overlay generates
                for line in text.splitlines():
                    name, sep, value = line.partition("=")
                    if sep and not line.startswith("#"):
                        found.append((f"{path.relative_to(ROOT)} {name}", value))
            found += [(str(path.relative_to(ROOT)), m) for m in _KEYLIKE.findall(text)]
            for doc in yaml.safe_load_all(text) if path.suffix in {".yaml", ".yml"} else []:
                if isinstance(doc, dict) and doc.get("kind") == "Secret":
                    for name, value in (doc.get("stringData") or {}).items():
                        found.append((f"{path.relative_to(ROOT)} {name}", str(value)))
    return found


def _refuses(value: str) -> bool:
    if "://" in value:  # a URL without a password holds no secret
        return urlsplit(value).password is None or bool(secret_policy.url_refusals("U", value))
    if value.startswith("{"):  # kid -> public key: only committed or placeholder keys
        return all(_refuses(key) for key in json.loads(value).values())
    if value in keys.DEV_ONLY_KEYS:
        return True
    return secret_policy.refusal("VALUE", value) is not None


def test_every_secret_committed_in_the_repository_is_refused_in_prod() -> None:
    found = committed_values()
    assert any("CHANGE-ME" in v for _, v in found) or any(
        v in keys.DEV_ONLY_KEYS for _, v in found
    ), "the scan reads the committed files"
    let_through = [(where, value[:6]) for where, value in found if not _refuses(value)]
    assert not let_through, f"committed secrets production would accept: {let_through}"


# -- signoff serve needs SIGNOFF_ENV --------------------------------------------------------------


def test_signoff_serve_without_signoff_env_refuses_with_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_ENV"}
    done = subprocess.run(
        [sys.executable, "-c", "from signoff_cli.main import main; main()", "serve", "executor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done
    assert done.stderr == (
        "signoff executor: refusing to start: SIGNOFF_ENV is not set (prod, test or dev; "
        "`signoff dev run` sets dev)\n"
    ), done.stderr
    assert done.stdout == ""
