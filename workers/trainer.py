"""The worker: consume → learn → commit → publish, for many models, exactly once.

One :class:`Worker` serves every model whose lease it holds. :meth:`Worker.run` is one
``while`` loop (rq's ``work`` is the model):

1. every ``heartbeat_ms``: renew the leases, drop the lost ones, take free leases up to a
   fair share (``ceil(models / alive workers)``), give up extras, write the heartbeat;
2. read the entries after each held model's position (one blocking XREAD of about 4,000
   examples per model, see ``reader.py``);
3. decode, check and learn each entry through the compiled batch path; an entry that cannot
   be decoded or checked becomes a dead letter (acknowledged with the next commit);
4. commit every ``commit_ms`` / ``commit_examples``, and publish a version (in the same
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
    check_batch,
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
        self.stats: dict[str, float] = {
            "examples": 0,
            "entries": 0,
            "dead": 0,
            "commits": 0,
            "publishes": 0,
            "refused": 0,
            "commit_seconds": 0.0,
            "takeovers": 0,
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
                    read = await self._reader.next({m: h.position for m, h in self.held.items()})
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
            await self._shutdown()
        log.info("worker %s stopped: %s", self.worker_id, self.stats)

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
                batch, _ = decode_batch(e.payload)
                check_batch(batch, learner.dim, learner.n_classes)
                h.touched.append(batch.indices)  # before learning: a superset if it raises
                if h.quality is None:
                    learner.learn(batch)
                else:
                    _, margins = learner.learn_scored(batch)
                    h.quality.update(margins, batch.y, learner.link)
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
        """Renew leases, keep a fair share of the models, write the heartbeat."""
        held = list(self.held.values())
        for h, ok in zip(held, await self.store.renew([h.lease for h in held]), strict=True):
            if not ok:
                self.held.pop(h.model, None)
                await self._say_dropped(h, "lease lost")
        models = await self.store.list_models()
        alive = {w.worker_id for w in await self.store.workers()} | {self.worker_id}
        share = math.ceil(len(models) / len(alive)) if models else 0
        for m in [m for m in self.held if m not in models]:
            await self._give_up(self.held[m], flush=False)  # deleted
        while len(self.held) > share:
            await self._give_up(self.held[max(self.held)], flush=True)
        free = [m for m in models if m not in self.held]
        random.shuffle(free)
        now = time.monotonic()
        for m in free:
            if len(self.held) >= share:
                break
            if self._skip_until.get(m, 0.0) > now:
                continue
            lease = await self.store.acquire(m, self.worker_id)
            if lease is not None:
                await self._take(lease)
        await self.store.heartbeat(
            self.worker_id, list(self.held), pid=os.getpid(), host=socket.gethostname()
        )

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
        )
        self.stats["takeovers"] += 1
        log.info("model %s: loaded at cursor %s", m, committed.cursor)

    async def _give_up(self, h: Held, flush: bool) -> None:
        if flush and (h.entries or h.dirty):
            await self._commit(h, publish=h.dirty)
        self.held.pop(h.model, None)
        await self.store.release(h.lease)

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
        with contextlib.suppress(StoreUnavailable):
            await self.store.forget_worker(self.worker_id)
