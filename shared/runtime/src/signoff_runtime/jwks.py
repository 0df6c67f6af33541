"""An external issuer's key set (JWKS), fetched without ever blocking the event loop.

PyJWT's ``PyJWKClient`` fetches with ``urllib`` inside the call that checks a token: one slow
issuer stalls every request of the process, and a token naming an unknown ``kid`` forces a
fetch per request (a cheap way to make a service hammer its issuer). Here:

- the fetch is ``httpx.AsyncClient`` (a transport can be injected, so tests count fetches);
- one fetch at a time (concurrent lookups of an unknown ``kid`` share it);
- negative caching: after any fetch — successful or not — no other starts for ``miss_s``, so an
  unknown ``kid`` is refused from memory, whatever the number of requests naming it;
- a set older than ``cache_s`` keeps serving its keys while a fresh one is fetched in the
  background; a key the issuer dropped stops being accepted once that fetch lands.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import jwt
import structlog

log = structlog.get_logger(__name__)


class JwksCache:
    def __init__(
        self,
        url: str,
        *,
        cache_s: float = 300.0,
        miss_s: float = 30.0,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._cache_s = cache_s
        self._miss_s = miss_s
        self._timeout_s = timeout_s
        self._transport = transport
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._loaded_at: float | None = None
        self._attempted_at: float | None = None
        self._inflight: asyncio.Task[None] | None = None
        #: fetches started, for tests and metrics
        self.fetches = 0

    def cached(self, kid: str) -> jwt.PyJWK | None:
        """The key from memory (never I/O); a stale set is refreshed in the background."""
        if self._stale():
            self.refresh_soon()
        return self._keys.get(kid)

    async def key(self, kid: str) -> jwt.PyJWK | None:
        """The key, fetching the set first if ``kid`` is unknown and no fetch was recent."""
        found = self.cached(kid)
        if found is not None:
            return found
        if self._inflight_here() is not None or self._may_fetch():
            await self._refresh()
        return self._keys.get(kid)

    def refresh_soon(self) -> None:
        """Start a fetch in the background if none ran recently (no loop: nothing to do)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._inflight_here() is None and self._may_fetch():
            self._start()

    def _stale(self) -> bool:
        return self._loaded_at is None or self._clock() - self._loaded_at >= self._cache_s

    def _may_fetch(self) -> bool:
        return self._attempted_at is None or self._clock() - self._attempted_at >= self._miss_s

    def _inflight_here(self) -> asyncio.Task[None] | None:
        task = self._inflight
        # a task of a loop that has ended (tests run several) is forgotten, not awaited
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            return None
        return task

    def _start(self) -> asyncio.Task[None]:
        self._attempted_at = self._clock()
        self.fetches += 1
        self._inflight = asyncio.get_running_loop().create_task(self._fetch())
        return self._inflight

    async def _refresh(self) -> None:
        task = self._inflight_here() or self._start()
        # shielded: a caller that gives up does not cancel the fetch the others wait for
        await asyncio.shield(task)

    async def _fetch(self) -> None:
        try:
            async with httpx.AsyncClient(
                transport=self._transport, timeout=self._timeout_s
            ) as client:
                response = await client.get(self.url)
                response.raise_for_status()
                found = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            # the keys already held stay in use; the next fetch waits for ``miss_s``
            log.warning("jwks.fetch_failed", url=self.url, error=type(exc).__name__)
            return
        self._keys = {k.key_id: k for k in found.keys if k.key_id}
        self._loaded_at = self._clock()


_caches: dict[str, JwksCache] = {}


def cache_for(
    url: str,
    *,
    cache_s: float = 300.0,
    miss_s: float = 30.0,
    timeout_s: float = 5.0,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> JwksCache:
    """The process's one cache for a key set (the first call's options make it)."""
    found = _caches.get(url)
    if found is None:
        found = _caches[url] = JwksCache(
            url,
            cache_s=cache_s,
            miss_s=miss_s,
            timeout_s=timeout_s,
            transport=transport,
            clock=clock,
        )
    return found
