"""What a notification says: the ``signoff`` JSON body, the Slack blocks, the e-mail.

Every format is built from one ``Summary`` — the operation's own rendered preview (never the
raw arguments, never model-written text) and the link to the card. The link only points at the
web's card, which asks the reader to sign in: it carries no token and authorizes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from signoff_contracts.v1 import ProposalEvent, ProposalView
from signoff_runtime.registry import Operations, UnknownOperation

#: what each event says in a subject or a chat line
HEADLINES = {
    "created": "Waiting for approval",
    "decided": "Decided",
    "executing": "Approved, running",
    "outcome": "Finished",
    "superseded": "Replaced by a revision",
    "expired": "Expired",
    "escalated": "Needs an operator",
    "reminder": "Still waiting for approval, expires soon",
}


@dataclass(frozen=True, slots=True)
class Summary:
    proposal_id: str
    organization_id: str
    event: str
    status: str
    title: str
    lines: list[tuple[str, str]]
    url: str
    expires_at: str
    occurred_at: str
    message_id: str
    outcome: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "organization_id": self.organization_id,
            "event": self.event,
            "status": self.status,
            "title": self.title,
            "lines": [list(line) for line in self.lines],
            "url": self.url,
            "expires_at": self.expires_at,
            "occurred_at": self.occurred_at,
            "message_id": self.message_id,
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Summary:
        lines = [(str(label), str(value)) for label, value in data["lines"]]
        return cls(**{**data, "lines": lines})


def summarize(event: ProposalEvent, operations: Operations, web_url: str) -> Summary:
    return summary_of(
        event.proposal, event.event, event.occurred_at, event.message_id, operations, web_url
    )


def summary_of(
    view: ProposalView,
    event: str,
    occurred_at: datetime,
    message_id: str,
    operations: Operations,
    web_url: str,
) -> Summary:
    title, lines = view.operation_kind, []
    try:
        op = operations.get(view.operation_kind, view.contract_version)
        rendered = op.render_preview(op.parse_preview(view.preview), "en")
        title, lines = rendered.title, [(line.label, line.value) for line in rendered.lines]
    except (UnknownOperation, ValueError):
        pass  # an operation this process cannot render: the kind still says what it is
    return Summary(
        proposal_id=view.id,
        organization_id=view.organization_id,
        event=event,
        status=view.status.value,
        title=title,
        lines=lines,
        url=card_url(web_url, view.id),
        expires_at=view.expires_at.isoformat(),
        occurred_at=occurred_at.isoformat(),
        message_id=message_id,
        outcome=view.outcome.type if view.outcome is not None else None,
    )


def card_url(web_url: str, proposal_id: str) -> str:
    return f"{web_url.rstrip('/')}/proposals/{proposal_id}"


def signoff_body(summary: Summary, delivery_id: int) -> dict[str, Any]:
    """The ``signoff`` format: one JSON object per event, ``type`` = ``proposal.<event>``."""
    return {"id": f"dlv_{delivery_id}", "type": f"proposal.{summary.event}", **summary.as_json()}


def slack_body(summary: Summary) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook message: title, the preview's lines, the card link."""
    headline = HEADLINES.get(summary.event, summary.event)
    fields = [{"type": "mrkdwn", "text": f"*{label}*\n{value}"} for label, value in summary.lines]
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}:* {summary.title}"}}
    ]
    if fields:
        blocks.append({"type": "section", "fields": fields[:10]})  # Slack's limit per section
    blocks.append(
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "text": {"type": "plain_text", "text": "Open in signoff"},
                    "url": summary.url,
                }
            ],
        }
    )
    return {"text": f"{headline}: {summary.title}", "blocks": blocks}


def email(summary: Summary, kind: str, sender: str, recipient: str) -> EmailMessage:
    """A plain-text notice to one person: what waits, and where to sign in to decide it."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = recipient
    message["Subject"] = f"[signoff] {HEADLINES.get(kind, kind)}: {summary.title}"
    lines = "\n".join(f"  {label}: {value}" for label, value in summary.lines)
    message.set_content(
        f"{summary.title}\n{lines}\n\n"
        f"It waits for a decision until {summary.expires_at}.\n"
        f"Open it (you will be asked to sign in): {summary.url}\n\n"
        "You get this because you may approve it. Turn these notices off in signoff: "
        'PUT /v1/notifications/preferences {"email": false}.\n'
    )
    return message
