"""The worker: consume → learn → commit → publish, for many models, exactly once.

One :class:`Worker` serves every model whose lease it holds. :meth:`Worker.run` is one
``while`` loop (rq's ``work`` is the model):

1. every ``heartbeat_ms``: renew the leases, drop the lost ones, give up models over a fair
   share of the *active* models (``ceil(active / alive workers)``), release the models idle
   for ``idle_release_s``, write the heartbeat;
2. take the leases of models that have work and no holder, up to that share: a worker holds
   only active models (idle ones cost it no memory and no Redis command). It learns of them
   from the models' work channel — the append script announces an append to a model
   nobody holds, and a worker that lets a model go with entries left announces it too —
   and, since pub/sub loses what is sent while the subscription is down, from one pipelined
   ``XLEN`` of every model after each (re)subscription, plus a sweep of
   :data:`SWEEP_MODELS` models per heartbeat as a last resort. The models of a worker whose
   heartbeat stopped (it crashed holding them) are taken once their leases expire;
3. read the entries after each held model's position (one blocking XREAD of about 4,000
   examples per model, see ``reader.py``);
4. decode, check and learn each entry through the compiled batch path; an entry that cannot
   be decoded or checked becomes a dead letter (acknowledged with the next commit);
5. commit every ``commit_ms`` / ``commit_examples``, and publish a version (in the same
   atomic step) every ``publish_ms`` / ``publish_examples`` — and when a read finds
   nothing new (the streams are drained) and the last commit is ``DRAIN_GAP_MS`` old, so the
   last entry of a burst is served promptly without a commit per drain under steady load.
   A commit writes only the feature rows learned since the last one (a delta blob on the
   stored chain) and a version only the served rows changed since the last version; a full
   (sparse) blob starts a new chain when the deltas outweigh it (see :func:`_plan`).

A refused commit (:class:`LeaseLost`, :class:`CommitConflict`) means someone else owns the
model now, or its state was reset (rollback): the in-memory learner is dropped and the
model is reloaded from its committed state if the lease is ever taken again. Taking a lease
loads the committed state and reads from its cursor, so entries at or below it are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service import memory
from service.errors import (
    CommitConflict,
    DecodeError,
    InvalidSpec,
    LeaseLost,
    ModelNotFound,
    StoreUnavailable,
)
from service.learning.quality import LINKS, QualityTracker
from service.outage import Outage
from service.settings import Settings
from service.store import DeadLetter, Lease, Quality, StateBlob, Store, StreamEntry
from service.store.base import parse_id
from service.store.channels import model_messages
from service.store.codec import (
    column_of,
    decode_batch,
    encode_quality,
    encode_quality_delta,
    encode_sparse,
)
from workers.learners import (
    SERVING_LOCAL,
    STATE_LOCAL,
    axes_of,
    build_learner,
    serving_view,
    state_view,
)
from workers.reader import Reader

log = logging.getLogger("streamlearn.worker")

DEAD_PAYLOAD_BYTES = 64 * 1024  # a dead letter keeps the head of its entry, not 1 MB of it
# blobs in a chain before a full one starts the next: bounds what a read decodes. The API
# re-reads a version's whole chain at every version, so longer chains cost read latency: at
# 256 (the deltas bounded by DELTA_RATIO alone) a mature model wrote 17.6x the ingested bytes
# instead of 23.4x but served 650 instead of 1,012 ingest requests/s, p99 162 vs 93 ms
# (docs/benchmarks.md). Raise it once versions are read incrementally.
MAX_CHAIN = 32
# a full blob when the chain's deltas would outweigh its full blob this many times (2: a
# chain is at most ~3 full states, writes ~1.5x what changed; measured in docs/benchmarks.md)
DELTA_RATIO = 2.0
SWEEP_MODELS = 16  # models checked for entries per heartbeat, in turn (the last-resort net)
MODEL_LIST_S = 60.0  # how long the list of models swept is reused
# a drained stream commits at most this often (and never later than this after a burst):
# at ~500 single examples/s a flush per drain made ~7 commits/s instead of <= 5
DRAIN_GAP_MS = 200


def _plan(chain: list[int], delta: bytes | None, full: Any) -> tuple[StateBlob, list[int]]:
    """The blob to write and the chain sizes after it: ``delta`` on top of ``chain`` while
    the deltas stay under ``DELTA_RATIO`` × the full blob that starts it (so a chain costs
    at most ``1 + DELTA_RATIO`` full states, and the full blobs add about
    ``1 / DELTA_RATIO`` to the bytes the deltas write), else
    ``full()``. An empty ``chain`` (nothing stored to build on) or a None ``delta`` (the
    rows that changed are unknown) means full."""
    if (
        delta is not None
        and chain
        and len(chain) < MAX_CHAIN
        and sum(chain[1:]) + len(delta) <= DELTA_RATIO * chain[0]
    ):
        return StateBlob(delta, False), [*chain, len(delta)]
    data = full()
    return StateBlob(data, True), [len(data)]


def _rows(parts: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


@dataclass
class Held:
    """A model this worker holds the lease of, and its learning in progress."""

    lease: Lease
    learner: Any
    committed: str  # the cursor stored by our last commit (what the next commit expects)
    position: str  # the last entry applied in memory (>= committed)
    applied: int = 0  # stream examples consumed since the last commit (incl. dead letters)
    entries: int = 0  # entries consumed since the last commit
    dead: list[DeadLetter] = field(default_factory=list)
    unpublished: int = 0  # examples learned since the last published version
    dirty: bool = False  # state changed since the last published version
    last_commit: float = field(default_factory=time.monotonic)
    last_publish: float = field(default_factory=time.monotonic)
    history_mark: int = 0  # examples_seen // history_every at the last history point
    version: int | None = None  # the last version this worker published for the model
    # sparse commits: feature rows learned since the last commit / since the last publish,
    # and the blob sizes of the stored state chain and of the serving chain of our last
    # version (empty: nothing to build a delta on, the next blob is full)
    touched: list[np.ndarray] = field(default_factory=list)
    touched_pub: list[np.ndarray] = field(default_factory=list)
    chain: list[int] = field(default_factory=list)
    schain: list[int] = field(default_factory=list)
    axes: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))
    quality: QualityTracker | None = None  # binary models: progressive AUC and log loss
    last_active: float = field(default_factory=time.monotonic)  # last read that had entries
    nbytes: int = 0  # the learner's arrays (what worker_memory_bytes bounds)
    drained: bool = False  # the last read found nothing after our position
    # the quality state of our last commit and the blob sizes of the stored quality chain
    # (empty: the next quality blob is full)
    qlast: dict[str, Any] | None = None
    qchain: list[int] = field(default_factory=list)

    @property
    def model(self) -> str:
        return self.lease.model


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}".replace(":", "-")


def tracker_for(learner: Any, state: dict[str, Any] | None) -> QualityTracker | None:
    """The quality tracker of a binary model (from its committed state, if any); None for
    a multi-class model. A model committed before quality was tracked starts a fresh one."""
    if learner.multiclass or learner.link not in LINKS:
        return None
    return QualityTracker.from_state(state) if state is not None else QualityTracker()


def quality_of(learner: Any, tracker: QualityTracker) -> Quality:
    """What a commit stores: the tracker's state and figures, and for an ensemble each
    member's progressive metrics (``member_metrics()``), so a user sees who is winning."""
    figures = tracker.summary()
    member_metrics = getattr(learner, "member_metrics", None)
    members = member_metrics() if callable(member_metrics) else None
    if members is not None:
        figures["members"] = members
    return Quality(tracker.get_state(), figures)


