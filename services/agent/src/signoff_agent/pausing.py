"""``wait_for_approval``: a pause point for a decision with no side effect of its own.

Every assistant has this tool. Its arguments are checked here by the proposals service's own
rule (``signoff_contracts.pause_requests``: the model gets a clear error back at once for an
over-long title, a ninth option, an unknown kind, a form schema outside the flat subset the cards
can render, a payload over the size limit); the proposals service stores the pause point by
request-reply and checks it again. ``payload`` and ``form_schema`` travel as JSON *strings* so
the tool's own schema stays strict (a free-form object cannot be closed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from signoff_contracts import pause_requests
from signoff_contracts.ids import new_id
from signoff_contracts.pause_requests import (
    MAX_DESCRIPTION,
    MAX_OPTION,
    MAX_OPTIONS,
    MAX_PAYLOAD_BYTES,
    MAX_TITLE,
)
from signoff_contracts.reasons import Reason
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
    "which shows the person the exact change for approval. Limits: title at most "
    f"{MAX_TITLE} characters, at most {MAX_OPTIONS} options; payload and form_schema are JSON "
    "objects written as strings (form_schema only with kind data_entry: a flat object schema "
    "of string, integer, number or boolean fields). A form may NEVER ask for a secret: no "
    "password, passcode, PIN, card number, CVV/CVC, IBAN, social security number, token, API "
    "key or other credential (by field name or title), no `format: password`, no `writeOnly`; "
    "such a form is refused."
)
Option = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OPTION)]


class WaitForApprovalArgs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(
        min_length=1, max_length=MAX_TITLE, description=f"At most {MAX_TITLE} characters."
    )
    description: str = Field(
        min_length=1,
        max_length=MAX_DESCRIPTION,
        description="Markdown: what is being decided and why.",
    )
    options: list[Option] = Field(
        default_factory=list,
        max_length=MAX_OPTIONS,
        description=f"Up to {MAX_OPTIONS} distinct choices.",
    )
    payload: str | None = Field(
        default=None,
        max_length=MAX_PAYLOAD_BYTES,
        description="Optional JSON object, as a string.",
    )
    kind: Literal["approval", "choice", "data_entry"] | None = Field(
        default=None, description="Defaults to `choice` when options are given, else `approval`."
    )
    form_schema: str | None = Field(
        default=None,
        max_length=MAX_PAYLOAD_BYTES,
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


#: each refusal of ``pause_requests.check``: the argument at fault, and what the model reads
_REFUSALS: dict[str, tuple[str, str]] = {
    "title_required": ("title", "the title must not be blank"),
    "option_too_long": ("options", "option {index} must be 1 to {limit} characters"),
    "duplicate_options": ("options", "options must be distinct"),
    "too_few_options": ("options", "a choice needs at least {minimum} options"),
    "unexpected_options": ("options", "only kind choice has options"),
    "form_schema_required": ("form_schema", "kind data_entry needs a form_schema"),
    "unexpected_form_schema": ("form_schema", "form_schema is only for kind data_entry"),
    "invalid_form_schema": (
        "form_schema",
        "must be a flat {{type: object, properties, required}} of string, integer, number or "
        "boolean fields ({why}, field {field!r})",
    ),
    "payload_too_large": ("payload", "the payload is over {limit} bytes of JSON"),
}
_NEVER_ASKED_FOR = (
    "field {field!r} asks for a secret (a password, PIN, card number, security code, IBAN, "
    "token or key): a form may never ask for one; ask for nothing secret"
)


def check(args: WaitForApprovalArgs) -> PauseRequest:
    """What pydantic cannot say about the arguments; raises ``PauseInvalid``."""
    kind = args.kind or ("choice" if args.options else "approval")
    payload = _json_object("payload", args.payload)
    form_schema = _json_object("form_schema", args.form_schema)
    reason = pause_requests.check(
        title=args.title,
        options=list(args.options),
        kind=kind,
        payload=payload,
        form_schema=form_schema,
    )
    if reason is not None:
        raise _invalid(reason)
    return PauseRequest(
        args.title, args.description, list(args.options), payload, kind, form_schema
    )


def _invalid(reason: Reason) -> PauseInvalid:
    field, problem = _REFUSALS.get(reason.code, ("arguments", reason.code))
    params = {"field": None, "why": None, **reason.params}
    if params["why"] == "secret_field":
        problem = _NEVER_ASKED_FOR
    return PauseInvalid(field, problem.format(**params))


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
