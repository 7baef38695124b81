"""Following the models' events channels: the API's model cache swaps a model when its
channel announces a change (the worker publishes on ``Keys.events(m)`` after each commit that
moves the head, and so do pin, unpin and rollback)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from service.store.base import StoreBase


class EventOps(StoreBase):
    """:meth:`events`, a method of :class:`Store`."""

    async def events(self, stop: asyncio.Event) -> AsyncIterator[str]:
        """Model names as their events channel announces a change, until ``stop`` is set (one
        pattern subscription over every model's channel)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)
        pattern = self.keys.events("x").replace("{x}", "{*}")
        try:
            await pubsub.psubscribe(pattern)
            while not stop.is_set():
                msg = await pubsub.get_message(timeout=0.25)
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
