"""The web's settings: ``SIGNOFF_WEB__*`` beside the shared groups.

The web signs people in, so it is a token issuer: its ``SIGNOFF_AUTH__*`` group is
``IssuerSettings`` (the token private key; no other service reads one). It holds no contract key.
In ``prod`` the session secret must be a real one and cookies are always ``Secure``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, model_validator
from signoff_runtime import secret_policy
from signoff_runtime.settings import IssuerSettings, ServiceSettings

DEV_SESSION_SECRET = "dev-only-session-secret-do-not-deploy-00000000"  # noqa: S105
#: an HMAC-SHA256 key: 32 characters at least
MIN_SESSION_SECRET_CHARS = 32


class WebGroup(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    agent_url: str = "http://127.0.0.1:8001"
    proposals_url: str = "http://127.0.0.1:8002"
    session_secret: SecretStr = SecretStr(DEV_SESSION_SECRET)
    session_ttl_s: int = Field(default=8 * 3600, ge=60)
    #: the person's bearer tokens, issued per request: short, so a leaked one is soon useless
    token_ttl_s: int = Field(default=120, ge=30, le=900)
    #: the cookie travels only over HTTPS; unset: on in ``prod`` (where ``false`` is refused)
    secure_cookies: bool | None = None
    http_timeout_s: float = Field(default=30.0, gt=0)
    #: live pages' event streams: a comment line this often keeps an idle stream open; the
    #: session is checked again this often; an upstream silent this long is reconnected
    stream_keepalive_s: float = Field(default=15.0, gt=0)
    stream_recheck_s: float = Field(default=30.0, gt=0)
    stream_read_timeout_s: float = Field(default=60.0, gt=0)
    #: how long the list of sections the agent serves is kept (it changes on redeploy only)
    sections_cache_s: float = Field(default=60.0, ge=0)
    #: sign-in attempts per minute from one address (every attempt counts), and failed ones per
    #: minute for one account (whatever the address): beyond either, ``429`` with Retry-After.
    #: Per process, like every rate here; the address is the peer uvicorn reports (behind a
    #: proxy, set FORWARDED_ALLOW_IPS so it is the client's)
    signin_per_minute_per_address: int = Field(default=20, ge=1)
    signin_failures_per_minute_per_account: int = Field(default=5, ge=1)

    def prod_refusals(self) -> list[str]:
        out = []
        found = secret_policy.refusal(
            "SIGNOFF_WEB__SESSION_SECRET",
            self.session_secret.get_secret_value(),
            MIN_SESSION_SECRET_CHARS,
        )
        if found:
            out.append(found)
        if self.secure_cookies is False:
            out.append("SIGNOFF_WEB__SECURE_COOKIES=false is refused in prod (cookies over HTTPS)")
        return out


class WebSettings(ServiceSettings):
    auth: IssuerSettings = IssuerSettings()
    web: WebGroup = WebGroup()

    @model_validator(mode="after")
    def _secure_cookies_in_prod(self) -> WebSettings:
        if self.web.secure_cookies is None:
            self.web.secure_cookies = self.env == "prod"
        return self
