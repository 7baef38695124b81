"""Versions: immutable numbered snapshots, the head pointer, pins, rollback, history points.

A version ``sl:{m}:v:{n}`` is a hash written once by the commit (or rollback) script:
``number``, ``time`` (ms), ``cursor``, ``examples_seen``, ``mistakes``, ``updates``,
``source`` (``worker`` or ``rollback:k``), ``chain`` (the blobs of ``sl:{m}:blobs`` that
make its FULL learner state, so a rollback can reset the learner) and ``schain`` (those of
its served weights, what the API loads). Blobs are immutable and shared with the state and
the other versions (docs/pipeline.md, "Redis layout"). Versions written before format 2
hold the ``state`` and ``serving`` blobs themselves; both kinds are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from service.errors import ModelNotFound, VersionNotFound
from service.store.base import StoreBase, guarded, text
from service.store.codec import (
    StateValue,
    decode_chain,
    needs_state,
    resolve_serving,
    serving_refs,
)

_META = ("number", "time", "cursor", "examples_seen", "mistakes", "updates", "source")

#: The quality figures a history point carries (from the commit's ``quality`` JSON).
QUALITY_FIGURES = ("auc", "rolling_auc", "log_loss", "rolling_log_loss")


def decode_figures(raw: Any) -> dict[str, Any] | None:
    """The ``quality`` JSON field of a state hash, version or history point (None if absent)."""
    if not raw:
        return None
    figures: dict[str, Any] = orjson.loads(raw)
    return figures


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """A version's metadata (no weights)."""

    number: int
    time: int  # ms since the epoch (server clock)
    cursor: str  # the last stream entry applied into this version
    examples_seen: int
    mistakes: int
    updates: int
    source: str  # "worker" or "rollback:<k>"
    pinned: bool = False
    head: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}


@dataclass(frozen=True, slots=True)
class Version:
    """A version with its decoded weights (``serving``) and, on request, learner state."""

    info: VersionInfo
    serving: dict[str, StateValue]
    state: dict[str, StateValue] | None = None


def _info(values: list[Any], pinned: bool = False, head: bool = False) -> VersionInfo:
    v = [text(x) for x in values]
    return VersionInfo(
        number=int(v[0] or 0),
        time=int(v[1] or 0),
        cursor=v[2] or "0-0",
        examples_seen=int(v[3] or 0),
        mistakes=int(v[4] or 0),
        updates=int(v[5] or 0),
        source=v[6] or "worker",
        pinned=pinned,
        head=head,
    )


