"""The assistant SDK: one section's assistant, its bounded context and its tools.

An assistant is confined to one *section* of the application (``orders``, ``email``) and opens
on one *resource* of it (an order, a broadcast form). The agent service loads assistants by
entry point (``signoff.assistants``) and knows no section by name; everything the model may
see or do in a section is declared here:

=====================  ======================================================================
part                   contract
=====================  ======================================================================
``instructions``       per-locale text the application writes; the model's standing orders
``exists``             is the resource in the caller's organization (else the conversation
                       is refused with 404 — indistinguishable from "no such thing")
``context``            a short application-written summary of the resource; the agent bounds
                       it to ``max_context_chars`` whatever the assistant returns
``read_tools``         ``ReadTool`` instances: name, description, a pydantic ``Parameters``
                       model (its strict JSON schema is generated) and ``run(conn, scope,
                       args)``; the scope is the server's, never a model argument
``propose_tools``      ``ProposeTool``: a model-facing tool name → an operation kind; the
                       tool's schema is generated from the operation's ``Request``
``title``              per-locale name of the section as a person reads it (``Orders``); a
                       frontend lists the sections the agent serves under these titles
``resources``          the organization's resources a conversation can open on (newest or
                       most useful first, at most ``limit``), each an id and a short label in
                       the reader's locale — where a frontend offers "ask the assistant"
``pause_points_        who may answer its ``wait_for_approval`` pause points: ``"owner"`` (the
answerable_by``        default: the person whose conversation asked) or ``"team"`` (anyone of
                       the organization whose role may do more than look); never the model's
=====================  ======================================================================

Strict tool schemas (``strict_parameters``) follow the rules of OpenAI's strict mode: every
object closed (``additionalProperties: false``), every property required, optional fields
nullable (``strict_input`` turns a ``null`` back into "not given" before validation), no
``$ref``, and only keywords strict mode accepts. Constraints strict mode cannot express are
still enforced, by the pydantic model, when the call is parsed.

Like ``operations``, this module is pure: no I/O, no driver; ``conn`` is whatever the service
passes.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from signoff_contracts.operations import LOCALES, Locale, Scope, refuse_nul

ParamsT = TypeVar("ParamsT", bound=BaseModel)

#: tool names OpenAI accepts (an operation kind with its dot does not qualify)
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECTION = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: keywords strict mode accepts; everything else is dropped from the generated schema
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "description",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)


class AssistantDefinitionError(TypeError):
    """An assistant class is missing a part or declares one wrongly (raised at load time)."""


class NoParameters(BaseModel):
    """The parameters of a read tool that takes none (its scope says everything)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class ReadTool(ABC, Generic[ParamsT]):
    """A read-only tool: scoped by the server, answering JSON-able data the model may read.

    ``run`` must return only what the model may see: names, amounts, opaque ids — never a
    tenant id, a provider payload or another organization's row. It must stay small (the
    agent refuses a result over its size bound rather than cut it mid-record).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Parameters: ClassVar[type[BaseModel]] = NoParameters

    @abstractmethod
    async def run(self, conn: Any, scope: Scope, args: ParamsT) -> dict[str, Any]:
        """Read inside ``scope`` (organization and resource from the server)."""


@dataclass(frozen=True, slots=True)
class ResourceItem:
    """One resource a conversation can open on, as a list shows it (never a tenant id)."""

    id: str
    label: str


@dataclass(frozen=True, slots=True)
class ProposeTool:
    """A model-facing name for proposing one operation (its ``Request`` is the schema)."""

    name: str
    kind: str
    description: str


class Assistant(ABC):
    """Base of every section's assistant. See the module docstring for the parts."""

    section: ClassVar[str]
    resource: ClassVar[str]
    instructions: ClassVar[dict[Locale, str]]
    read_tools: ClassVar[tuple[ReadTool[Any], ...]] = ()
    propose_tools: ClassVar[tuple[ProposeTool, ...]] = ()
    max_context_chars: ClassVar[int] = 4000
    #: optional for backward compatibility: a missing locale falls back to ``section``
    title: ClassVar[dict[Locale, str]] = {}
    #: who may answer this assistant's pause points (``wait_for_approval``): ``"owner"`` — only
    #: the person whose conversation asked (the default) — or ``"team"``: anyone of the
    #: organization whose role may do more than look. The assistant's author decides, never
    #: the model: the tool has no such argument.
    pause_points_answerable_by: ClassVar[Literal["owner", "team"]] = "owner"

    @abstractmethod
    async def exists(self, conn: Any, scope: Scope) -> bool:
        """Is ``scope.resource_id`` a resource of ``scope.organization_id`` in this section?"""

    @abstractmethod
    async def context(self, conn: Any, scope: Scope) -> str:
        """A short, application-written summary of the resource for the model."""

    async def resources(
        self, conn: Any, organization_id: str, locale: Locale, limit: int
    ) -> list[ResourceItem]:
        """The organization's resources of this section a person may open a conversation on.

        The default lists none: the section still serves conversations opened by id.
        """
        return []

    def title_in(self, locale: Locale) -> str:
        return self.title.get(locale) or self.section