class Worker:
    """Learns for the models whose leases it holds. ``await run()``; ``stop()`` to finish."""

    def __init__(self, settings: Settings, store: Store, *, worker_id: str | None = None) -> None:
        self.settings = settings
        self.store = store
        self.worker_id = worker_id or settings.worker_id or default_worker_id()
        self.held: dict[str, Held] = {}
        self._stopping = asyncio.Event()
        self._next_maintain = 0.0
        self._outage = Outage(log, f"worker {self.worker_id}")
        self._skip_until: dict[str, float] = {}  # models whose spec cannot be built
        self._reader = Reader(store, settings.read_count, settings.block_ms)
        # models with work that we do not hold: {model: when first heard of}; the ones whose
        # lease someone else holds (maybe a dead worker) are re-checked every heartbeat
        self._wanted: dict[str, float] = {}
        self._orphans: set[str] = set()
        self._taking: set[str] = set()  # acquiring a lease, not yet in ``held``
        self._resync = True  # re-read which models have entries (after (re)subscribing)
        self._others: set[str] = set()  # models the other alive workers hold
        self._alive = 1  # alive workers, us included
        self._models: list[str] = []  # every model, for the sweep (reused MODEL_LIST_S)
        self._models_at = -math.inf
        self._sweep_at = 0
        self.stats: dict[str, float] = {
            "examples": 0,
            "entries": 0,
            "dead": 0,
            "commits": 0,
            "publishes": 0,
            "refused": 0,
            "commit_seconds": 0.0,
            "takeovers": 0,
            "released_idle": 0,
            "released_full": 0,
        }

    def stop(self) -> None:
        """Finish: stop reading, commit what is in hand, release the leases, return."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    # --- the loop ------------------------------------------------------------------------
    async def run(self, burst: bool = False) -> None:
        """Work until :meth:`stop` (or, with ``burst``, until every model is caught up)."""
        s = self.settings
        log.info("worker %s starting (burst=%s)", self.worker_id, burst)
        listener = asyncio.create_task(self._listen(), name="sl-work")
        try:
            outage = 0  # consecutive StoreUnavailable errors
            while not self.stopping:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # redis-py 8 runs commands under asyncio.wait_for, which on Python < 3.12
                    # can swallow a cancellation (gh-86296): honour it here.
                    raise asyncio.CancelledError()
                try:
                    if time.monotonic() >= self._next_maintain:
                        await self._maintain()
                        self._next_maintain = time.monotonic() + s.heartbeat_ms / 1000
                    elif self._resync or self._wanted:
                        await self._find_work()
                    read = await self._reader.next({m: h.position for m, h in self.held.items()})
                    for m, h in self.held.items():
                        h.drained = m not in read
                    for m, entries in read.items():
                        if m in self.held:
                            self._apply(self.held[m], entries)
                    # drained (nothing new within block_ms): commit and publish now, so the
                    # newest version covers the last entry without waiting for publish_ms
                    await self._flush(force=not read)
                    if burst and not read and await self._caught_up():
                        break
                    outage = 0
                    self._outage.came_back()
                except StoreUnavailable as e:
                    # back off 0.2 s, 0.4 s, ... up to 5 s; logged once when Redis goes away
                    # and once when it is back (service/outage.py), not per retry
                    delay = min(5.0, max(s.block_ms, 200) / 1000 * 2**outage)
                    self._outage.went_down(e.message)
                    outage = min(outage + 1, 10)
                    await self._pause(delay)
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await self._shutdown()
        log.info("worker %s stopped: %s", self.worker_id, self.stats)

    async def _listen(self) -> None:
        """Note the models announced on the work channels; after every (re)subscription,
        have every stream's length read again (what was announced meanwhile is lost)."""
        channels = self.store.keys.channels("work")
        while not self.stopping:
            try:
                async for m in model_messages(self.store.client, channels, self._stopping):
                    if m is None:
                        self._resync = True
                    elif m not in self.held:
                        self._wanted.setdefault(m, time.monotonic())
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis gone: the loop reports it; subscribe again
                log.debug("work listener lost: %s", type(exc).__name__)
            await self._pause(1.0)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    # --- learning ------------------------------------------------------------------------
    def _apply(self, h: Held, entries: list[StreamEntry]) -> None:
        """Learn ``entries`` (in order) into ``h``'s learner; dead-letter what cannot be."""
        learner = h.learner
        for e in entries:
            if parse_id(e.id) <= parse_id(h.position):
                continue  # at or below the cursor: learned already
            try:
                # the codec checks the entry's layout; the learner checks what the codec
                # cannot (indices below its dim, labels among its classes) before learning
                batch, _ = decode_batch(e.payload)
                if h.quality is None:
                    learner.learn(batch)
                else:
                    _, margins = learner.learn_scored(batch)
                    h.quality.update(margins, batch.y, learner.link)
                h.touched.append(batch.indices)
            except (DecodeError, ValueError) as err:
                reason = f"{type(err).__name__}: {err} ({len(e.payload)} bytes)"
                h.dead.append(DeadLetter(e.id, reason, e.payload[:DEAD_PAYLOAD_BYTES]))
                h.applied += e.n or 0
                self.stats["dead"] += 1
                log.warning("model %s: entry %s dead-lettered: %s", h.model, e.id, err)
            else:
                h.applied += batch.n
                h.unpublished += batch.n
                h.dirty = True
                self.stats["examples"] += batch.n
            h.position = e.id
            h.last_active = time.monotonic()
            h.entries += 1
            self.stats["entries"] += 1

    async def _flush(self, force: bool = False) -> None:
        """Commit (and publish) every held model for which it is due (or all, with force)."""
        for h in list(self.held.values()):
            await self._flush_one(h, force)

    async def _flush_one(self, h: Held, force: bool) -> None:
        s, now = self.settings, time.monotonic()
        # a drained stream (force) flushes at once, but not twice within DRAIN_GAP_MS (or
        # commit_ms / publish_ms when shorter): under a steady load the worker drains every
        # few ms, and each commit writes every feature row it learned since the last one;
        # the next empty read, block_ms later, flushes what is left of a burst
        gap = min(s.commit_ms, s.publish_ms, DRAIN_GAP_MS) / 1000
        force = force and now - h.last_commit >= gap
        pending = h.entries > 0
        publish = h.dirty and (
            force
            or now - h.last_publish >= s.publish_ms / 1000
            or h.unpublished >= s.publish_examples
        )
        commit = publish or (
            pending
            and (
                force or now - h.last_commit >= s.commit_ms / 1000 or h.applied >= s.commit_examples
            )
        )
        if commit:
            await self._commit(h, publish)

    def _blobs(
        self, h: Held, publish: bool
    ) -> tuple[StateBlob | None, list[int], StateBlob | None, list[int], np.ndarray]:
        """What the commit writes: the state blob (None: unchanged since the last commit),
        the serving blob when publishing, the chain sizes after them, and the rows learned."""
        learner, (axes, saxes) = h.learner, h.axes
        algorithm = learner.name
        rows = _rows(h.touched)
        state, chain = None, h.chain
        if h.touched or not h.chain:
            view = state_view(learner)
            delta = encode_sparse(view, axes, rows) if algorithm in STATE_LOCAL else None
            state, chain = _plan(h.chain, delta, lambda: encode_sparse(view, axes))
        serving, schain = None, h.schain
        if publish:
            served = serving_view(learner)
            ref = column_of(np.asarray(served["W"]), state_view(learner))
            if ref is not None:  # served weights are (a column of) the state: name it
                data = encode_sparse(served, {}, ref={"W": ref})
                return state, chain, StateBlob(data, True, ref=True), [len(data)], rows
            delta = None
            if algorithm in SERVING_LOCAL and h.schain:
                delta = encode_sparse(served, saxes, _rows([*h.touched_pub, rows]))
            serving, schain = _plan(h.schain, delta, lambda: encode_sparse(served, saxes))
        return state, chain, serving, schain, rows

    async def _commit(self, h: Held, publish: bool) -> None:
        learner = h.learner
        counters = learner.counters()
        mark = int(counters["examples_seen"]) // max(1, self.settings.history_every)
        started = time.perf_counter()
        state, chain, serving, schain, rows = self._blobs(h, publish)
        quality, qchain = None, h.qchain
        if h.quality is not None:
            quality = quality_of(learner, h.quality)
            qstate = dict(quality.state)
            delta = encode_quality_delta(h.qlast, qstate) if h.qlast and h.qchain else None
            qblob, qchain = _plan(h.qchain, delta, lambda: encode_quality(qstate))
            quality = Quality(qstate, quality.figures, qblob.data)
        try:
            result = await self.store.commit(
                h.lease,
                expected_cursor=h.committed,
                cursor=h.position,
                state=state,
                counters=counters,
                applied=h.applied,
                dead=h.dead,
                history=mark != h.history_mark or (publish and h.unpublished > 0),
                serving=serving,
                quality=quality,
            )
        except (LeaseLost, CommitConflict) as e:
            self.stats["refused"] += 1
            self.held.pop(h.model, None)
            self._orphans.add(h.model)  # free again after a rollback: take it back then
            await self._say_dropped(h, f"commit refused ({e})")
            return
        now = time.monotonic()
        self.stats["commits"] += 1
        self.stats["commit_seconds"] += time.perf_counter() - started
        h.committed, h.applied, h.entries, h.dead = h.position, 0, 0, []
        h.last_commit, h.history_mark = now, mark
        h.chain, h.touched = chain, []
        if quality is not None:
            h.qlast, h.qchain = dict(quality.state), qchain
        if publish:
            h.schain, h.touched_pub = schain, []
        elif rows.size:
            h.touched_pub.append(rows)
        if result.version is not None:
            h.version = result.version
        if publish:
            self.stats["publishes"] += 1
            h.unpublished, h.dirty, h.last_publish = 0, False, now

    # --- leases --------------------------------------------------------------------------
    async def _maintain(self) -> None:
        """Renew leases, keep a fair share of the active models, release idle ones, look
        for work, write the heartbeat. Costs O(held models), not O(models)."""
        s = self.settings
        held = list(self.held.values())
        for h, ok in zip(held, await self.store.renew([h.lease for h in held]), strict=True):
            if not ok:
                self.held.pop(h.model, None)
                self._orphans.add(h.model)  # deleted, rolled back (free) or taken
                await self._say_dropped(h, "lease lost")
        # alive workers and what they hold; a worker silent for 5 beats is dead: its
        # models are taken once their leases expire (the entry is removed after a minute)
        now_ms, beat = int(time.time() * 1000), 5 * s.heartbeat_ms
        infos = [w for w in await self.store.workers(60_000) if w.worker_id != self.worker_id]
        alive = [w for w in infos if now_ms - w.ts <= beat]
        self._alive = 1 + len(alive)
        self._others = {m for w in alive for m in w.models}
        for w in infos:
            if now_ms - w.ts > beat:
                self._orphans.update(m for m in w.models if m not in self.held)
        share = self._share()
        while len(self.held) > share:
            await self._give_up(self.held[max(self.held)], flush=True)
        await self._release_idle()
        await self._check_orphans({w.worker_id for w in alive})
        await self._sweep()
        await self._find_work()
        await self.store.heartbeat(
            self.worker_id, list(self.held), pid=os.getpid(), host=socket.gethostname()
        )

    async def _release_idle(self) -> None:
        """Release the models with no entry for ``idle_release_s`` and free their memory."""
        now, wait = time.monotonic(), self.settings.idle_release_s
        idle = [
            m
            for m, h in self.held.items()
            if not h.entries and not h.dirty and now - h.last_active >= wait
        ]
        for m in idle:
            await self._give_up(self.held[m], flush=False)
            self.stats["released_idle"] += 1
        if idle:
            memory.trim()  # their learners' arrays: back to the OS, not kept by malloc

    async def _make_room(self) -> bool:
        """Under ``worker_memory_bytes``, whether one more model may be taken, letting
        drained models with nothing in hand go first (least recently active first; one that
        got entries since announces them and is taken again in turn). Always room for one
        model."""
        bound = self.settings.worker_memory_bytes
        if not bound or not self.held:
            return True
        per_model = max(h.nbytes for h in self.held.values())
        quiet = sorted(
            (h for h in self.held.values() if h.drained and not h.entries and not h.dirty),
            key=lambda h: h.last_active,
        )
        freed = False
        while sum(h.nbytes for h in self.held.values()) + per_model > bound:
            if not quiet:
                break
            await self._give_up(quiet.pop(0), flush=False)
            self.stats["released_full"] += 1
            freed = True
        if freed:
            memory.trim()
        return sum(h.nbytes for h in self.held.values()) + per_model <= bound

    def _share(self) -> int:
        """This worker's fair share of the active models (held anywhere, or wanted)."""
        active = len(self._others | self.held.keys() | self._wanted.keys())
        return math.ceil(active / self._alive) if active else 0

    async def _find_work(self) -> None:
        """After a (re)subscription: every model with entries is wanted. Then take the
        wanted models, oldest first, up to the share — or any that waited two heartbeats
        for a less busy worker."""
        now = time.monotonic()
        if self._resync:
            self._resync = False
            try:
                found = await self.store.with_entries(await self._model_list(refresh=True))
                random.shuffle(found)  # workers starting together do not all go for the same
                for m in found:
                    if m not in self.held:
                        self._wanted.setdefault(m, now)
            except StoreUnavailable:
                self._resync = True
                raise
        patience = 2 * self.settings.heartbeat_ms / 1000
        for m, since in sorted(self._wanted.items(), key=lambda kv: kv[1]):  # stable: FIFO
            if m in self.held or self._skip_until.get(m, 0.0) > now:
                del self._wanted[m]
                continue
            if len(self.held) >= self._share() and now - since < patience:
                continue
            if not await self._make_room():
                break  # at the memory bound with every held model busy: later
            del self._wanted[m]
            if not await self._acquire_and_take(m):
                # someone holds it (or it is gone): see at the next heartbeat
                self._orphans.add(m)

    async def _check_orphans(self, alive: set[str]) -> None:
        """Models with work whose lease another holds: forget the ones an alive worker
        holds or that have nothing to learn; take the others as soon as their lease is free
        (a dead worker's lease expires)."""
        for m in list(self._orphans):
            if m in self.held:
                self._orphans.discard(m)
                continue
            holder = await self.store.lease_holder(m)
            owner = holder.rsplit(":", 1)[0] if holder else None
            if owner in alive or (owner is None and not await self.store.with_entries([m])):
                self._orphans.discard(m)
                continue
            if (
                (owner is None or owner != self.worker_id)
                and await self._make_room()
                and await self._acquire_and_take(m)
            ):
                self._orphans.discard(m)

    async def _model_list(self, refresh: bool = False) -> list[str]:
        if refresh or time.monotonic() - self._models_at > MODEL_LIST_S:
            self._models = await self.store.list_models()
            self._models_at = time.monotonic()
        return self._models

    async def _sweep(self) -> None:
        """The last-resort net: :data:`SWEEP_MODELS` models per heartbeat, in turn, checked
        for entries (a work message lost on a live subscription, e.g. a Cluster failover)."""
        models = await self._model_list()
        if not models:
            return
        start = self._sweep_at % len(models)
        part = (models[start:] + models[:start])[:SWEEP_MODELS]
        self._sweep_at = start + len(part)
        now = time.monotonic()
        for m in await self.store.with_entries([m for m in part if m not in self.held]):
            self._wanted.setdefault(m, now)

    async def _say_dropped(self, h: Held, why: str) -> None:
        """Log why a model's state was dropped: a rollback by an admin is routine (info);
        anything else (another worker took over, a conflict) is a warning."""
        head = None
        with contextlib.suppress(Exception):  # only the message depends on it
            head = next((v for v in await self.store.list_versions(h.model) if v.head), None)
        if (
            head is not None
            and head.source.startswith("rollback:")
            and head.number > (h.version or 0)
        ):
            log.info(
                "model %s: rolled back by an admin to version %s (published as version %d); "
                "reloading from it",
                h.model,
                head.source.removeprefix("rollback:"),
                head.number,
            )
        else:
            log.warning("model %s: %s; dropping its state", h.model, why)

    async def _acquire_and_take(self, m: str) -> bool:
        """Take ``m``'s lease and load it; False if another holds it. A cancellation that
        lands between the grant and ``held`` leaves ``m`` in ``_taking``, so that
        :meth:`_shutdown` still gives the lease back."""
        self._taking.add(m)
        lease = await self.store.acquire(m, self.worker_id)
        if lease is None:
            self._taking.discard(m)
            return False
        await self._take(lease)
        self._taking.discard(m)
        return True

    async def _take(self, lease: Lease) -> None:
        """Load ``lease.model``'s committed state into a fresh learner."""
        m = lease.model
        # logged as granted, before the (possibly long) load: a kill during it still shows
        log.info("model %s: lease epoch %d, loading its state", m, lease.epoch)
        try:
            learner = build_learner(await self.store.get_spec(m))
            committed = await self.store.load_state(m)
            if committed.state is not None:
                learner.set_state(committed.state)
            quality = tracker_for(learner, committed.quality)
        except (InvalidSpec, ModelNotFound, DecodeError, ValueError) as e:
            log.error("model %s cannot be loaded (%s); skipping it for a minute", m, e)
            self._skip_until[m] = time.monotonic() + 60
            await self.store.release(lease)
            return
        seen = int(learner.counters()["examples_seen"])
        self.held[m] = Held(
            lease,
            learner,
            committed=committed.cursor,
            position=committed.cursor,
            history_mark=seen // max(1, self.settings.history_every),
            chain=list(committed.chain),
            axes=axes_of(learner),
            quality=quality,
            nbytes=sum(int(v.nbytes) for v in state_view(learner).values() if hasattr(v, "nbytes")),
        )
        self.stats["takeovers"] += 1
        log.info("model %s: loaded at cursor %s", m, committed.cursor)

    async def _give_up(self, h: Held, flush: bool) -> None:
        """Release ``h`` (after committing what is in hand, with ``flush``). Entries
        appended while we held it announced nothing (the lease was there): if some are left,
        announce them now, for whichever worker takes the model next."""
        if flush and (h.entries or h.dirty):
            await self._commit(h, publish=h.dirty)
        self.held.pop(h.model, None)
        await self.store.release(h.lease)
        if await self.store.with_entries([h.model]):
            await self.store.notify_work(h.model)

    async def _caught_up(self) -> bool:
        """Whether every model's committed cursor has reached the end of its stream."""
        now = time.monotonic()
        for m in await self.store.list_models():
            if self._skip_until.get(m, 0.0) > now:
                continue  # cannot be loaded: waiting for it would never end
            h = self.held.get(m)
            if h is not None and (h.entries or h.dirty):
                return False
            last = await self.store.last_entry_id(m)
            if last is None:
                continue
            cursor = h.committed if h else await self.store.committed_cursor(m)
            if parse_id(last) > parse_id(cursor):
                return False
        return True

    async def _shutdown(self) -> None:
        """Commit and publish what is in hand, release every lease, remove the heartbeat."""
        for h in list(self.held.values()):
            try:
                await self._give_up(h, flush=True)
            except StoreUnavailable as e:
                log.warning("model %s: could not commit on stop (%s)", h.model, e)
                self.held.pop(h.model, None)
        for m in self._taking - self.held.keys():  # granted, maybe, and cancelled before held
            with contextlib.suppress(StoreUnavailable):
                holder = await self.store.lease_holder(m)
                owner, _, epoch = (holder or "").rpartition(":")
                if owner == self.worker_id and epoch.isdecimal():
                    await self.store.release(Lease(m, self.worker_id, int(epoch)))
        self._taking.clear()
        with contextlib.suppress(StoreUnavailable):
            await self.store.forget_worker(self.worker_id)
