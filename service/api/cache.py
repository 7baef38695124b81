"""The in-memory head-version cache: predictions never wait on Redis.

Each API process keeps, per model it has served, the spec, its featurizer and the head
version's :class:`LinearModel`. A version's weights are loaded once per process. Two things
keep the cache fresh:

- one background task per process listens to every model's events channel and reloads a
  model as soon as a new head is announced, or drops it when it is deleted (freshness in
  milliseconds);
- every ``settings.cache_check_s`` a check compares cached heads with the store, in case a
  message was missed (pub/sub is fire-and-forget).

Idle cost does not grow with the number of cached models. Pub/sub loses messages only while
the subscription is down, so every (re)subscription — including the ones redis-py makes
silently inside ``get_message`` — is followed by one *full* check of every cached head
(pipelined, ~2 commands per model, once); after it, while the subscription holds, the
periodic check only *sweeps* :data:`SWEEP` cached models per period, in turn (a last-resort
net for a message lost on a live subscription, e.g. across a Cluster failover: every model is
re-read within ``models / SWEEP`` periods). Without a live, synced subscription (the listener
failed or was stopped) each period is a full check, as before.

A model with no version yet is served from zero weights as version 0.

Memory is bounded: nothing is created for a model that does not exist (its load fails before
anything is kept), and the cache holds at most ``max_bytes`` of weights (the estimated bytes
of each served model's arrays; 0 = no bound). Past the bound the least recently used models
are evicted — with every per-model structure of the process (``on_evict``) — and simply
loaded again on their next use. The model just loaded is always kept, even alone over the
bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from service import memory
from service.api.backend import Backend
from service.errors import ModelNotFound, StoreUnavailable
from service.learning.features import Featurizer
from service.learning.linear import LinearModel
from service.learning.spec import ModelSpec
from service.outage import Outage

log = logging.getLogger("streamlearn.api")

SWEEP = 16  # cached models re-read per check period while the subscription holds


@dataclass(slots=True)
class Served:
    """Everything a prediction or an ingest of model ``name`` needs, in memory."""

    name: str
    spec: ModelSpec
    featurizer: Featurizer
    model: LinearModel
    version: int
    feedback_ttl: int  # 0: predictions keep nothing for feedback
    loaded_at: float
    nbytes: int = 0  # estimated bytes of the served weights (what the cache bound counts)


def weights_bytes(model: LinearModel) -> int:
    """The bytes of a served model's arrays (its weights and biases)."""
    b = model.b
    return int(model.W.nbytes) + (int(b.nbytes) if isinstance(b, np.ndarray) else 8)


