"""``wait_for_approval``: a pause point for a decision with no side effect of its own.

Every assistant has this tool. Its arguments are checked here (the model gets a clear error
back for an over-long title, a ninth option, an unknown kind, a form schema outside the flat
subset the cards can render); the proposals service stores the pause point by request-reply
and checks the form schema fully. ``payload`` and ``form_schema`` travel as JSON *strings* so
the tool's own schema stays strict (a free-form object cannot be closed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from signoff_contracts.ids import new_id
from signoff_contracts.reasons import Reason
from signoff_contracts.secret_fields import secret_field
from signoff_contracts.v1 import PausePointRequestReply, PausePointView
from signoff_contracts.v2 import PausePointRequested
from signoff_runtime.rpc import Requester
from signoff_runtime.settings import AmqpSettings
from signoff_runtime.topology import Topology

from signoff_agent.proposing import OnBehalf

NAME = "wait_for_approval"
DESCRIPTION = (
    "Stop and ask the person for a decision that has NO side effect of its own: confirm a "
    "direction, choose between options, or fill in missing data. The conversation pauses "
    "until they answer; their answer comes back as their next message. Never use this to "
    "approve a change of state (a refund, a draft): call the matching propose_ tool instead, "
    "which shows the person the exact change for approval. Limits: title at most 80 "
    "characters, at most 8 options; payload and form_schema are JSON objects written as "
    "strings (form_schema only with kind data_entry: a flat object schema of string, integer, "
    "number or boolean fields). A form may NEVER ask for a secret: no password, passcode, PIN, "
    "card number, CVV/CVC, IBAN, social security number, token, API key or other credential "
    "(by field name or title), no `format: password`, no `writeOnly`; such a form is refused."
)
_FIELD_TYPES = frozenset({"string", "integer", "number", "boolean"})
_FIELD_KEYS = frozenset({"type", "title", "enum", "maxLength", "minimum", "maximum"})
Option = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class WaitForApprovalArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1, max_length=80, description="At most 80 characters.")
    description: str = Field(
        min_length=1, max_length=8000, description="Markdown: what is being decided and why."
    )
    options: list[Option] = Field(
        default_factory=list, max_length=8, description="Up to 8 distinct choices."
    )
    payload: str | None = Field(
        default=None, max_length=16_000, description="Optional JSON object, as a string."
    )
    kind: Literal["approval", "choice", "data_entry"] | None = Field(
        default=None, description="Defaults to `choice` when options are given, else `approval`."
    )
    form_schema: str | None = Field(
        default=None,
        max_length=16_000,
        description="For data_entry: a flat JSON object schema, as a string.",
    )


@dataclass(frozen=True, slots=True)
class PauseRequest:
    """Checked arguments, ready to send."""

    title: str
    description: str
    options: list[str]
    payload: dict[str, Any] | None
    kind: Literal["approval", "choice", "data_entry"]
    form_schema: dict[str, Any] | None


class PauseInvalid(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def check(args: WaitForApprovalArgs) -> PauseRequest:
    """What pydantic cannot say about the arguments; raises ``PauseInvalid``."""
    if len(set(args.options)) != len(args.options):
        raise PauseInvalid("options", "options must be distinct")
    kind = args.kind or ("choice" if args.options else "approval")
    if kind == "choice" and len(args.options) < 2:
        raise PauseInvalid("options", "a choice needs at least 2 options")
    payload = _json_object("payload", args.payload)
    form_schema = _json_object("form_schema", args.form_schema)
    if kind == "data_entry":
        if form_schema is None:
            raise PauseInvalid("form_schema", "kind data_entry needs a form_schema")
        _check_form(form_schema)
    elif form_schema is not None:
        raise PauseInvalid("form_schema", "form_schema is only for kind data_entry")
    return PauseRequest(
        args.title, args.description, list(args.options), payload, kind, form_schema
    )


def _json_object(field: str, raw: str | None) -> dict[str, Any] | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise PauseInvalid(field, "must be a JSON object written as a string") from None
    if not isinstance(value, dict):
        raise PauseInvalid(field, "must be a JSON object written as a string")
    return value


def _check_form(schema: dict[str, Any]) -> None:
    """The basic shape (the proposals service checks the rest): a flat object of fields."""
    if schema.get("type") != "object" or set(schema) - {"type", "properties", "required"}:
        raise PauseInvalid("form_schema", "must be {type: object, properties, required}")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 1 <= len(properties) <= 20:
        raise PauseInvalid("form_schema", "properties must hold 1 to 20 fields")
    for name, spec in properties.items():
        if secret_field(str(name), spec):
            raise PauseInvalid(
                "form_schema",
                f"field {name!r} asks for a secret (a password, PIN, card number, security code, "
                "IBAN, token or key): a form may never ask for one; ask for nothing secret",
            )
        if not isinstance(spec, dict) or spec.get("type") not in _FIELD_TYPES:
            raise PauseInvalid(
                "form_schema",
                f"field {name!r} must be a string, integer, number or boolean (no nesting)",
            )
        if set(spec) - _FIELD_KEYS:
            raise PauseInvalid("form_schema", f"field {name!r} uses an unsupported keyword")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(name not in properties for name in required):
        raise PauseInvalid("form_schema", "required must list declared fields")


@dataclass
class Pauser:
    requester: Requester
    topology: Topology
    amqp: AmqpSettings

    async def request(
        self,
        on_behalf: OnBehalf,
        conversation_id: str,
        pause: PauseRequest,
        *,
        turn_id: str | None = None,
        answerable_by: Literal["owner", "team"] = "owner",
    ) -> PausePointView | Reason:
        """The stored pause point, or the proposals service's reason for refusing it
        (``signoff_runtime.rpc.Unanswered`` when no reply comes in time). The
        person and organization are the proposals service's to establish (``on_behalf``); who
        may answer is the assistant's setting (``answerable_by``), never the model's; the turn
        that asked (``turn_id``) is stored so the audit joins it to the conversation."""
        if on_behalf.token is None and on_behalf.resumed_from is None:
            return Reason(code="unauthenticated")
        pause_point_id = new_id("pp")
        message = PausePointRequested(
            pause_point_id=pause_point_id,
            correlation_id=pause_point_id,
            source="agent",
            conversation_id=conversation_id,
            title=pause.title,
            description=pause.description,
            options=pause.options,
            payload=pause.payload,
            kind=pause.kind,
            form_schema=pause.form_schema,
            answerable_by=answerable_by,
            turn_id=turn_id,
            **on_behalf.fields(),
        )
        reply = await self.requester.ask(
            message,
            PausePointRequestReply,
            self.topology,
            "proposals.pause-points",
            self.amqp.request_timeout_s,
        )
        if reply.accepted and reply.pause_point is not None:
            return reply.pause_point
        return reply.reason or Reason(code="not_stored")
