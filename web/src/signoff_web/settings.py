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
    #: sign-in attempts per minute from one address (every attempt counts), and failed ones per
    #: minute for one account (whatever the address): beyond either, ``429`` with Retry-After.
    #: Per process, like every rate here; the address is the peer uvicorn reports (behind a
    #: proxy, set FORWARDED_ALLOW_IPS so it is the client's)
    signin_per_minute_per_address: int = Field(default=20, ge=1)
    signin_failures_per_minute_per_account: int = Field(default=5, ge=1)


class WebSettings(ServiceSettings):
    web: WebGroup = WebGroup()

    @model_validator(mode="after")
    def _refuse_dev_session_secret(self) -> WebSettings:
        if self.env == "prod" and self.web.session_secret.get_secret_value() == DEV_SESSION_SECRET:
            raise ValueError("SIGNOFF_WEB__SESSION_SECRET must be set outside development")
        return self
