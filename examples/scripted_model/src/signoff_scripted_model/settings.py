"""Settings of the scripted model server, read once from ``SIGNOFF_MODEL_*``.

It is a test double, so the admin routes (request log, forced script, faults, reset) are on
by default; ``allow_admin=false`` serves only what a real endpoint would.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where to listen, which script answers plain model names, whether admin is served."""

    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_MODEL_", env_ignore_empty=True, frozen=True
    )

    host: str = Field(default="127.0.0.1", description="Interface to bind.")
    port: int = Field(default=8020, ge=0, le=65535, description="TCP port to bind.")
    script: str = Field(
        default="echo",
        min_length=1,
        description="Script for requests whose model is not 'scripted:<name>'.",
    )
    allow_admin: bool = Field(default=True, description="Serve the /_admin/* routes.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level of the service."
    )