def check_assistant(cls: type[Any]) -> None:
    """Raise ``AssistantDefinitionError`` naming every missing or malformed part of ``cls``."""
    if not (isinstance(cls, type) and issubclass(cls, Assistant)):
        raise AssistantDefinitionError(f"{cls!r} is not an Assistant subclass")
    problems: list[str] = []
    for name in ("section", "resource", "instructions"):
        if not hasattr(cls, name):
            problems.append(f"missing `{name}`")
    if hasattr(cls, "section") and not _SECTION.match(str(cls.section)):
        problems.append(f"`section` {cls.section!r} must be a lower-case word")
    instructions = getattr(cls, "instructions", {})
    problems += [
        f"no instructions for locale {loc!r}" for loc in LOCALES if loc not in instructions
    ]
    title = getattr(cls, "title", {})
    if title:
        problems += [f"no title for locale {loc!r}" for loc in LOCALES if loc not in title]
    names = [tool.name for tool in cls.read_tools] + [tool.name for tool in cls.propose_tools]
    problems += [
        f"tool name {n!r} is not a valid tool name" for n in names if not TOOL_NAME.match(n)
    ]
    problems += [
        f"tool name {n!r} is declared twice" for n in sorted(set(names)) if names.count(n) > 1
    ]
    for tool in cls.read_tools:
        problems += [f"read tool {tool.name!r}: {p}" for p in _model_problems(tool.Parameters)]
    if getattr(cls, "pause_points_answerable_by", "owner") not in ("owner", "team"):
        problems.append("`pause_points_answerable_by` must be 'owner' or 'team'")
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        problems.append("unimplemented: " + ", ".join(missing))
    if problems:
        raise AssistantDefinitionError(f"assistant {cls.__qualname__}: " + "; ".join(problems))


def _model_problems(model: Any) -> list[str]:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ["`Parameters` must be a pydantic model"]
    if model.model_config.get("extra") != "forbid":
        return ["`Parameters` must forbid unknown fields (extra='forbid')"]
    return []


def strict_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The strict-mode JSON schema of ``model``: closed, all required, optionals nullable."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    return _strict(_inline(schema, defs))


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """Replace every ``$ref`` by the definition it names (pydantic's refs are acyclic here)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, defs)
        return {key: _inline(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def _strict(node: dict[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in node.items() if key in _STRICT_KEYWORDS}
    if "anyOf" in out:
        out["anyOf"] = [_strict(branch) for branch in out["anyOf"]]
    if "items" in out and isinstance(out["items"], dict):
        out["items"] = _strict(out["items"])
    if out.get("type") == "object" or "properties" in node:
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        out["type"] = "object"
        out["properties"] = {
            name: _strict(spec) if name in required else _nullable(_strict(spec))
            for name, spec in properties.items()
        }
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def _nullable(spec: dict[str, Any]) -> dict[str, Any]:
    branches = spec.get("anyOf")
    if branches is not None:
        if not any(branch.get("type") == "null" for branch in branches):
            spec = {**spec, "anyOf": [*branches, {"type": "null"}]}
        return spec
    description = spec.get("description")
    inner = {key: value for key, value in spec.items() if key != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def strict_input(model: type[ParamsT], data: Any) -> ParamsT:
    """Validate a strict-mode call: a ``null`` for an optional field means "not given"."""
    refuse_nul(model, data)
    if isinstance(data, dict):
        optional = {name for name, field in model.model_fields.items() if not field.is_required()}
        data = {k: v for k, v in data.items() if not (v is None and k in optional)}
    return model.model_validate(data)
