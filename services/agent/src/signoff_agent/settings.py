"""The agent's settings: the shared groups plus ``SIGNOFF_AGENT__*``."""

from __future__ import annotations

from pydantic import BaseModel, Field
from signoff_runtime.settings import ServiceSettings

SCRIPTED_MODEL_URL = "http://127.0.0.1:8020/v1"


class AgentGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8001, ge=1, le=65535)
    max_body_bytes: int = Field(default=64_000, ge=1024)
    #: the model name sent to the endpoint (``scripted:<script>`` selects a scripted model)
    model: str = Field(default="scripted:club", min_length=1, max_length=200)
    #: used only when ``OPENAI_BASE_URL`` is unset: the scripted model server of ``make run``
    scripted_model_url: str = SCRIPTED_MODEL_URL
    #: per model call; the SDK retries 429/5xx/connection errors ``model_max_retries`` times
    model_timeout_s: float = Field(default=30.0, gt=0)
    model_max_retries: int = Field(default=2, ge=0, le=10)
    #: model calls per turn, and invalid tool calls per turn before the person is told
    max_model_calls: int = Field(default=8, ge=1, le=50)
    max_invalid_calls: int = Field(default=3, ge=1, le=10)
    #: bounds of what the application gives the model
    history_messages: int = Field(default=20, ge=0, le=200)
    history_chars: int = Field(default=12_000, ge=1000)
    tool_result_chars: int = Field(default=12_000, ge=500)
    reply_chars: int = Field(default=8_000, ge=200)
    note_chars: int = Field(default=500, ge=50)
    #: a turn holds its conversation this long at most (a crashed turn frees it after this)
    turn_lease_s: float = Field(default=300.0, gt=0)
    #: how often event-started turns nobody picked up are looked for
    turn_sweep_s: float = Field(default=5.0, gt=0)
    #: the events stream's keep-alive comment interval
    stream_keepalive_s: float = Field(default=15.0, gt=0)
    #: how often an open events stream checks that its person is still a member (it closes
    #: when not): a removed member stops seeing the conversation within this bound
    stream_membership_check_s: float = Field(default=30.0, gt=0, le=30)
    #: open events streams per person and process; beyond it ``429 too_many_streams``
    max_streams_per_person: int = Field(default=5, ge=1, le=100)


class AgentSettings(ServiceSettings):
    checks_tokens = True
    agent: AgentGroup = AgentGroup()