class ModelCache:
    def __init__(
        self,
        backend: Backend,
        *,
        default_ttl: int,
        check_s: float,
        limits: dict[str, int] | None = None,
        max_bytes: int = 0,
        on_evict: Callable[[str], None] | None = None,
        outage: Outage | None = None,
    ) -> None:
        self.backend = backend
        self.default_ttl = default_ttl
        self.check_s = check_s
        self.limits = dict(limits or {})
        self.max_bytes = max_bytes
        self.on_evict = on_evict
        self.outage = outage or Outage(log, "API")
        self.entries: OrderedDict[str, Served] = OrderedDict()  # least recently used first
        self.bytes = 0  # sum of the entries' nbytes
        self._locks: dict[str, asyncio.Lock] = {}
        self.loads = 0  # versions loaded (tests and metrics read it)
        self.evictions = 0
        self.stopping = asyncio.Event()
        self._announced: dict[str, asyncio.Event] = {}
        # the events subscription: its generation (bumped by every (re)subscription), whether
        # it is up now, and the generation a full check completed under (see listening)
        self._generation = 0
        self._live = False
        self._synced = -1
        self._sweep_at = 0
        self.full_checks = 0  # tests and metrics read them
        self.sweeps = 0

    @property
    def listening(self) -> bool:
        """Whether every change since the last full check is announced to us: the
        subscription is up and has not restarted since that check began."""
        return self._live and self._synced == self._generation

    async def get(self, m: str) -> Served:
        """The served state of ``m``; loads it (once) on first use."""
        entry = self.entries.get(m)
        if entry is not None:
            self.entries.move_to_end(m)  # most recently used
            return entry
        lock = self._lock(m)
        try:
            async with lock:
                entry = self.entries.get(m)
                if entry is None:
                    entry = await self._load(m, None)
                return entry
        finally:
            if m not in self.entries and self._locks.get(m) is lock:
                del self._locks[m]  # unknown model, or the load failed: keep nothing

    def exposition(self) -> bytes:
        """This process's cache in Prometheus text format: what serving models costs here."""
        rows = (
            ("models", "gauge", "Models held in this API process's memory", len(self.entries)),
            ("bytes", "gauge", "Estimated bytes of the served weights held", self.bytes),
            ("max_bytes", "gauge", "The bound on those bytes (0: none)", self.max_bytes),
            (
                "bytes_per_model",
                "gauge",
                "Estimated bytes of weights per served model (bytes / models)",
                self.bytes // len(self.entries) if self.entries else 0,
            ),
            ("loads_total", "counter", "Versions loaded into memory", self.loads),
            ("evictions_total", "counter", "Models evicted by the memory bound", self.evictions),
            ("full_checks_total", "counter", "Re-reads of every cached head", self.full_checks),
            ("sweeps_total", "counter", "Periodic re-reads of a few cached heads", self.sweeps),
        )
        out = []
        for name, kind, text, value in rows:
            full = f"streamlearn_cache_{name}"
            out.append(f"# HELP {full} {text}\n# TYPE {full} {kind}\n{full} {value}\n")
        return "".join(out).encode()

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
        """Forget ``m`` and everything the process keeps for it."""
        entry = self.entries.pop(m, None)
        if entry is not None:
            self.bytes -= entry.nbytes
        self._locks.pop(m, None)
        if self.on_evict is not None:
            self.on_evict(m)

    def _keep(self, entry: Served) -> None:
        """Store ``entry`` as the most recently used; evict the least recently used ones
        while the bound is exceeded (never ``entry`` itself)."""
        old = self.entries.pop(entry.name, None)
        if old is not None:
            self.bytes -= old.nbytes
        self.entries[entry.name] = entry
        self.bytes += entry.nbytes
        while self.max_bytes and self.bytes > self.max_bytes and len(self.entries) > 1:
            oldest = next(iter(self.entries))
            self.evict(oldest)
            self.evictions += 1

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
            elif head != entry.version and self.entries.get(m) is entry:
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
        entry = Served(
            m,
            spec,
            featurizer,
            model,
            head,
            self.default_ttl if ttl is None else ttl,
            time.time(),
            weights_bytes(model),
        )
        if old is not None and self.entries.get(m) is not old:
            return entry  # evicted while loading: serve this request, keep nothing
        if old is not None:  # a head swap keeps the model's place in the LRU order
            self.bytes += entry.nbytes - old.nbytes
            self.entries[m] = entry
        else:
            self._keep(entry)
        self.loads += 1
        return entry

    # --- background tasks ------------------------------------------------------------------
    async def listen(self) -> None:
        """Reload models as their events channel announces new versions; reconnect on loss;
        a full check after every (re)subscription."""
        while not self.stopping.is_set():
            try:
                async for m in self.backend.events(self.stopping):
                    if m is None:  # (re)subscribed: what was announced before may be lost
                        self._live = True
                        self._generation += 1
                        await self._resync()
                        continue
                    with contextlib.suppress(StoreUnavailable):
                        await self.refresh(m)
                    self._announce(m)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis gone: the periodic check covers us; retry later
                log.debug("events listener lost: %s", type(exc).__name__)
            finally:
                self._live = False
            await self._pause(min(1.0, self.check_s))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def _full_check(self) -> None:
        """Every cached head; if the subscription held all along, we are listening after."""
        generation, live = self._generation, self._live
        await self._check(list(self.entries))
        self.full_checks += 1
        if live and self._live and generation == self._generation:
            self._synced = generation

    async def _resync(self) -> None:
        with contextlib.suppress(StoreUnavailable):  # the periodic check retries it
            await self._full_check()

    async def _check(self, names: list[str]) -> None:
        """The cached heads of ``names`` against the store in pipelined reads (one round
        trip per 1,000 models, not one per model); only models whose head moved, or that
        were deleted, are touched."""
        if not names:
            return
        heads = await self.backend.heads(names)
        for m in names:
            entry = self.entries.get(m)
            if entry is None:
                continue
            head = heads.get(m)
            if head is None:  # deleted
                self.evict(m)
            elif head != entry.version:
                try:
                    await self.refresh(m)
                except (asyncio.CancelledError, StoreUnavailable):
                    raise
                except Exception:  # a bug with this model: say so, check the others
                    log.exception("cache check of %s failed", m)

    async def _sweep(self) -> None:
        """The next :data:`SWEEP` cached models, in turn."""
        names = list(self.entries)
        if not names:
            return
        if len(names) <= SWEEP:
            part = names
        else:
            start = self._sweep_at % len(names)
            part = names[start : start + SWEEP]
            part += names[: SWEEP - len(part)]
            self._sweep_at = start + SWEEP
        await self._check(part)
        self.sweeps += 1

    async def check(self) -> None:
        """Periodic safety net: a sweep while listening, else a full check of every cached
        head. While Redis is down a round stops at the first failure (the outage is logged
        once, not per model) and, with nothing cached, a PING tells when it is back."""
        evictions = self.evictions
        while not self.stopping.is_set():
            await self._pause(self.check_s)
            if self.evictions != evictions:  # the evicted weights: back to the OS
                evictions = self.evictions
                memory.trim()
            try:
                if not self.entries and self.outage.down:
                    if await self.backend.ping():
                        self.outage.came_back()
                    continue
                if self.listening:
                    await self._sweep()
                else:
                    await self._full_check()
                self.outage.came_back()
            except StoreUnavailable as exc:
                self.outage.went_down(exc.message)
