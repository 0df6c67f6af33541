"""A TCP proxy of our own between each service and its PostgreSQL or RabbitMQ (no netem here).

Every service process reaches the database and the broker through a ``Link`` of its own, so a
fault can strike one process's connections and no one else's:

- ``cut`` resets every open connection of the link at once (RST, nothing flushed);
- ``stall`` holds every byte in both directions until ``flow`` (a partition that heals);
- ``drop_commits`` forwards a ``COMMIT`` to PostgreSQL, lets the server answer, then drops
  that answer and resets both sides: the "connection lost during COMMIT" case on the side where
  the commit did land — the client must learn the truth by re-reading.

The proxy runs its own event loop in a daemon thread: the test's loop is often blocked (starting
processes, waiting for health) and a stalled proxy would be a fault nobody asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(eq=False)  # kept in a set: hashed by identity
class _Pipe:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    commit_sent: bool = False

    def reset(self) -> None:
        for writer in (self.client, self.server):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):  # linger 0: close with RST
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


@dataclass
class Link:
    """One listening port forwarding to ``upstream``; its faults and what they did."""

    name: str
    upstream: tuple[str, int]
    port: int = 0
    pipes: set[_Pipe] = field(default_factory=set)
    flowing: asyncio.Event = field(default_factory=asyncio.Event)
    drop_probability: float = 0.0
    dice: random.Random = field(default_factory=random.Random)
    cuts: int = 0
    commits_dropped: int = 0
    server: asyncio.Server | None = None

    async def open(self) -> None:
        self.flowing.set()
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()  # the server is down: so is the connection
            return
        pipe = _Pipe(writer, up_writer)
        self.pipes.add(pipe)
        tasks = [
            asyncio.create_task(self._pump(reader, pipe, upstream=True)),
            asyncio.create_task(self._pump(up_reader, pipe, upstream=False)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            self.pipes.discard(pipe)
            pipe.reset()

    async def _pump(self, reader: asyncio.StreamReader, pipe: _Pipe, *, upstream: bool) -> None:
        target = pipe.server if upstream else pipe.client
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                if upstream and b"COMMIT" in data and self._dice_says_drop():
                    pipe.commit_sent = True
                elif not upstream and pipe.commit_sent:
                    self.commits_dropped += 1
                    return  # the server answered the COMMIT; the client never hears it
                target.write(data)
                await target.drain()

    def _dice_says_drop(self) -> bool:
        return self.drop_probability > 0 and self.dice.random() < self.drop_probability

    def cut(self) -> int:
        pipes = list(self.pipes)
        for pipe in pipes:
            pipe.reset()
        self.cuts += len(pipes)
        return len(pipes)


class Proxy:
    """All links of a fault session, served by one event loop in its own thread."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="proxy")
        self._thread.start()
        self.links: dict[str, Link] = {}

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def link(self, name: str, upstream_port: int) -> Link:
        """A new link ``name`` to ``127.0.0.1:upstream_port``; its ``port`` is where to connect."""

        async def make() -> Link:
            link = Link(name, ("127.0.0.1", upstream_port))
            await link.open()
            return link

        self.links[name] = self._call(make())
        return self.links[name]

    def cut(self, name: str) -> int:
        async def run() -> int:
            return self.links[name].cut()

        return self._call(run())

    def stall(self, name: str) -> None:
        self._loop.call_soon_threadsafe(self.links[name].flowing.clear)

    def flow(self, name: str) -> None:
        self._loop.call_soon_threadsafe(self.links[name].flowing.set)

    def drop_commits(self, name: str, probability: float, seed: int) -> None:
        async def run() -> None:
            link = self.links[name]
            link.drop_probability, link.dice = probability, random.Random(seed)

        self._call(run())

    def close(self) -> None:
        async def shut() -> None:
            for link in self.links.values():
                link.flowing.set()
                link.cut()
                if link.server is not None:
                    link.server.close()

        with contextlib.suppress(Exception):
            self._call(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
