"""The API's view of the store: every call the routes and the cache make, in one place.

The routes speak in the API's terms (a ``ModelSpec``, a ``LinearModel``, plain dicts ready for
JSON); this adapter translates to :class:`service.store.Store`, so a change of the store's
signatures touches one file. It never imports redis.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from service.errors import InvalidSpec, ModelNotFound, SpecConflict, VersionNotFound
from service.learning.batch import Batch
from service.learning.linear import LinearModel
from service.learning.spec import ModelSpec
from service.settings import Settings
from service.store import AppendResult, Store
from service.store.models import Metrics

Appended = tuple[int, str | None]
"""What an append did for one request: rows dropped as duplicates (an id already seen within
the idempotency window), and the stream entry the rest went into (None when none did)."""

HISTORY_ALL = 100_000
TAIL = 256


def parse_stream_id(entry_id: str) -> tuple[int, int]:
    """``"ms-seq"`` → ``(ms, seq)``, the order of stream ids.

    >>> parse_stream_id("1700000000000-3") < parse_stream_id("1700000000001-0")
    True
    """
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _per_group(result: AppendResult, sizes: Sequence[int]) -> list[Appended]:
    """Split an append's duplicate positions among the groups of ``sizes`` rows.

    >>> done = AppendResult(accepted=6, appended=3, entry_id="5-0", duplicates=[0, 3, 4])
    >>> _per_group(done, [2, 1, 3])
    [(1, '5-0'), (0, '5-0'), (2, '5-0')]
    """
    counts = [0] * len(sizes)
    ends = list(itertools.accumulate(sizes))
    for pos in result.duplicates:
        counts[bisect.bisect_right(ends, pos)] += 1
    return [(c, result.entry_id) for c in counts]


def _model(serving: dict[str, Any]) -> LinearModel:
    return LinearModel.from_state(serving)


class Backend:
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    # --- models -----------------------------------------------------------------------------
    async def create_model(
        self, m: str, spec: ModelSpec, ttl: int | None, given: Mapping[str, Any] | None = None
    ) -> bool:
        """Create ``m``; False when it exists with the same spec (and TTL), 409 otherwise.

        "The same spec" means the same canonical form: the store compares the JSON it holds
        byte for byte, and a spec stored by an older release lacks keys added since (text
        options, algorithm params) that the current ``to_dict`` fills in — so on a mismatch
        the stored spec is re-derived (``from_dict(stored).to_dict()``, what the worker
        builds the learner from) and compared again. A request that names a preset (or
        implies one) also matches a model built from an earlier version of the same preset
        when every field it gives explicitly agrees with the model (``given``: the request as
        sent): a preset is retuned between releases, and a model never changes with it.
        The stored JSON is left as it is."""
        wanted = spec.to_dict()
        for attempt in range(2):
            try:
                created = bool(await self.store.create_model(m, wanted, feedback_ttl=ttl))
                break
            except SpecConflict:
                same = await self._same_spec(m, wanted, given)
                if same is None and attempt == 0:
                    continue  # deleted in between: create it
                if not same:
                    raise
                created = False
                break
        if created:
            return True
        current = self.ttl(await self.store.feedback_ttl(m))
        if ttl is not None and ttl != current:
            raise SpecConflict(
                f"model {m!r} exists with feedback_ttl={current}, not {ttl}",
                field="feedback_ttl",
            )
        return False

    async def _same_spec(
        self, m: str, wanted: dict[str, Any], given: Mapping[str, Any] | None
    ) -> bool | None:
        """Whether ``m``'s stored spec means ``wanted`` (a canonical dict) today, or — when
        both come from the same preset — agrees with every field ``given`` names; None if
        ``m`` is gone."""
        try:
            stored = await self.store.get_spec(m)
        except ModelNotFound:
            return None
        try:
            base = ModelSpec.from_dict(stored).to_dict()
            if base == wanted:
                return True
            if given is None or base.get("preset") is None or base["preset"] != wanted["preset"]:
                return False
            overlay = {**base, **{k: v for k, v in given.items() if k != "preset"}}
            same_algorithm = given.get("algorithm", base["algorithm"]) == base["algorithm"]
            if same_algorithm and isinstance(given.get("params"), Mapping):
                overlay["params"] = {**base["params"], **given["params"]}
            return bool(ModelSpec.from_dict(overlay).to_dict() == base)
        except InvalidSpec:  # no longer a valid spec at all: certainly not this one
            return False

    def ttl(self, stored: int | None) -> int:
        """A model's feedback TTL: its own (0 = keep nothing), else the default."""
        return self.settings.feedback_ttl_s if stored is None else stored

    async def spec(self, m: str) -> tuple[ModelSpec, int | None]:
        spec = ModelSpec.from_dict(await self.store.get_spec(m))
        return spec, await self.store.feedback_ttl(m)

    async def describe(self, m: str) -> dict[str, Any]:
        spec, ttl = await self.spec(m)
        return {
            "name": m,
            "spec": spec.to_dict(),
            "feedback_ttl": self.ttl(ttl),
            "version": await self.head(m),
        }

    async def list_models(self) -> list[str]:
        return list(await self.store.list_models())

    async def delete_model(self, m: str) -> None:
        existed = await self.store.delete_model(m)
        if existed is False:
            raise ModelNotFound(f"model {m!r} does not exist", field="model")

    # --- examples and feedback ---------------------------------------------------------------
    async def append(self, m: str, batch: Batch, ids: Sequence[str | None]) -> Appended:
        """Append a batch whole, as one stream entry."""
        return (await self.append_groups(m, batch, ids, [batch.n]))[0]

    async def append_groups(
        self, m: str, batch: Batch, ids: Sequence[str | None], sizes: Sequence[int]
    ) -> list[Appended]:
        """Append one batch as one entry, made of the rows of several requests (``sizes``
        rows each, in order); what happened to each request's rows."""
        result = await self.store.append(m, batch, ids if any(i is not None for i in ids) else None)
        return _per_group(result, sizes)

    async def appended_up_to(self, m: str) -> str:
        """A stream id at or after every entry appended so far (the newest entry, else the
        committed cursor: the stream is trimmed up to it)."""
        return await self.store.last_entry_id(m) or await self.store.committed_cursor(m)

    async def covering_version(self, m: str, entry_id: str) -> int | None:
        """The first version whose cursor reaches ``entry_id``, once the head has reached it
        (so it, or a later version, is what predictions use); None before that."""
        target = parse_stream_id(entry_id)
        infos = await self.store.list_versions(m)
        head = next((i for i in infos if i.head), None)
        if head is None or parse_stream_id(head.cursor) < target:
            return None
        return min(
            (
                i.number
                for i in infos
                if i.number <= head.number and parse_stream_id(i.cursor) >= target
            ),
            default=head.number,
        )

    async def keep(self, items: Sequence[tuple[str, str, Batch, int]]) -> None:
        """Keep predictions' features for feedback: ``(model, group, batch, ttl)`` each, one
        key per group, all in one pipelined round trip."""
        await self.store.keep_predictions(items)

    async def take(self, m: str, pid: str) -> Batch:
        return await self.store.take_prediction(m, pid)

    # --- versions ----------------------------------------------------------------------------
    async def head(self, m: str) -> int:
        """The head version (0 before the first); ModelNotFound for an unknown model."""
        h = await self.store.head(m)
        if h is None:
            if not await self.exists(m):
                raise ModelNotFound(f"model {m!r} does not exist", field="model")
            return 0
        return int(h)

    async def heads(self, names: Sequence[str]) -> dict[str, int]:
        """The head of each model that exists (0 before the first version), pipelined."""
        heads = await self.store.heads(list(names))
        return {m: 0 if h is None else int(h) for m, h in heads.items()}

    async def exists(self, m: str) -> bool:
        return bool(await self.store.exists(m))

    async def serving(self, m: str, n: int) -> LinearModel:
        return _model((await self.store.get_version(m, n)).serving)

    async def versions(self, m: str) -> tuple[int, list[dict[str, Any]]]:
        infos = await self.store.list_versions(m)
        if not infos:
            await self.head(m)  # 404 for an unknown model
        rows = [self._meta(i.as_dict()) for i in reversed(infos)]
        head = next((r["version"] for r in rows if r["head"]), 0)
        return head, rows

    @staticmethod
    def _meta(d: dict[str, Any]) -> dict[str, Any]:
        out = {"version": d["number"], **d}
        del out["number"]
        out["time"] = out["time"] / 1000.0
        return out

    async def version(self, m: str, n: int) -> tuple[dict[str, Any], LinearModel]:
        if not await self.exists(m):
            raise ModelNotFound(f"model {m!r} does not exist", field="model")
        try:
            v = await self.store.get_version(m, n)
        except VersionNotFound:
            raise await self._missing(m, n) from None
        return self._meta(v.info.as_dict()), _model(v.serving)

    async def pin(self, m: str, n: int) -> None:
        await self._require(m)
        try:
            await self.store.pin(m, n)
        except VersionNotFound:
            raise await self._missing(m, n) from None

    async def unpin(self, m: str) -> None:
        await self._require(m)
        await self.store.unpin(m)

    async def rollback(self, m: str, n: int) -> int:
        try:
            return int(await self.store.rollback(m, n))
        except VersionNotFound:
            raise await self._missing(m, n) from None

    async def _missing(self, m: str, n: int) -> VersionNotFound:
        """Why version ``n`` is not there: removed by retention (naming the oldest kept), or
        not published yet."""
        kept = sorted(i.number for i in await self.store.list_versions(m))
        if kept and n < kept[-1]:
            return VersionNotFound(
                f"version {n} of model {m!r} was removed by retention (the newest "
                f"{self.settings.keep_versions} versions and pinned ones are kept); the oldest "
                f"kept is version {kept[0]}",
                field="version",
            )
        newest = f"the newest is version {kept[-1]}" if kept else "none is published yet"
        return VersionNotFound(f"model {m!r} has no version {n} ({newest})", field="version")

    async def _require(self, m: str) -> None:
        if not await self.exists(m):
            raise ModelNotFound(f"model {m!r} does not exist", field="model")

    async def dead_letters(self, m: str, limit: int) -> list[dict[str, Any]]:
        """The newest ``limit`` dead letters of ``m``, newest first, times in seconds."""
        await self._require(m)
        rows = await self.store.dead_letters(m, count=limit)
        return [{**r, "time": r["time"] / 1000.0} for r in rows]

    # --- monitoring --------------------------------------------------------------------------
    async def metrics(self, m: str) -> dict[str, Any]:
        return self._metrics_row((await self.store.metrics(m)).as_dict())

    async def metrics_table(self, names: Sequence[str]) -> dict[str, Metrics]:
        """The store's metrics of every listed model that exists, as they are (``GET
        /metrics`` renders them directly: no per-model dicts)."""
        return await self.store.metrics_many(list(names))

    async def metrics_many(self, names: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
        """Every listed model's metrics, read in pipelined batches (deleted ones left out)."""
        rows = await self.store.metrics_many(list(names))
        return [(m, self._metrics_row(r.as_dict())) for m, r in rows.items()]

    @staticmethod
    def _metrics_row(row: dict[str, Any]) -> dict[str, Any]:
        last = row.get("last_update")
        if isinstance(last, int | float) and last > 1e11:  # ms → s
            row["last_update"] = last / 1000.0
        row.setdefault("version", 0)
        if row["version"] is None:
            row["version"] = 0
        return row

    async def history_tail(self, m: str, count: int) -> list[dict[str, Any]]:
        """The newest ``count`` points, oldest first, times in seconds."""
        await self._require(m)
        points = await self.store.history(m, count=count)
        for p in points:
            p["time"] = p["time"] / 1000.0
        return points

    async def history_since(self, m: str, after: Any) -> list[tuple[Any, dict[str, Any]]]:
        """Points after the marker ``after`` (the last point fed to the drift detector), each
        with its marker. Reads a short tail first; the whole history only when the marker is
        not in it (the first call, or after a long pause)."""
        for count in (TAIL, HISTORY_ALL):
            points = await self.history_tail(m, count)
            marked = [
                ((p["examples_seen"], p["mistakes"], p["updates"], p["time"]), p) for p in points
            ]
            if after is None:
                if len(points) < count:
                    return marked
                continue
            idx = next((i for i in range(len(marked) - 1, -1, -1) if marked[i][0] == after), None)
            if idx is not None:
                return marked[idx + 1 :]
            if len(points) < count:
                return marked  # the marker was trimmed away: feed what there is
        return marked

    async def ping(self) -> bool:
        return bool(await self.store.ping())

    async def alive_workers(self) -> int:
        return len(await self.store.workers())

    # --- events ------------------------------------------------------------------------------
    def events(self, stop: asyncio.Event) -> AsyncIterator[str | None]:
        """Model names as their events channel announces a change (one subscription), and
        ``None`` each time the subscription starts or restarts (``service.store.channels``)."""
        return self.store.events(stop)

    async def close(self) -> None:
        await self.store.close()
