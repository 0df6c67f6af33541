"""``SIGNOFF_NOTIFY__*``: where notices link to, how they are sent, how hard a delivery tries."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class NotifyGroup(BaseModel):
    #: the web's address: a notice links to ``{web_url}/proposals/{id}`` (the card, behind sign-in)
    web_url: str = "http://127.0.0.1:8000"
    #: the SMTP server e-mail notices go through; no user means no ``AUTH``
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(default=25, ge=1, le=65535)
    smtp_user: str | None = None
    smtp_password: SecretStr | None = None
    smtp_starttls: bool = False
    mail_from: str = "signoff <signoff@localhost>"
    #: ``False`` stores no e-mail deliveries at all (a deployment without a mail server)
    email_enabled: bool = True
    #: one reminder this long before a pending proposal expires (0: no reminder)
    reminder_before_s: float = Field(default=900.0, ge=0)
    #: one HTTP POST or SMTP conversation may take this long before it counts as failed
    send_timeout_s: float = Field(default=10.0, gt=0)
    #: a delivery fails this many times, then it is dead (kept, listed, never tried again)
    max_attempts: int = Field(default=8, ge=1, le=100)
    #: the wait after the n-th failure is ``backoff_base_s * 2**(n-1)``, at most ``backoff_max_s``
    backoff_base_s: float = Field(default=5.0, gt=0)
    backoff_max_s: float = Field(default=3600.0, gt=0)
    #: how often the delivery loop looks for due deliveries, and how many it takes at once
    interval_s: float = Field(default=1.0, gt=0)
    batch: int = Field(default=50, ge=1, le=1000)
    #: roles that manage an organization's webhook subscriptions
    manager_roles: list[str] = Field(default_factory=lambda: ["owner", "admin", "manager"])
