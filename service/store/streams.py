"""The examples stream: append (atomic, idempotent, lag-limited), read after a cursor, dead
letters.

There are no consumer groups: the committed cursor in ``sl:{m}:state`` is the single truth
of what was learned, so "acknowledging" an entry is advancing that cursor (and trimming the
stream below it) in the commit script. A group's pending list would be a second, weaker
record of the same fact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.errors import Backpressure, InvalidExample, ModelNotFound
from service.learning.features import Batch
from service.store.base import StoreBase, guarded, parse_id, text
from service.store.codec import encode_batch

APPEND_CHUNK_BYTES = 4 * 1024 * 1024  # payload per APPEND call (~12 bytes a non-zero): big
# script calls are slower per byte than several smaller ones


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What one :meth:`StreamOps.append` did.

    ``accepted`` rows were accepted: ``appended`` of them were written now (in the entry
    ``entry_id``), the rows at ``duplicates`` (positions in the request) carried an id
    already seen within the idempotency window and were dropped — they were learned, or will
    be, once.
    """

    accepted: int
    appended: int
    entry_id: str | None
    duplicates: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One entry of a model's stream: its id, the encoded batch, and the row count."""

    id: str
    payload: bytes
    n: int | None


def _keep_rows(
    batch: Batch, ids: list[str | None], drop: set[int]
) -> tuple[Batch, list[str | None]]:
    keep = [i for i in range(batch.n) if i not in drop]
    if not keep:
        return Batch.empty(), []
    rows = [batch.slice(i, i + 1) for i in keep]
    return Batch.concat(rows), [ids[i] for i in keep]


