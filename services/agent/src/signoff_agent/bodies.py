"""The agent's response bodies, as the OpenAPI document describes them.

The routes build these bodies themselves (``views``, the proposals service's reply); the models
only name their shapes so a generated client is typed. They are declared with
``signoff_runtime.openapi.ok``, documentation only: what a route sends is unchanged.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from signoff_contracts.operations import RenderedPreview
from signoff_contracts.v1 import ProposalView


class Proposed(BaseModel):
    """A stored proposal and its fixed preview, rendered in the proposer's locale."""

    proposal: ProposalView
    rendered_preview: RenderedPreview | None = None


class Message(BaseModel):
    id: str
    seq: int
    role: str
    synthetic: bool
    author: str | None
    text: str = Field(description="Rendered in the reader's locale for app messages.")
    code: str | None
    params: dict[str, Any]
    proposal_id: str | None
    pause_point_id: str | None
    created_at: str


class Card(BaseModel):
    id: str
    type: str
    status: str
    operation_kind: str | None
    replaced_by: str | None
    replaces: str | None
    updated_at: str


class Conversation(BaseModel):
    id: str
    section: str
    resource_id: str
    created_by: str
    created_at: str
    turn_running: bool
    messages: list[Message]
    cards: dict[str, Card] = Field(description="The proposal and pause-point cards, by id.")


class Turn(BaseModel):
    """A turn answered in full (without ``Accept: text/event-stream``)."""

    conversation_id: str
    turn_id: str
    messages: list[Message]


class Section(BaseModel):
    section: str
    resource: str
    title: dict[str, str]


class Sections(BaseModel):
    items: list[Section]
    next_cursor: str | None


class Resource(BaseModel):
    id: str
    label: str


class Resources(BaseModel):
    section: str
    items: list[Resource]
    next_cursor: str | None
