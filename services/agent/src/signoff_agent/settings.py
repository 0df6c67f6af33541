"""The agent's settings: the shared groups plus ``SIGNOFF_AGENT__*``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from signoff_runtime.settings import ServiceSettings


class AgentGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8001, ge=1, le=65535)
    max_body_bytes: int = Field(default=64_000, ge=1024)


class AgentSettings(ServiceSettings):
    agent: AgentGroup = AgentGroup()
