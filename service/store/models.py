"""The :class:`Store`: model specs, leases with fencing epochs, the atomic commit, metrics,
worker heartbeats — plus the stream and version operations it inherits.

The exactly-once argument lives in ``docs/pipeline.md``; in short: a worker learns for a
model only under its lease (``worker-id:epoch``, the epoch bumped by every grant), and its
commit — state, counters, cursor, dead letters, trim, history point and, when due, a new
version — is one Lua script that refuses unless the lease still carries the writer's token
and the stored cursor is the one the writer started from.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from service.errors import CommitConflict, LeaseLost, ModelNotFound, SpecConflict
from service.settings import Settings
from service.store.base import guarded, next_id, text
from service.store.codec import (
    StateValue,
    decode_chain,
    decode_quality_chain,
    decode_state,
    encode_quality,
    encode_sparse,
)
from service.store.connection import connect
from service.store.events import EventOps
from service.store.feedback import FeedbackOps
from service.store.keys import Keys, validate_model_name
from service.store.streams import StreamOps
from service.store.versions import HISTORY_MAXLEN, QUALITY_FIGURES, VersionOps, decode_figures

DEAD_MAXLEN = 1_000  # approximate (MAXLEN ~): the newest dead letters
_METRIC_READS = 4  # commands per model queued by Store._queue_metrics


@dataclass(frozen=True, slots=True)
class Lease:
    """A granted lease: ``token`` is what ``sl:{m}:lease`` holds while it is ours."""

    model: str
    worker_id: str
    epoch: int

    @property
    def token(self) -> str:
        return f"{self.worker_id}:{self.epoch}"


@dataclass(frozen=True, slots=True)
class StateBlob:
    """An encoded state for :meth:`Store.commit`: a format-2 blob (``codec.encode_sparse``)
    that is either ``full`` (it starts a new chain) or a delta on top of the stored chain."""

    data: bytes
    full: bool
    ref: bool = False  # serving only: its weights refer to the committed state (full blob)

    @classmethod
    def of(cls, state: Mapping[str, StateValue]) -> StateBlob:
        """A full blob of a state dict, every array stored whole (no feature axis known)."""
        return cls(encode_sparse(state, {}), True)


@dataclass(frozen=True, slots=True)
class CommittedState:
    """What the last commit left: the learner state (None before the first), counters, cursor."""

    state: dict[str, StateValue] | None
    cursor: str
    examples_seen: int
    mistakes: int
    updates: int
    applied: int  # stream examples consumed (learned or dead-lettered); lag = appended − this
    updated_at: int | None  # ms, server clock
    chain: tuple[int, ...] = ()  # bytes of each blob of the state's chain (full one first);
    # empty when the state is absent or in format 1 (then the next commit must be full)
    quality: dict[str, StateValue] | None = None  # the quality tracker's state, if committed


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An entry that could not be learned, and why."""

    entry_id: str
    reason: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class Quality:
    """The progressive quality committed with the learner: the tracker's exact ``state``
    (stored as ``quality_state``) and its ``figures`` (``auc``, ``rolling_auc``,
    ``log_loss``, ``rolling_log_loss``…, plus ``members`` for an ensemble; stored as the
    JSON ``quality``). History points keep the four figures alone."""

    state: Mapping[str, StateValue]
    figures: Mapping[str, Any]
    # the state as written: a full blob (encode_quality, the default) or a delta on the
    # stored quality chain (encode_quality_delta; refused as "nochain" if none is stored)
    blob: bytes | None = None


@dataclass(frozen=True, slots=True)
class CommitResult:
    version: int | None  # the version published in the same step, if any
    time: int  # server time of the commit, ms


@dataclass(frozen=True, slots=True)
class Metrics:
    """The numbers ``GET /models/{m}/metrics`` needs, read in one round trip."""

    examples_seen: int
    mistakes: int
    updates: int
    version: int | None
    lag: int
    last_update: int | None  # ms
    appended: int
    applied: int
    quality: dict[str, Any] | None = None  # the figures of the last commit (binary models)

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    worker_id: str
    models: list[str]
    ts: int  # ms, the worker's clock at its last heartbeat
    pid: int | None = None
    host: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def canonical_spec(spec: Mapping[str, Any]) -> bytes:
    """The bytes a spec is stored (and compared) as: orjson with sorted keys."""
    return orjson.dumps(dict(spec), option=orjson.OPT_SORT_KEYS)


