"""The web's settings: ``SIGNOFF_WEB__*`` beside the shared groups."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, model_validator
from signoff_runtime.settings import ServiceSettings

DEV_SESSION_SECRET = "dev-only-session-secret-do-not-deploy-00000000"  # noqa: S105


class WebGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    agent_url: str = "http://127.0.0.1:8001"
    proposals_url: str = "http://127.0.0.1:8002"
    session_secret: SecretStr = SecretStr(DEV_SESSION_SECRET)
    session_ttl_s: int = Field(default=8 * 3600, ge=60)
    #: the person's bearer token, issued per request: short, so a leaked one is soon useless
    token_ttl_s: int = Field(default=120, ge=30, le=900)
    #: set behind HTTPS so the cookie never travels in clear
    secure_cookies: bool = False
    http_timeout_s: float = Field(default=30.0, gt=0)
    #: live pages' event streams: a comment line this often keeps an idle stream open; the
    #: session is checked again this often; an upstream silent this long is reconnected
    stream_keepalive_s: float = Field(default=15.0, gt=0)
    stream_recheck_s: float = Field(default=30.0, gt=0)
    stream_read_timeout_s: float = Field(default=60.0, gt=0)
    #: how long the list of sections the agent serves is kept (it changes on redeploy only)
    sections_cache_s: float = Field(default=60.0, ge=0)


class WebSettings(ServiceSettings):
    web: WebGroup = WebGroup()

    @model_validator(mode="after")
    def _refuse_dev_session_secret(self) -> WebSettings:
        if self.env == "prod" and self.web.session_secret.get_secret_value() == DEV_SESSION_SECRET:
            raise ValueError("SIGNOFF_WEB__SESSION_SECRET must be set outside development")
        return self
