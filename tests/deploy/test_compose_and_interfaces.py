"""docker-compose.yml against the compose specification, environment names against the
settings classes, the broker definitions against the topology, and the generated interface
documents against the code."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
from deploy_files import DEPLOY, ROOT, compose
from kustomize_render import render
from kustomize_render import target as target_dir
from pydantic import BaseModel
from pydantic_settings import BaseSettings
from signoff_agent.settings import AgentSettings
from signoff_card_provider.settings import Settings as ProviderSettings
from signoff_cli import docs
from signoff_club.settings import ClubSettings
from signoff_executor.settings import ExecutorSettings
from signoff_proposals.settings import ProposalsSettings
from signoff_reconciler.settings import ReconcilerSettings
from signoff_runtime.topology import EXCHANGES, QUEUES, ROUTING_KEYS, Topology
from signoff_scripted_model.settings import Settings as ModelSettings
from signoff_web.settings import WebSettings

SETTINGS: tuple[type[BaseSettings], ...] = (
    AgentSettings,
    ProposalsSettings,
    ExecutorSettings,
    ReconcilerSettings,
    ProviderSettings,
    ModelSettings,
    ClubSettings,
    WebSettings,
)
#: read by the openai SDK itself (DESIGN: any OpenAI-compatible endpoint)
#: read by the SDKs themselves: the model's (openai) and the traces' (OpenTelemetry's standard set)
SDK_VARIABLES = {
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_SDK_DISABLED",
}


def env_names(cls: type[BaseSettings]) -> set[str]:
    """Every environment variable a pydantic-settings class reads (nested with its delimiter)."""
    config = cls.model_config
    prefix = (config.get("env_prefix") or "").upper()
    delimiter = config.get("env_nested_delimiter")
    names: set[str] = set()

    def walk(model: type[BaseModel], stem: str) -> None:
        for field_name, field in model.model_fields.items():
            name = f"{stem}{field_name.upper()}"
            names.add(name)
            annotation = field.annotation
            if delimiter and isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{name}{delimiter}")

    walk(cls, prefix)
    return names


KNOWN = set().union(*(env_names(cls) for cls in SETTINGS)) | SDK_VARIABLES


def test_env_name_scan_is_live() -> None:
    assert "SIGNOFF_EXECUTOR__GRACEFUL_TIMEOUT_S" in KNOWN
    assert "SIGNOFF_AMQP__DECLARE_TOPOLOGY" in KNOWN
    assert "SIGNOFF_CARD_PROVIDER_PORT" in KNOWN
    assert "SIGNOFF_EXECUTOR__NO_SUCH_THING" not in KNOWN


def _signoff_services() -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in compose()["services"].items()
        if str(svc.get("image", "")).startswith("signoff-")
    }


def compose_spec() -> dict[str, Any]:
    """The official Compose specification schema (compose-spec/compose-spec's
    ``schema/compose-spec.json``), as check-jsonschema vendors it for its compose hook."""
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(vendor.joinpath("compose-spec.json").read_text())
    return schema


def spec_errors(document: dict[str, Any]) -> list[str]:
    schema = compose_spec()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    checker = validator(schema, format_checker=validator.FORMAT_CHECKER)
    return [f"{e.json_path}: {e.message}" for e in checker.iter_errors(document)]


def test_compose_validates_against_the_compose_spec() -> None:
    assert compose_spec()["title"] == "Compose Specification"
    assert spec_errors(compose()) == []
    wrong_condition = compose()
    wrong_condition["services"]["executor"]["depends_on"]["migrate"]["condition"] = "done"
    unknown_key = compose()
    unknown_key["services"]["proposals"]["healthcheck"]["intervall"] = "5s"
    for broken in (wrong_condition, unknown_key):
        assert spec_errors(broken), "the schema must refuse a broken file"


def test_compose_runs_migrations_first_and_checks_health() -> None:
    services = compose()["services"]
    for name in ("agent", "proposals", "executor", "reconciler", "web"):
        svc = services[name]
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert "healthcheck" in svc
    for name, svc in services.items():
        if svc.get("restart") != "no":  # one-shots (migrate, seed, rabbitmq-cluster) end
            assert "healthcheck" in svc, name
    executor = services["executor"]
    assert "container_name" not in executor and "ports" not in executor, "must --scale"
    for wanted in ("rabbitmq", "postgres", "provider", "model", "prometheus", "grafana"):
        assert wanted in services


def test_every_environment_variable_is_a_setting() -> None:
    named: dict[str, set[str]] = {}
    for name, svc in _signoff_services().items():
        named[f"compose:{name}"] = set(svc.get("environment", {}))
    for target in ("base", "overlays/example"):
        for doc in render(target_dir(target)):
            if doc["kind"] == "ConfigMap":
                named[f"k8s:{doc['metadata']['name']}"] = set(doc["data"])
            for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                named[f"k8s:{doc['metadata']['name']}"] = {e["name"] for e in c.get("env", [])}
    for where, names in named.items():
        unknown = sorted(names - KNOWN)
        assert not unknown, f"{where} sets variables no settings class reads: {unknown}"


def test_definitions_hold_the_topology() -> None:
    definitions = json.loads((DEPLOY / "rabbitmq/definitions.json").read_text())
    topo = Topology("signoff", 5)
    queues = {q["name"]: q for q in definitions["queues"]}
    exchanges = {e["name"]: e for e in definitions["exchanges"]}
    bindings = {(b["source"], b["destination"], b["routing_key"]) for b in definitions["bindings"]}
    for short, kind in EXCHANGES.items():
        assert exchanges[topo.name(short)]["type"] == kind
        assert exchanges[topo.name(short)]["durable"] is True
    for spec in QUEUES:
        assert queues[topo.name(spec.key)]["arguments"] == topo.queue_arguments(spec.key)
        assert queues[topo.name(spec.key)]["durable"] is True
        assert queues[topo.dlq(spec.key)]["arguments"] == {"x-queue-type": "quorum"}
        for key in (spec.routing_key, *spec.extra_keys):
            assert (topo.name(spec.exchange), topo.name(spec.key), key) in bindings
        assert (topo.name("dlx"), topo.dlq(spec.key), topo.name(spec.key)) in bindings
        assert (topo.name("replay"), topo.name(spec.key), topo.name(spec.key)) in bindings
    users = {u["name"] for u in definitions["users"]}
    assert {"agent", "proposals", "executor", "reconciler", "web", "cli"} <= users
    assert not [u for u in definitions["users"] if u["tags"] and u["name"] != "admin"]
    executor = next(p for p in definitions["permissions"] if p["user"] == "executor")
    assert executor["read"].find("proposals") == -1, "the executor reads only its own queue"
    # amq.default routes to any queue by name: only a service answering requests may use it
    answering = {"proposals"} | ({"agent"} if "agent.resolve" in ROUTING_KEYS else set())
    default_writers = {
        p["user"] for p in definitions["permissions"] if re.search(p["write"], "amq.default")
    }
    assert default_writers == {"admin", *answering}
    replayers = {
        p["user"] for p in definitions["permissions"] if re.search(p["write"], topo.name("replay"))
    }
    assert replayers == {"admin", "cli"}


def test_generated_documents_are_current() -> None:
    stale = docs.stale(ROOT)
    assert not stale, f"run `signoff docs export` and commit: {stale}"


#: operations anyone may call (probes and metrics)
PUBLIC_PATHS = {"/healthz", "/livez", "/readyz", "/metrics"}
READABLE_ID = re.compile(r"[a-z]+(_[a-z]+)+")


def openapi_faults(document: dict[str, Any]) -> list[str]:
    """What keeps a generated client from using an OpenAPI document as it is."""
    faults = []
    scheme = document.get("components", {}).get("securitySchemes", {}).get("bearer", {})
    if (scheme.get("type"), scheme.get("scheme")) != ("http", "bearer"):
        faults.append("no HTTP bearer security scheme")
    ids = []
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            ids.append(op.get("operationId", ""))
            if not READABLE_ID.fullmatch(op.get("operationId", "")):
                faults.append(f"{where}: operation id {op.get('operationId')!r} is not readable")
            if path not in PUBLIC_PATHS and op.get("security") != [{"bearer": []}]:
                faults.append(f"{where}: no bearer security")
            for status, answer in op["responses"].items():
                bodies = answer.get("content", {})
                has_body = status.startswith("2") and status != "204"  # 204: no content, by name
                if has_body and not any(b.get("schema") for b in bodies.values()):
                    faults.append(f"{where}: {status} without a schema")
                if status.startswith("2") and any(
                    b.get("schema", {}).get("additionalProperties") is True
                    and "properties" not in b["schema"]
                    for b in bodies.values()
                ):
                    faults.append(f"{where}: {status} is an untyped object")
                if status.startswith(("4", "5")) and "application/problem+json" not in bodies:
                    faults.append(f"{where}: {status} is not a problem document")
    faults += [f"operation id {i!r} is not unique" for i in set(ids) if ids.count(i) > 1]
    return faults


def test_openapi_documents_are_usable_by_a_generated_client() -> None:
    documents = sorted((ROOT / "docs/api").glob("*.openapi.json"))
    assert [d.name for d in documents] == ["agent.openapi.json", "proposals.openapi.json"]
    for path in documents:
        assert openapi_faults(json.loads(path.read_text())) == [], path.name


def test_the_openapi_check_catches_what_a_generated_client_trips_on() -> None:
    operation = {"operationId": "list_proposals", "security": [{"bearer": []}]}
    good = {
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/v1/proposals": {
                "get": {
                    **operation,
                    "responses": {"200": {"content": {"a/b": {"schema": {"type": "string"}}}}},
                }
            },
            "/healthz": {"get": {"operationId": "health_check", "responses": {}}},
        },
    }
    assert openapi_faults(good) == []
    bad = json.loads(json.dumps(good))
    listed = bad["paths"]["/v1/proposals"]["get"]
    listed.update(operationId="list_proposals_v1_proposals_get", security=[])
    listed["responses"] = {
        "200": {"description": "OK"},
        "422": {"content": {"application/json": {"schema": {"type": "object"}}}},
    }
    bad["paths"]["/v1/other"] = {"get": {**operation, "operationId": "health_check"}}
    bad["paths"]["/v1/other"]["get"]["responses"] = {}
    assert openapi_faults(bad) == [
        "GET /v1/proposals: operation id 'list_proposals_v1_proposals_get' is not readable",
        "GET /v1/proposals: no bearer security",
        "GET /v1/proposals: 200 without a schema",
        "GET /v1/proposals: 422 is not a problem document",
        "operation id 'health_check' is not unique",
    ]
    del bad["components"]["securitySchemes"]["bearer"]["scheme"]
    assert openapi_faults(bad)[0] == "no HTTP bearer security scheme"


def test_asyncapi_documents_describe_every_queue() -> None:
    consumed = set()
    for path in (ROOT / "docs/api").glob("*.asyncapi.json"):
        document = json.loads(path.read_text())
        assert document["asyncapi"].startswith("3.")
        consumed |= {c["address"] for c in document["channels"].values() if "queue" in str(c)}
    assert {Topology("signoff").name(spec.key) for spec in QUEUES} <= consumed


def test_the_broker_management_port_is_reachable_from_this_host_only() -> None:
    """Its users (guest in compose, the service users) must not be exposed beyond localhost."""
    ports = [str(p) for p in compose()["services"]["rabbitmq"].get("ports", [])]
    assert ports, "the management UI is published for people on this host"
    assert all(p.startswith("127.0.0.1:") for p in ports), ports
