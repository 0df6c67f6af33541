"""What the agent asks the proposals service to store: validated requests, never contracts.

The agent sends the operation (kind and version), the model-facing ``Request`` it schema-checked
(so the model hears field errors at once), the resource and the conversation — and who it speaks
for, in a form the proposals service checks itself: the person's bearer token (a turn the person
started, the machine-facing endpoint), or, for a turn started by an event, the resolved pause
point whose answer started it (``resumed_from``). Never arguments, never a preview, never an
organization or a person id: the proposals service authenticates the person, runs the
operation's ``resolve`` and stores the ``Arguments`` and ``Preview`` of that one call.

Bearer tokens travel only in these request-reply messages, over the broker, and are never stored
(the proposals service keeps no copy; the agent holds a person's token in memory for their turn).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from signoff_contracts.ids import PausePointId, ProposalId
from signoff_contracts.pause_requests import MAX_DESCRIPTION, MAX_OPTIONS, MAX_TITLE
from signoff_contracts.v1.envelope import Envelope
from signoff_contracts.v1.pause_points import AnswerableBy, PausePointKind

_BEARER_HELP = (
    "The person's bearer token (for the agent's audience). Exactly one of token or resumed_from."
)
_RESUMED_HELP = (
    "The resolved pause point (of this conversation, resolved recently) whose answer started "
    "this turn: the proposals service takes the person and organization from its own row."
)


class _OnBehalf(Envelope):
    """Who the request speaks for: exactly one of ``token`` and ``resumed_from``."""

    version: int = 2
    token: str | None = Field(default=None, max_length=8192, description=_BEARER_HELP)
    resumed_from: PausePointId | None = Field(default=None, description=_RESUMED_HELP)

    @model_validator(mode="after")
    def _one_credential(self) -> _OnBehalf:
        if (self.token is None) == (self.resumed_from is None):
            raise ValueError("exactly one of token and resumed_from")
        return self


class ProposalRequested(_OnBehalf):
    """Resolve and store a proposal (request-reply; answered by ``v1.ProposalRequestReply``).

    Idempotent by ``proposal_id`` per person: a second request for a stored id (a retry under an
    idempotency key) is answered with the stored proposal and resolves nothing.
    """

    type: Literal["proposal.requested"] = "proposal.requested"
    proposal_id: ProposalId
    operation_kind: str = Field(max_length=128)
    contract_version: int = Field(ge=1)
    resource_id: str = Field(max_length=128)
    conversation_id: str | None = Field(default=None, max_length=72)
    request: dict[str, Any] = Field(description="The operation's model-facing Request.")


class PausePointRequested(_OnBehalf):
    """Store a pause point (request-reply; answered by ``v1.PausePointRequestReply``)."""

    type: Literal["pause_point.requested"] = "pause_point.requested"
    pause_point_id: PausePointId
    conversation_id: str | None = Field(default=None, max_length=72)
    title: str = Field(max_length=MAX_TITLE)
    description: str = Field(max_length=MAX_DESCRIPTION)
    #: what a schema cannot say (blank titles, options' lengths, kinds, forms, the payload's
    #: size) is ``signoff_contracts.pause_requests.check``'s
    options: list[str] = Field(default_factory=list, max_length=MAX_OPTIONS)
    payload: dict[str, Any] | None = None
    kind: PausePointKind = "approval"
    form_schema: dict[str, Any] | None = None
    #: who may answer (the assistant's setting, never the model's): ``owner`` by default
    answerable_by: AnswerableBy = "owner"
    #: the agent's turn that asked, so the audit joins the pause point to the conversation
    turn_id: str | None = Field(default=None, max_length=72)
