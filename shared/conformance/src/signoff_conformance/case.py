"""What an adopter hands the kit: one operation's domain state, built in the real database.

The kit cannot invent domain rows, other organizations' records or the facts a preview rests on,
so each conformance test class supplies them in a ``ConformanceCase``. Everything else — the
execution context, the transactions, the provider spy — the kit builds itself, the way the
services do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from signoff_contracts.operations import Actor, AttemptRef, Scope
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

#: a mutation, on the connection it is given, that makes a fresh preview no longer hold
StaleFact = Callable[[AsyncConnection], Awaitable[None]]
#: how many effects (domain rows, provider records) exist for this case right now
EffectCounter = Callable[[], Awaitable[int]]
#: a provider client for this case, opened per use (``async with factory() as provider``)
ProviderFactory = Callable[[], AbstractAsyncContextManager[Any]]
#: does the domain hold this attempt? (read on the connection given — a separate one)
AttemptProbe = Callable[[AsyncConnection, AttemptRef], Awaitable[bool]]


class CaseError(ValueError):
    """A ``ConformanceCase`` that cannot test anything (a mistake in the adopter's fixture)."""


@dataclass(frozen=True, kw_only=True)
class ConformanceCase:
    """Fresh domain state for one test: the fixture builds it anew for every test.

    ``scope``                  where the proposal acts (organization, section, resource)
    ``manager`` / ``viewer``   members of ``scope.organization_id`` who may / may not approve
    ``valid_request``          a request ``resolve`` accepts in ``scope`` (JSON-shaped)
    ``out_of_scope_requests``  name → a request naming another organization's (or no) record:
                               ``resolve`` must raise ``Rejected``
    ``stale_facts``            name → a mutation through the given connection after which
                               ``revalidate`` must return a ``Reason``
    ``engine``                 the database the state lives in
    ``count_effects``          how many effects exist for this case (domain and provider)
    ``provider_factory``       external only: opens a provider client (default
                               ``operation().open_provider()``)
    ``lose_next_response``     external only: the provider applies the next call but its
                               answer is lost (``perform`` must raise ``EffectUncertain``)
    ``attempt_exists``         external only: is this attempt stored, read from a separate
                               connection while the provider is being called
    """

    scope: Scope
    manager: Actor
    viewer: Actor
    valid_request: dict[str, Any]
    out_of_scope_requests: dict[str, dict[str, Any]]
    stale_facts: dict[str, StaleFact]
    engine: AsyncEngine
    count_effects: EffectCounter
    provider_factory: ProviderFactory | None = None
    lose_next_response: Callable[[], Awaitable[None]] | None = None
    attempt_exists: AttemptProbe | None = None

    def __post_init__(self) -> None:
        for who in ("manager", "viewer"):
            actor: Actor = getattr(self, who)
            if actor.organization_id != self.scope.organization_id:
                raise CaseError(f"`{who}` must belong to the scope's organization")
        if not self.out_of_scope_requests:
            raise CaseError("declare at least one out-of-scope request (another org's record)")
        if not self.stale_facts:
            raise CaseError("declare at least one stale fact (a fact the preview rests on)")
