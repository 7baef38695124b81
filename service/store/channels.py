"""Listening to every model's channel of one kind (``events``, ``work``) with one pattern
subscription, and knowing when messages may have been missed.

Pub/sub is fire-and-forget: a message published while the subscription is down is lost.
redis-py re-establishes a dropped subscription by itself, silently, inside ``get_message``;
its connect callback is how we learn of it. :func:`model_messages` yields ``None`` after
every (re)subscription — the caller re-reads what it depends on — and the model name of
every message otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from service.store.connection import Client


class _Reconnects:
    """Wraps a pub/sub's re-subscribe callback (redis-py keeps it as a weak *method*, so
    this is a class) and notes that the connection was re-established."""

    def __init__(self, resubscribe: Callable[[Any], Awaitable[None]]) -> None:
        self.restarted = False
        self._resubscribe = resubscribe

    async def on_connect(self, connection: Any) -> None:
        self.restarted = True
        await self._resubscribe(connection)


async def model_messages(
    client: Client, pattern: str, stop: asyncio.Event, poll_s: float = 0.25
) -> AsyncIterator[str | None]:
    """The model name (the hash tag) of each message on a channel matching ``pattern``, and
    ``None`` once subscribed and after every silent re-subscription. Connection errors that
    redis-py does not recover from are raised."""
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    watch = _Reconnects(pubsub.on_connect)
    pubsub.on_connect = watch.on_connect  # redis-py registers it on its first connect
    try:
        await pubsub.psubscribe(pattern)
        yield None
        while not stop.is_set():
            msg = await pubsub.get_message(timeout=poll_s)
            if watch.restarted:
                watch.restarted = False
                yield None
            if msg is None:
                continue
            channel = msg.get("channel")
            name = channel.decode() if isinstance(channel, bytes) else str(channel)
            start, end = name.find("{"), name.rfind("}")
            if start >= 0 and end > start:
                yield name[start + 1 : end]
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(pubsub.aclose(), 1.0)
