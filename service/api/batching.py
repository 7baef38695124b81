"""Micro-batching of small ingest and predict requests (see :mod:`service.api.coalesce`).

Concurrent requests of one model are featurized together (one vectorised ``transform``),
appended together (one stream entry, atomically) or scored together (one compiled call), and
their kept features written together. A bad example fails only its own request: the group is
re-featurized without it, and the error carries the index *within that request*.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from service.api.backend import Appended, Backend
from service.api.cache import Served
from service.api.coalesce import Coalescer
from service.errors import InvalidExample
from service.learning.batch import Batch

SMALL = 64  # requests with at most this many examples are micro-batched

IngestItem = tuple[Any, list[Any], list[str | None]]  # featurizer, examples, ids
PredictItem = tuple[Served, list[Any], bool]  # served, examples, keep features for feedback


def featurize_group(
    featurizer: Any, groups: Sequence[list[Any]], *, labels: bool
) -> tuple[Batch | None, list[int], dict[int, BaseException]]:
    """Featurize the concatenation of ``groups``; drop (and report) groups with a bad example.

    Returns the batch of the surviving groups (None if none survive), their positions, and
    the errors by position.
    """
    alive = list(range(len(groups)))
    errors: dict[int, BaseException] = {}
    while alive:
        examples = [ex for g in alive for ex in groups[g]]
        try:
            return featurizer.transform(examples, labels=labels), alive, errors
        except InvalidExample as exc:
            if exc.index is None:
                raise
            start = 0
            for g in alive:
                if exc.index < start + len(groups[g]):
                    errors[g] = type(exc)(exc.message, field=exc.field, index=exc.index - start)
                    alive.remove(g)
                    break
                start += len(groups[g])
            else:  # pragma: no cover - an index past the batch: a featurizer bug
                raise
    return None, [], errors


def answers(served: Served, batch: Batch, group: str | None) -> list[dict[str, Any]]:
    """One answer per row; prediction ids are ``<group>-<row>`` (see store/feedback.py), or
    None when ``group`` is None (nothing kept for feedback)."""
    model = served.model
    margins = np.asarray(model.margins(batch), dtype=np.float64)
    proba = np.asarray(model.proba(batch), dtype=np.float64)
    classes = np.asarray(model.predict(batch))
    name = served.featurizer.label_name
    version = served.version
    out: list[dict[str, Any]] = []
    for i in range(batch.n):
        k = int(classes[i])
        m, p = (margins[i], proba[i]) if margins.ndim == 1 else (margins[i, k], proba[i, k])
        out.append(
            {
                "label": name(k),
                "score": float(min(1.0, max(0.0, p))),
                "margin": float(m),
                "version": version,
                "prediction_id": None if group is None else f"{group}-{i}",
            }
        )
    return out


def first_occurrences(ids: list[str | None]) -> list[int] | None:
    """Rows to keep when the same id repeats inside one request (learned once), else None."""
    seen: set[str] = set()
    keep: list[int] = []
    for i, ident in enumerate(ids):
        if ident is not None:
            if ident in seen:
                continue
            seen.add(ident)
        keep.append(i)
    return keep if len(keep) < len(ids) else None


class Batcher:
    """Per-process micro-batchers, one ingest and one predict queue per model."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._ingest: dict[str, Coalescer[IngestItem, Appended]] = {}
        self._predict: dict[str, Coalescer[PredictItem, list[dict[str, Any]]]] = {}

    def forget(self, m: str) -> None:
        """Drop ``m``'s queues (evicted from the cache; a busy queue finishes on its own)."""
        self._ingest.pop(m, None)
        self._predict.pop(m, None)

    async def ingest(
        self, m: str, featurizer: Any, examples: list[Any], ids: list[str | None]
    ) -> Appended:
        """Featurize and append with concurrent requests; the rows of this request dropped by
        the store as duplicates, and the entry the rest went into."""
        q = self._ingest.get(m)
        if q is None:

            async def flush(items: list[IngestItem]) -> list[Appended | BaseException]:
                return await self._flush_ingest(m, items)

            q = self._ingest[m] = Coalescer(flush)
        return await q.submit((featurizer, examples, ids))

    async def _flush_ingest(
        self, m: str, items: list[IngestItem]
    ) -> list[Appended | BaseException]:
        outcomes: list[Appended | BaseException] = [(0, None)] * len(items)
        by_featurizer: dict[int, list[int]] = {}
        for pos, item in enumerate(items):  # a re-created model brings a new featurizer
            by_featurizer.setdefault(id(item[0]), []).append(pos)
        for positions in by_featurizer.values():
            groups = []
            for pos in positions:
                _, examples, ids = items[pos]
                keep = first_occurrences(ids)
                groups.append(examples if keep is None else [examples[i] for i in keep])
            batch, alive, errors = featurize_group(items[positions[0]][0], groups, labels=True)
            for g, err in errors.items():
                outcomes[positions[g]] = err
            if batch is None:
                continue
            ids_all: list[str | None] = []
            for g in alive:
                _, _, ids = items[positions[g]]
                keep = first_occurrences(ids)
                ids_all.extend(ids if keep is None else [ids[i] for i in keep])
            sizes = [len(groups[g]) for g in alive]
            done = await self.backend.append_groups(m, batch, ids_all, sizes)  # one entry
            for g, outcome in zip(alive, done, strict=True):
                outcomes[positions[g]] = outcome
        return outcomes

    async def predict(
        self, m: str, served: Served, examples: list[Any], keep: bool = True
    ) -> list[dict[str, Any]]:
        q = self._predict.get(m)
        if q is None:

            async def flush(
                items: list[PredictItem],
            ) -> list[list[dict[str, Any]] | BaseException]:
                return await self._flush_predict(m, items)

            q = self._predict[m] = Coalescer(flush)
        return await q.submit((served, examples, keep))

    async def _flush_predict(
        self, m: str, items: list[PredictItem]
    ) -> list[list[dict[str, Any]] | BaseException]:
        outcomes: list[list[dict[str, Any]] | BaseException] = [[] for _ in items]
        by_served: dict[tuple[int, bool], list[int]] = {}
        for pos, (served, _, keep) in enumerate(items):  # a swap mid-queue: each's own model
            by_served.setdefault((id(served), keep), []).append(pos)
        keeps: list[tuple[str, str, Batch, int]] = []
        for (_, keep), positions in by_served.items():
            served = items[positions[0]][0]
            groups = [items[pos][1] for pos in positions]
            batch, alive, errors = featurize_group(served.featurizer, groups, labels=False)
            for g, err in errors.items():
                outcomes[positions[g]] = err
            if batch is None:
                continue
            group = uuid.uuid4().hex if keep else None
            scored = answers(served, batch, group)
            if group is not None:
                keeps.append((m, group, batch, served.feedback_ttl))
            start = 0
            for g in alive:
                n = len(groups[g])
                outcomes[positions[g]] = scored[start : start + n]
                start += n
        if keeps:
            await self.backend.keep(keeps)
        return outcomes
