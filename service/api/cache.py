"""The in-memory head-version cache: predictions never wait on Redis.

Each API process keeps, per model it has served, the spec, its featurizer and the head
version's :class:`LinearModel`. A version's weights are loaded once per process. Two things
keep the cache fresh:

- one background task per process listens to every model's events channel and reloads a
  model as soon as a new head is announced (freshness in milliseconds);
- a periodic check (``settings.cache_check_s``) compares each cached model's head with the
  store, in case a message was missed (pub/sub is fire-and-forget) or the model was deleted.

A model with no version yet is served from zero weights as version 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from service.api.backend import Backend
from service.errors import ModelNotFound, StoreUnavailable
from service.learning.linear import LinearModel

log = logging.getLogger("streamlearn.api")


@dataclass(slots=True)
class Served:
    """Everything a prediction or an ingest of model ``name`` needs, in memory."""

    name: str
    spec: Any
    featurizer: Any
    model: LinearModel
    version: int
    feedback_ttl: int
    loaded_at: float


class ModelCache:
    def __init__(
        self,
        backend: Backend,
        *,
        default_ttl: int,
        check_s: float,
        limits: dict[str, int] | None = None,
    ) -> None:
        self.backend = backend
        self.default_ttl = default_ttl
        self.check_s = check_s
        self.limits = dict(limits or {})
        self.entries: dict[str, Served] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.loads = 0  # versions loaded (tests and metrics read it)
        self.stopping = asyncio.Event()
        self._announced: dict[str, asyncio.Event] = {}

    async def get(self, m: str) -> Served:
        """The served state of ``m``; loads it (once) on first use."""
        entry = self.entries.get(m)
        if entry is not None:
            return entry
        async with self._lock(m):
            entry = self.entries.get(m)
            if entry is None:
                entry = await self._load(m, None)
            return entry

    def announcement(self, m: str) -> asyncio.Event:
        """An event set when ``m``'s events channel next announces a version (after the cache
        has swapped to it). Take it *before* checking the store, so nothing is missed."""
        event = self._announced.get(m)
        if event is None:
            event = self._announced[m] = asyncio.Event()
        return event

    def _announce(self, m: str) -> None:
        event = self._announced.pop(m, None)
        if event is not None:
            event.set()

    def evict(self, m: str) -> None:
        self.entries.pop(m, None)

    async def refresh(self, m: str) -> None:
        """Swap ``m`` to its current head if it changed (only for models already cached)."""
        if m not in self.entries:
            return
        async with self._lock(m):
            entry = self.entries.get(m)
            if entry is None:
                return
            try:
                head = await self.backend.head(m)
            except ModelNotFound:
                self.evict(m)
                return
            if head < entry.version:  # versions restart only when the model was re-created
                self.evict(m)  # (maybe with another spec): reload everything on next use
            elif head != entry.version:
                await self._load(m, entry)

    def _lock(self, m: str) -> asyncio.Lock:
        lock = self._locks.get(m)
        if lock is None:
            lock = self._locks[m] = asyncio.Lock()
        return lock

    async def _load(self, m: str, old: Served | None) -> Served:
        if old is None:
            spec, ttl = await self.backend.spec(m)
            featurizer = spec.featurizer(**self.limits)
        else:
            spec, featurizer, ttl = old.spec, old.featurizer, old.feedback_ttl
        head = await self.backend.head(m)
        if head > 0:
            model = await self.backend.serving(m, head)
        else:
            model = spec.build_learner().serving()
        entry = Served(m, spec, featurizer, model, head, ttl or self.default_ttl, time.time())
        self.entries[m] = entry
        self.loads += 1
        return entry

    # --- background tasks ------------------------------------------------------------------
    async def listen(self) -> None:
        """Reload models as their events channel announces new versions; reconnect on loss."""
        while not self.stopping.is_set():
            try:
                async for m in self.backend.events(self.stopping):
                    with contextlib.suppress(StoreUnavailable):
                        await self.refresh(m)
                    self._announce(m)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis gone: the periodic check covers us; retry later
                log.debug("events listener lost: %s", type(exc).__name__)
            await self._pause(min(1.0, self.check_s))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def check(self) -> None:
        """Periodic safety net: compare every cached head with the store."""
        while not self.stopping.is_set():
            await self._pause(self.check_s)
            for m in list(self.entries):
                with contextlib.suppress(StoreUnavailable):
                    try:
                        await self.refresh(m)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        log.exception("cache check of %s failed", m)
