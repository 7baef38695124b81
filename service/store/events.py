"""Following the models' events channels: the API's model cache swaps a model when its
channel announces a change (the worker publishes on ``Keys.events(m)`` after each commit that
moves the head, and so do pin, unpin and rollback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from service.store.base import StoreBase
from service.store.channels import model_messages


class EventOps(StoreBase):
    """:meth:`events`, a method of :class:`Store`."""

    def events(self, stop: asyncio.Event) -> AsyncIterator[str | None]:
        """Model names as their events channel announces a change, until ``stop`` is set (one
        pattern subscription over every model's channel), and ``None`` each time the
        subscription starts or restarts: announcements made before it may have been missed
        (:mod:`service.store.channels`)."""
        return model_messages(self.client, self.keys.channels("events"), stop)
