"""An optional part of a directory: who an organization's people are and where mail reaches them.

The notifier asks it for the people who may approve a waiting proposal (each ``Contact`` is
checked with the operation's own ``authorize``); a directory without it gets webhooks only.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import ConfigDict

from signoff_contracts.operations import Membership


class Contact(Membership):
    """A current member and the address notices go to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    email: str


@runtime_checkable
class Roster(Protocol):
    async def contacts(self, conn: Any, organization_id: str) -> list[Contact]:
        """Every current member of the organization who has an e-mail address."""
        ...
