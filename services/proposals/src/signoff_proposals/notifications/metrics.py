"""The notifier's metrics, by channel (``webhook`` / ``email``) — never a subscription or person."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

SENT = Counter(
    "signoff_notifications_sent_total",
    "Notifications delivered (a 2xx answer, or mail accepted by the SMTP server), by channel.",
    ["channel"],
)
FAILED = Counter(
    "signoff_notifications_failed_total",
    "Delivery attempts that failed, by channel and whether the delivery is now dead.",
    ["channel", "dead"],
)
BACKLOG = Gauge(
    "signoff_notifications_backlog",
    "Deliveries waiting for a (re)try whose time has come, by channel (the retry backlog).",
    ["channel"],
)