class StreamOps(StoreBase):
    """Appending to and reading from the examples streams."""

    async def _append_call(
        self, m: str, items: Sequence[tuple[Batch, list[str | None] | None]]
    ) -> list[tuple[str, Any]]:
        """One APPEND script call over ``items`` (non-empty batches); its per-batch outcomes
        (a prefix of ``ok`` then at most one ``dup``). Lag and unknown model raise."""
        k = self.keys
        keys = [k.examples(m), k.appended(m), k.state(m), k.idempotency(m), k.spec(m), k.lease(m)]
        args: list[Any] = [
            self.settings.max_lag,
            self.settings.idempotency_window_s * 1000,
            len(items),
        ]
        for batch, ids in items:
            id_args = ["" if i is None else str(i) for i in ids] if ids is not None else []
            args += [encode_batch(batch, None), batch.n, len(id_args), *id_args]
        outcomes: list[tuple[str, Any]] = []
        for reply in await self._append(keys=keys, args=args):
            kind = text(reply[0])
            if kind == "nomodel":
                raise ModelNotFound(f"model {m!r} does not exist", field="model")
            if kind == "lag":
                raise Backpressure(
                    f"model {m!r} has {text(reply[1])} examples not yet learned "
                    f"(max_lag={self.settings.max_lag}); retry later",
                    field="max_lag",
                )
            if kind == "dup":
                outcomes.append(("dup", [int(text(x) or 0) for x in reply[1:]]))
            else:
                outcomes.append(("ok", text(reply[1])))
        return outcomes

    @staticmethod
    def _check_ids(batch: Batch, ids: Sequence[str | None] | None) -> list[str | None] | None:
        if ids is None:
            return None
        ids = list(ids)
        if len(ids) != batch.n:
            raise InvalidExample(f"ids has {len(ids)} entries for {batch.n} examples", field="id")
        return ids

    @guarded
    async def append(
        self, m: str, batch: Batch, ids: Sequence[str | None] | None = None
    ) -> AppendResult:
        """Append a batch as one stream entry, whole or not at all.

        Rows whose id was seen within ``idempotency_window_s`` are dropped (and reported) and
        the rest retried; raises :class:`Backpressure` when the model's lag would pass
        ``max_lag``, :class:`ModelNotFound` for an unknown model.
        """
        return (await self.append_many(m, [(batch, ids)]))[0]

    @guarded
    async def append_many(
        self, m: str, items: Sequence[tuple[Batch, Sequence[str | None] | None]]
    ) -> list[AppendResult]:
        """Append several batches, in order, each as one entry, in as few round trips as
        possible (one script call per ~4 MB).

        What lands is always a prefix of ``items``: a refusal (:class:`Backpressure`,
        :class:`ModelNotFound`) raises with the batches before it appended and none after.
        """
        checked = [(b, self._check_ids(b, ids)) for b, ids in items]
        results: list[AppendResult] = []
        pos = 0
        while pos < len(checked):
            if checked[pos][0].n == 0:
                results.append(AppendResult(0, 0, None))
                pos += 1
                continue
            chunk: list[tuple[Batch, list[str | None] | None]] = []
            size = 0
            for batch, ids in checked[pos:]:
                if batch.n == 0 or (chunk and size + batch.nnz * 12 > APPEND_CHUNK_BYTES):
                    break
                chunk.append((batch, ids))
                size += batch.nnz * 12
            for (batch, ids), (kind, value) in zip(
                chunk, await self._append_call(m, chunk), strict=False
            ):
                pos += 1
                if kind == "ok":
                    results.append(AppendResult(batch.n, batch.n, value))
                else:  # dup: the script stopped here; the rest goes in the next call
                    results.append(await self._append_dropping(m, batch, ids or [], set(value)))
        return results

    async def _append_dropping(
        self, m: str, batch: Batch, ids: list[str | None], dups: set[int]
    ) -> AppendResult:
        """Retry an append without its duplicate rows (ids may race with another client)."""
        positions = list(range(batch.n))
        dropped: set[int] = set()
        while True:
            dropped |= {positions[i] for i in dups}
            rest, rest_ids = _keep_rows(batch, ids, dropped)
            positions = [i for i in range(batch.n) if i not in dropped]
            if rest.n == 0:
                return AppendResult(batch.n, 0, None, sorted(dropped))
            [(kind, value)] = await self._append_call(m, [(rest, rest_ids)])
            if kind == "ok":
                return AppendResult(batch.n, rest.n, value, sorted(dropped))
            dups = set(value)

    @guarded
    async def read(
        self, after: Mapping[str, str], count: int, block_ms: int | None = None
    ) -> dict[str, list[StreamEntry]]:
        """Entries after each model's position (``{m: last id read}``), at most ``count`` each.

        With ``block_ms`` it waits that long for the first entry when none is there. One
        XREAD over every model; on a Cluster, where one XREAD cannot span slots, one
        non-blocking XREAD per model (concurrently) and a sleep when all were empty.
        """
        if not after:
            if block_ms:
                await asyncio.sleep(block_ms / 1000)
            return {}
        streams = {self.keys.examples(m): pos for m, pos in after.items()}
        names = {self.keys.examples(m): m for m in after}
        if self.cluster:
            per_model = await asyncio.gather(
                *(self.client.xread({key: pos}, count=count) for key, pos in streams.items())
            )
            replies: list[Any] = [r for got in per_model for r in got or []]
            if not replies and block_ms:
                await asyncio.sleep(block_ms / 1000)
        else:
            replies = await self.client.xread(streams, count=count, block=block_ms or None) or []
        out: dict[str, list[StreamEntry]] = {}
        for key, entries in replies:
            m = names[text(key) or ""]
            out[m] = [_entry(eid, fields) for eid, fields in entries]
        return out

    @guarded
    async def last_entry_id(self, m: str) -> str | None:
        """The id of the newest entry still in ``m``'s stream (None when empty)."""
        got = await self.client.xrevrange(self.keys.examples(m), count=1)
        return text(got[0][0]) if got else None

    @guarded
    async def stream_length(self, m: str) -> int:
        """Entries currently in ``m``'s stream (applied ones are trimmed by commits)."""
        return int(await self.client.xlen(self.keys.examples(m)))

    @guarded
    async def with_entries(self, names: Sequence[str], chunk: int = 1000) -> list[str]:
        """The models of ``names`` whose stream holds entries (pipelined ``XLEN``): work not
        yet committed, since every commit trims its stream up to its cursor."""
        out: list[str] = []
        for lo in range(0, len(names), chunk):
            part = names[lo : lo + chunk]
            async with self.client.pipeline(transaction=False) as pipe:
                for m in part:
                    pipe.xlen(self.keys.examples(m))
                lengths = await pipe.execute()
            out += [m for m, n in zip(part, lengths, strict=True) if int(n or 0) > 0]
        return out

    @guarded
    async def notify_work(self, m: str) -> None:
        """Say on ``m``'s work channel that it has entries and no lease holder."""
        await self.client.publish(self.keys.work(m), b"1")

    @guarded
    async def dead_letters(self, m: str, count: int = 100) -> list[dict[str, Any]]:
        """The newest dead letters of ``m``: entry id, reason, payload size, time."""
        got = await self.client.xrevrange(self.keys.dead(m), count=count)
        out = []
        for did, fields in got:
            f = {text(k): v for k, v in fields.items()}
            out.append(
                {
                    "id": text(did),
                    "entry": text(f.get("entry")),
                    "reason": text(f.get("reason")),
                    "bytes": len(f.get("payload") or b""),
                    "time": parse_id(text(did) or "0-0")[0],
                }
            )
        return out


def _entry(eid: Any, fields: Mapping[Any, Any]) -> StreamEntry:
    payload = fields.get(b"b", fields.get("b", b""))
    n_raw = fields.get(b"n", fields.get("n"))
    try:
        n = int(n_raw) if n_raw is not None else None
    except (TypeError, ValueError):
        n = None
    return StreamEntry(text(eid) or "", bytes(payload) if payload is not None else b"", n)


__all__ = ["AppendResult", "StreamEntry", "StreamOps"]