class VersionOps(StoreBase):
    """Reading versions, pinning, rolling back, history."""

    @guarded
    async def head(self, m: str) -> int | None:
        """The version predictions use, or None before the first publish."""
        h = await self.client.get(self.keys.head(m))
        return int(h) if h is not None else None

    @guarded
    async def heads(self, names: Sequence[str], chunk: int = 1000) -> dict[str, int | None]:
        """:meth:`head` of many models, pipelined (``chunk`` models per round trip); a model
        that does not exist is left out (its spec is read in the same round trip)."""
        k = self.keys
        out: dict[str, int | None] = {}
        for lo in range(0, len(names), chunk):
            part = names[lo : lo + chunk]
            async with self.client.pipeline(transaction=False) as pipe:
                for m in part:
                    pipe.get(k.head(m))
                    pipe.exists(k.spec(m))
                replies = await pipe.execute()
            for i, m in enumerate(part):
                h, exists = replies[2 * i], replies[2 * i + 1]
                if exists:
                    out[m] = int(h) if h is not None else None
        return out

    @guarded
    async def list_versions(self, m: str) -> list[VersionInfo]:
        """Every retained version of ``m``, oldest first, with pinned/head flags."""
        k = self.keys
        nums = [int(x) for x in await self.client.zrange(k.versions(m), 0, -1)]
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.get(k.head(m))
            pipe.smembers(k.pins(m))
            for n in nums:
                pipe.hmget(k.version(m, n), list(_META))
            replies = await pipe.execute()
        head = int(replies[0]) if replies[0] is not None else None
        pins = {int(x) for x in replies[1]}
        out = []
        for n, vals in zip(nums, replies[2:], strict=True):
            if vals[0] is None:  # removed by retention between the two reads
                continue
            out.append(_info(vals, pinned=n in pins, head=n == head))
        return out

    @guarded
    async def get_version(
        self, m: str, n: int | None = None, *, with_state: bool = False
    ) -> Version:
        """Version ``n`` (default: the head); :class:`VersionNotFound` when absent."""
        k = self.keys
        if n is None:
            n = await self.head(m)
            if n is None:
                raise VersionNotFound(f"model {m!r} has no version yet", field="version")
        reply = await self._get_version(
            keys=[k.version(m, n), k.blobs(m), k.head(m), k.pins(m)],
            args=[int(n), "1" if with_state else "0"],
        )
        if not reply:
            raise VersionNotFound(f"model {m!r} has no version {n}", field="version")
        meta, head, pinned = reply[: len(_META)], text(reply[len(_META)]), reply[len(_META) + 1]
        info = _info(meta, pinned=bool(int(pinned)), head=bool(head) and int(head or 0) == n)
        at = len(_META) + 2
        ns = int(reply[at])
        serving = decode_chain(reply[at + 1 : at + 1 + ns])
        at += 1 + ns
        nt = int(reply[at])
        chain = reply[at + 1 : at + 1 + nt]
        state = decode_chain(chain) if with_state else None
        if with_state or not needs_state(serving):
            serving = resolve_serving(serving, state)
        else:  # only the state columns the served weights name (not the whole state)
            part = decode_chain(chain, only=serving_refs(serving))
            serving = resolve_serving(serving, part, selected=True)
        return Version(info, serving, state)

    @guarded
    async def pin(self, m: str, n: int) -> None:
        """Pin version ``n``: retention keeps it and the head is held at it until unpinned."""
        k = self.keys
        ok = await self._pin(
            keys=[k.versions(m), k.pins(m), k.head(m), k.head_pin(m)],
            args=[int(n), k.version_base(m), k.events(m)],
        )
        if not int(ok):
            raise VersionNotFound(f"model {m!r} has no version {n}", field="version")

    @guarded
    async def unpin(self, m: str) -> bool:
        """Release the head (it follows the newest version again); False if it was not held."""
        k = self.keys
        got = await self._unpin(
            keys=[k.versions(m), k.pins(m), k.head(m), k.head_pin(m)], args=[k.events(m)]
        )
        return bool(int(got))

    @guarded
    async def rollback(self, m: str, n: int) -> int:
        """Publish a new version equal to ``n`` and reset the learner state to it.

        The cursor stays where it is (the updates since ``n`` are discarded, not replayed);
        the lease holder is fenced, so its in-flight commit is refused and it reloads this
        state. Returns the new version's number.
        """
        k = self.keys
        if not await self.client.exists(k.spec(m)):
            raise ModelNotFound(f"model {m!r} does not exist", field="model")
        reply = await self._rollback(
            keys=[
                k.lease(m),
                k.state(m),
                k.epoch(m),
                k.versions(m),
                k.head(m),
                k.version_seq(m),
                k.pins(m),
                k.head_pin(m),
                k.history(m),
                k.blobs(m),
            ],
            args=[
                int(n),
                k.version_base(m),
                self.settings.keep_versions,
                k.events(m),
                HISTORY_MAXLEN,
            ],
        )
        if text(reply[0]) != "ok":
            raise VersionNotFound(f"model {m!r} has no version {n}", field="version")
        return int(text(reply[1]) or 0)

    @guarded
    async def history(self, m: str, count: int = 1000) -> list[dict[str, Any]]:
        """The newest ``count`` history points, oldest first."""
        got = await self.client.xrevrange(self.keys.history(m), count=count)
        out = []
        for _hid, fields in reversed(got):
            f = {text(a): text(b) for a, b in fields.items()}
            point: dict[str, Any] = {
                "examples_seen": int(f.get("examples_seen") or 0),
                "mistakes": int(f.get("mistakes") or 0),
                "updates": int(f.get("updates") or 0),
                "time": int(f.get("time") or 0),
            }
            if f.get("event"):
                point["event"] = f["event"]
            figures = decode_figures(f.get("quality"))
            if figures is not None:
                point.update({k: figures.get(k) for k in QUALITY_FIGURES})
            out.append(point)
        return out


HISTORY_MAXLEN = 100_000
