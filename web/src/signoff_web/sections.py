"""The sections the agent serves, asked of the agent: the web keeps no copy of their names.

The home page lists each section under its title with the resources a conversation can open on,
and opening one goes to the section the agent named — so a section a domain adds appears here
without a change to the web. The list is the same for every caller and changes only when the
agent is redeployed: it is kept ``sections_cache_s`` seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from signoff_contracts.operations import Locale

from signoff_web.apis import Apis, Tokens


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    resource: str
    title: dict[str, str]

    def title_in(self, locale: Locale) -> str:
        return self.title.get(locale) or self.name


@dataclass
class Catalogue:
    apis: Apis
    ttl_s: float
    _found: list[Section] = field(default_factory=list)
    _at: float = float("-inf")

    async def all(self, token: Tokens) -> list[Section]:
        if time.monotonic() - self._at >= self.ttl_s:
            listed = await self.apis.sections(token)
            self._found = [
                Section(str(s["section"]), str(s["resource"]), dict(s.get("title") or {}))
                for s in listed
            ]
            self._at = time.monotonic()
        return list(self._found)

    async def get(self, token: Tokens, name: str) -> Section | None:
        return next((s for s in await self.all(token) if s.name == name), None)