class Store(StreamOps, VersionOps, FeedbackOps, EventOps):
    """Every Redis operation of the service (async). Build with :meth:`open` or directly."""

    @classmethod
    def open(cls, settings: Settings, *, worker: bool = False) -> Store:
        """A store on ``connect(settings, worker=worker)`` with ``Keys(settings.key_prefix)``."""
        return cls(connect(settings, worker=worker), Keys(settings.key_prefix), settings)

    # --- specs ---------------------------------------------------------------------------
    @guarded
    async def create_model(
        self, m: str, spec: Mapping[str, Any], *, feedback_ttl: int | None = None
    ) -> bool:
        """Store ``spec`` (a JSON-safe dict) under ``m``, with the model's own feedback TTL
        when given (in the same script): True if created, False if the same spec was already
        there (its TTL untouched); :class:`SpecConflict` if another one is."""
        validate_model_name(m)
        args: list[Any] = [canonical_spec(spec), int(time.time() * 1000)]
        if feedback_ttl is not None:
            args.append(int(feedback_ttl))
        got = int(await self._create(keys=[self.keys.spec(m)], args=args))
        if got < 0:
            raise SpecConflict(f"model {m!r} exists with another spec", field="spec")
        await self.client.sadd(self.keys.models(), m)
        return got == 1

    @guarded
    async def get_spec(self, m: str) -> dict[str, Any]:
        """The stored spec dict; :class:`ModelNotFound` if ``m`` does not exist."""
        raw = await self.client.hget(self.keys.spec(m), "json")
        if raw is None:
            raise ModelNotFound(f"model {m!r} does not exist", field="model")
        spec: dict[str, Any] = orjson.loads(raw)
        return spec

    @guarded
    async def model_info(self, m: str) -> dict[str, Any]:
        """``{"spec": ..., "created_at": ms}``; :class:`ModelNotFound` if absent."""
        raw, created = await self.client.hmget(self.keys.spec(m), ["json", "created_at"])
        if raw is None:
            raise ModelNotFound(f"model {m!r} does not exist", field="model")
        return {"spec": orjson.loads(raw), "created_at": int(created or 0)}

    @guarded
    async def exists(self, m: str) -> bool:
        return bool(await self.client.exists(self.keys.spec(m)))

    @guarded
    async def list_models(self) -> list[str]:
        """Model names, sorted."""
        return sorted(text(x) or "" for x in await self.client.smembers(self.keys.models()))

    @guarded
    async def delete_model(self, m: str) -> bool:
        """Delete every key of ``m`` (stream, state, versions, kept predictions…). The lease
        goes too, so a worker's in-flight commit is refused. True if the model existed."""
        k = self.keys
        await self.client.srem(k.models(), m)
        fixed = [key for key in k.model_keys(m) if key != k.versions(m)]
        existed = int(
            await self._delete(
                keys=[k.epoch(m), k.versions(m), *fixed], args=[k.version_base(m), k.events(m)]
            )
        )
        found = [
            key async for key in self.client.scan_iter(match=k.prediction_pattern(m), count=1000)
        ]
        for i in range(0, len(found), 500):
            await self.client.delete(*found[i : i + 500])
        return existed > 0

    # --- leases --------------------------------------------------------------------------
    @guarded
    async def acquire(self, m: str, worker_id: str, ttl_ms: int | None = None) -> Lease | None:
        """Take ``m``'s lease if it is free (bumping the epoch); None if held or no model."""
        k = self.keys
        ttl = ttl_ms or self.settings.lease_ttl_ms
        epoch = int(
            await self._acquire(keys=[k.lease(m), k.epoch(m), k.spec(m)], args=[worker_id, ttl])
        )
        return Lease(m, worker_id, epoch) if epoch > 0 else None

    @guarded
    async def renew(self, leases: Sequence[Lease], ttl_ms: int | None = None) -> list[bool]:
        """Extend each lease that is still ours; False where it was lost (pipelined)."""
        if not leases:
            return []
        ttl = ttl_ms or self.settings.lease_ttl_ms
        if self.cluster:
            return [
                bool(int(await self._renew(keys=self._lease_keys(x), args=[x.token, ttl, x.epoch])))
                for x in leases
            ]
        # ``async with``: a pipeline whose script loading fails (Redis down) must still give
        # its connection back, or it is reported later as an unclosed client
        async with self.client.pipeline(transaction=False) as pipe:
            for x in leases:
                await self._renew(
                    keys=self._lease_keys(x), args=[x.token, ttl, x.epoch], client=pipe
                )
            replies = await pipe.execute()
        return [bool(int(r)) for r in replies]

    @guarded
    async def release(self, lease: Lease) -> bool:
        """Give the lease up if it is still ours."""
        return bool(int(await self._release(keys=self._lease_keys(lease), args=[lease.token])))

    def _lease_keys(self, lease: Lease) -> list[str]:
        return [self.keys.lease(lease.model), self.keys.epoch(lease.model)]

    @guarded
    async def lease_holder(self, m: str) -> str | None:
        """The token currently in ``m``'s lease, if any."""
        return text(await self.client.get(self.keys.lease(m)))

    # --- state and commit ----------------------------------------------------------------
    @guarded
    async def load_state(self, m: str) -> CommittedState:
        """The committed state of ``m`` (what a worker loads when it takes the lease): the
        state hash, the blobs of its chain and the quality tracker's state, read in one
        script (a consistent snapshot)."""
        reply = await self._load_state(keys=[self.keys.state(m), self.keys.blobs(m)])
        cursor, seen, mistakes, updates, applied, updated, blob, quality, chain, *blobs = reply
        state: dict[str, StateValue] | None = None
        if chain:
            state = decode_chain(blobs)
        elif blob:
            state = decode_state(blob)
        return CommittedState(
            state=state,
            cursor=text(cursor) or "0-0",
            examples_seen=int(seen or 0),
            mistakes=int(mistakes or 0),
            updates=int(updates or 0),
            applied=int(applied or 0),
            updated_at=int(updated) if updated else None,
            chain=tuple(len(b) for b in blobs) if chain else (),
            quality=decode_quality_chain(quality) if quality else None,
        )

    @guarded
    async def committed_cursor(self, m: str) -> str:
        """The committed cursor of ``m`` alone (``"0-0"`` before the first commit)."""
        return text(await self.client.hget(self.keys.state(m), "cursor")) or "0-0"

    @guarded
    async def commit(
        self,
        lease: Lease,
        *,
        expected_cursor: str,
        cursor: str,
        state: StateBlob | Mapping[str, StateValue] | None,
        counters: Mapping[str, Any],
        applied: int,
        dead: Sequence[DeadLetter] = (),
        history: bool = False,
        serving: StateBlob | Mapping[str, StateValue] | None = None,
        quality: Quality | None = None,
    ) -> CommitResult:
        """Atomically write state + counters + cursor, acknowledge (trim) the applied entries,
        record dead letters, a history point if asked, and publish a version if ``serving``
        is given. :class:`LeaseLost` / :class:`CommitConflict` when refused — then nothing
        was written.

        ``state`` is a :class:`StateBlob` (full, or a delta on the stored chain), a state
        dict (stored as a full blob) or None (the learner state did not change: the chain is
        kept). ``serving`` likewise; a delta serving blob applies to the serving weights of
        the last version published from this state. A delta with nothing to apply it to
        raises :class:`CommitConflict` (``field="chain"``); nothing was written.

        ``quality`` (binary models) goes into the state hash, the history point and the
        version alike (its tracker state zlib-compressed: :func:`encode_quality`)."""
        m, k = lease.model, self.keys
        dead_args: list[Any] = []
        for d in dead:
            dead_args += [d.entry_id, d.reason, d.payload]
        blob = StateBlob.of(state) if isinstance(state, Mapping) else state
        served = StateBlob.of(serving) if isinstance(serving, Mapping) else serving
        reply = await self._commit(
            keys=[
                k.lease(m),
                k.state(m),
                k.examples(m),
                k.history(m),
                k.dead(m),
                k.versions(m),
                k.head(m),
                k.version_seq(m),
                k.pins(m),
                k.head_pin(m),
                k.epoch(m),
                k.blobs(m),
            ],
            args=[
                lease.token,
                expected_cursor,
                cursor,
                blob.data if blob is not None else b"",
                int(counters.get("examples_seen", 0)),
                int(counters.get("mistakes", 0)),
                int(counters.get("updates", 0)),
                int(applied),
                next_id(cursor) if cursor != "0-0" else "",
                "1" if history else "0",
                "1" if served is not None else "0",
                served.data if served is not None else b"",
                self.settings.keep_versions,
                k.events(m),
                k.version_base(m),
                HISTORY_MAXLEN,
                DEAD_MAXLEN,
                lease.epoch,
                self.settings.lease_ttl_ms,
                "same" if blob is None else "full" if blob.full else "delta",
                "full"
                if served is None or (served.full and not served.ref)
                else "ref"
                if served.ref
                else "delta",
                orjson.dumps(dict(quality.figures)) if quality is not None else b"",
                b""
                if quality is None
                else quality.blob
                if quality.blob is not None
                else encode_quality(quality.state),
                orjson.dumps({f: quality.figures.get(f) for f in QUALITY_FIGURES})
                if quality is not None
                else b"",
                len(dead),
                *dead_args,
            ],
        )
        kind = text(reply[0])
        if kind == "lease":
            raise LeaseLost(
                f"lease of {m!r} is {text(reply[1]) or 'free'}, not {lease.token}", field="lease"
            )
        if kind == "conflict":
            raise CommitConflict(
                f"cursor of {m!r} is {text(reply[1])}, not {expected_cursor}", field="cursor"
            )
        if kind == "nochain":
            raise CommitConflict(
                f"model {m!r} has no stored {text(reply[1])} chain to apply a delta to",
                field="chain",
            )
        ver = int(text(reply[1]) or 0)
        return CommitResult(ver or None, int(text(reply[2]) or 0))

    # --- metrics ---------------------------------------------------------------------------
    @guarded
    async def metrics(self, m: str) -> Metrics:
        """Counters, head version and lag of ``m`` in one round trip."""
        async with self.client.pipeline(transaction=False) as pipe:
            self._queue_metrics(pipe, m)
            row = self._metrics_of(m, await pipe.execute())
        if row is None:
            raise ModelNotFound(f"model {m!r} does not exist", field="model")
        return row

    @guarded
    async def metrics_many(self, names: Sequence[str], chunk: int = 1000) -> dict[str, Metrics]:
        """:meth:`metrics` of many models, ``chunk`` models per round trip (one script call
        on a standalone Redis, a pipeline on a Cluster), one round trip at a time (never one
        concurrent call per model: that drains the pool). Models that do not exist (deleted
        meanwhile) are left out."""
        out: dict[str, Metrics] = {}
        k = self.keys
        for lo in range(0, len(names), chunk):
            part = names[lo : lo + chunk]
            if self.cluster:
                async with self.client.pipeline(transaction=False) as pipe:
                    for m in part:
                        self._queue_metrics(pipe, m)
                    replies = await pipe.execute()
            else:  # one script call: one reply parsed in C, not four per model in Python
                replies = await self._metrics(keys=[], args=[k.prefix, *part])
            for i, m in enumerate(part):
                row = self._metrics_of(m, replies[i * _METRIC_READS : (i + 1) * _METRIC_READS])
                if row is not None:
                    out[m] = row
        return out

    def _queue_metrics(self, pipe: Any, m: str) -> None:
        k = self.keys
        pipe.exists(k.spec(m))
        pipe.hmget(
            k.state(m), ["examples_seen", "mistakes", "updates", "applied", "updated_at", "quality"]
        )
        pipe.get(k.head(m))
        pipe.get(k.appended(m))

    @staticmethod
    def _metrics_of(m: str, replies: Sequence[Any]) -> Metrics | None:
        exists, vals, head, appended = replies
        if not exists:
            return None
        seen, mistakes, updates, applied, updated, quality = vals
        app, done = int(appended or 0), int(applied or 0)
        return Metrics(
            examples_seen=int(seen or 0),
            mistakes=int(mistakes or 0),
            updates=int(updates or 0),
            version=int(head) if head is not None else None,
            lag=max(0, app - done),
            last_update=int(updated) if updated else None,
            appended=app,
            applied=done,
            quality=decode_figures(quality),
        )

    # --- heartbeats ------------------------------------------------------------------------
    @guarded
    async def heartbeat(self, worker_id: str, models: Sequence[str], **extra: Any) -> None:
        """Record that ``worker_id`` is alive and holds ``models``."""
        info = {"models": sorted(models), "ts": int(time.time() * 1000), **extra}
        await self.client.hset(self.keys.workers(), worker_id, orjson.dumps(info))

    @guarded
    async def forget_worker(self, worker_id: str) -> None:
        await self.client.hdel(self.keys.workers(), worker_id)

    @guarded
    async def workers(self, max_age_ms: int | None = None) -> list[WorkerInfo]:
        """Workers whose last heartbeat is at most ``max_age_ms`` old (default: 5 beats);
        older entries are removed."""
        age = max_age_ms if max_age_ms is not None else 5 * self.settings.heartbeat_ms
        now = int(time.time() * 1000)
        raw = await self.client.hgetall(self.keys.workers())
        out, stale = [], []
        for wid, blob in raw.items():
            try:
                info = orjson.loads(blob)
            except orjson.JSONDecodeError:
                info = {"ts": 0}
            ts = int(info.pop("ts", 0))
            if now - ts > max(age, 60_000):
                stale.append(wid)
            if now - ts > age:
                continue
            out.append(
                WorkerInfo(
                    worker_id=text(wid) or "",
                    models=list(info.pop("models", [])),
                    ts=ts,
                    pid=info.pop("pid", None),
                    host=info.pop("host", None),
                    extra=info,
                )
            )
        if stale:
            await self.client.hdel(self.keys.workers(), *stale)
        return sorted(out, key=lambda w: w.worker_id)
