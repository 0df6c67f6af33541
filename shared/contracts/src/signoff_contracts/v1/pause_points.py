"""Pause points: decisions with no side effect of their own (the ``wait_for_approval`` tool).

Resolving a pause point executes nothing; its resolution becomes a synthetic user message and
the agent runs the next turn on it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from signoff_contracts.ids import PausePointId
from signoff_contracts.reasons import Reason
from signoff_contracts.status import PausePointStatus
from signoff_contracts.v1.envelope import Envelope

PausePointKind = Literal["approval", "choice", "data_entry"]
#: who may answer: the person whose conversation asked (the default), or anyone of the
#: organization whose role may do more than look (an assistant's ``pause_points_answerable_by``)
AnswerableBy = Literal["owner", "team"]


class PausePointView(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: PausePointId
    organization_id: str
    conversation_id: str | None = None
    title: str
    description: str
    options: list[str] = Field(default_factory=list)
    payload: dict[str, Any] | None = None
    kind: PausePointKind
    form_schema: dict[str, Any] | None = None
    status: PausePointStatus
    created_at: AwareDatetime
    expires_at: AwareDatetime
    resolution: dict[str, Any] | None = None
    resolved_by: str | None = None
    resolved_at: AwareDatetime | None = None
    answerable_by: AnswerableBy = "owner"
    #: the agent's turn that asked (``agent.messages.turn_id``): joins the audit to the chat
    turn_id: str | None = None


class PausePointRequested(Envelope):
    """Version 1: the agent named the organization and the person. Superseded by
    ``v2.PausePointRequested`` (the person comes from their token); refused with reason
    ``unsupported_version``. Kept unchanged: a published version never loses a message."""

    type: Literal["pause_point.requested"] = "pause_point.requested"
    pause_point_id: PausePointId
    organization_id: str
    requested_by: str
    conversation_id: str | None = None
    title: str = Field(max_length=80)
    description: str = Field(max_length=8000)
    options: list[str] = Field(default_factory=list, max_length=8)
    payload: dict[str, Any] | None = None
    kind: PausePointKind = "approval"
    form_schema: dict[str, Any] | None = None


class PausePointRequestReply(Envelope):
    """The reply to ``PausePointRequested``: the stored pause point, or why it was refused."""

    type: Literal["pause_point.request_reply"] = "pause_point.request_reply"
    accepted: bool
    pause_point: PausePointView | None = None
    reason: Reason | None = None


class PausePointResolved(Envelope):
    type: Literal["pause_point.resolved"] = "pause_point.resolved"
    pause_point: PausePointView
