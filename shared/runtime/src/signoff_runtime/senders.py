"""Who may send what: the broker user behind each message, checked against the queue's senders.

RabbitMQ refuses a publish whose ``user_id`` property differs from the connection's user, but it
accepts one without the property (RabbitMQ's "validated user-ID" rule). So every publisher sets
``user_id`` to its own user (``broker_user``) and every consumer requires it: a message whose
``user_id`` is missing, or is not the user of a role the queue lists in
``signoff_runtime.topology.QUEUES`` (``senders``), is dead-lettered ``unexpected_sender`` by
``settle`` before its handler runs.

Users come from ``SIGNOFF_AMQP__USERS`` (role → user name, or a list of names: several web
frontends). Without it — development and tests on one shared ``guest`` connection — every role
is the service's own user; ``prod`` refuses that (``settings``).

A replayed dead letter (``signoff dlq replay``) is published by an operator's ``cli`` user, never
by its original sender: it carries that sender in ``x-signoff-sender``, which is believed only
from a replayer (``REPLAYERS``). The consumer that dead-lettered a message vouched for the same
header on its copy, and the archive believes it only from the queue's own consumer
(``original_sender``), so a replay is accepted exactly when the original would have been.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from signoff_runtime.settings import AmqpSettings, ServiceSettings, broker_user
from signoff_runtime.topology import REPLAYERS, ROLES, QueueSpec, Role

#: the header a re-published copy (dead letter, replay) names its original sender in
SENDER_HEADER = "x-signoff-sender"
__all__ = ["SENDER_HEADER", "Senders", "broker_user"]


@dataclass(frozen=True, slots=True)
class Senders:
    """One service's view: its own user (``me``) and every role's users."""

    me: str
    users: Mapping[Role, frozenset[str]]
    #: ``SIGNOFF_UNSAFE__ANY_SENDER`` (tests only): the check is off
    any_sender: bool = False

    @classmethod
    def from_amqp(cls, amqp: AmqpSettings, *, any_sender: bool = False) -> Senders:
        me = broker_user(amqp.url)
        if amqp.users:
            users = {role: frozenset(amqp.users.get(role, ())) for role in ROLES}
        else:  # one shared connection user (development, tests): it plays every role
            users = {role: frozenset((me,)) for role in ROLES}
        return cls(me=me, users=users, any_sender=any_sender)

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> Senders:
        return cls.from_amqp(settings.amqp, any_sender=settings.unsafe.any_sender)

    def of(self, roles: Iterable[Role]) -> frozenset[str]:
        return frozenset().union(*(self.users[role] for role in roles))

    def sender(self, user_id: str | None, headers: Mapping[str, Any] | None) -> str | None:
        """Whom a delivery speaks for: its ``user_id``, or the sender a replayer vouches for."""
        vouched = _text((headers or {}).get(SENDER_HEADER))
        if user_id in self.of(REPLAYERS) and vouched:
            return vouched
        return user_id or None

    def refusal(
        self, spec: QueueSpec, user_id: str | None, headers: Mapping[str, Any] | None
    ) -> str | None:
        """Why a delivery to ``spec``'s queue is refused (``None``: accepted)."""
        if self.any_sender:
            return None
        if not user_id:
            return "the message has no user_id property"
        allowed = self.of(spec.senders)
        if user_id in allowed or self.sender(user_id, headers) in allowed:
            return None
        return f"user {user_id!r} may not send to {spec.key} (senders: {', '.join(spec.senders)})"

    def original_sender(
        self, spec: QueueSpec, user_id: str | None, headers: Mapping[str, Any] | None
    ) -> str | None:
        """The original sender of a dead letter found in ``spec``'s dead-letter queue.

        A copy re-published by the queue's own consumer names it in ``x-signoff-sender``, as does
        a replay RabbitMQ dead-lettered again; a letter RabbitMQ dead-lettered itself keeps its
        publisher's ``user_id``; anything else written to the dead-letter exchange is taken as
        from whoever wrote it.
        """
        vouched = _text((headers or {}).get(SENDER_HEADER))
        if user_id in self.users[spec.consumer] | self.of(REPLAYERS) and vouched:
            return vouched
        return user_id or None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    return value if isinstance(value, str) and value else None
