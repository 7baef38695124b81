"""The ingest and predict paths after parsing: featurize, then one append or one scoring.

Every ingest and predict request goes through :class:`Batcher`. A small request (at most
:data:`SMALL` examples) is queued with the concurrent small requests of its model (the one
coalescer, :mod:`service.api.coalesce`): the group is featurized together (one vectorised
``transform``), appended together (one stream entry, atomically) or scored together (one
compiled call), and its kept features written together. A big request takes the same path
alone, featurized off the event loop. A bad example fails only its own request: the group is
re-featurized without it, and the error carries the index *within that request*.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from service.api.backend import Appended, Backend
from service.api.cache import Served
from service.api.coalesce import Coalescer
from service.api.compute import run_cpu
from service.errors import InvalidExample
from service.learning.batch import Batch
from service.learning.features import Featurizer
from service.learning.jsonpath import featurize_json

SMALL = 64  # requests with at most this many examples are micro-batched
FAST_BYTES = 16 * 1024  # JSON bodies from this size try the compiled reader first

IngestItem = tuple[Featurizer, list[Any], list[str | None], list[int] | None]
"""featurizer, examples, their ids, the rows to append (None: all; see first_occurrences)"""
PredictItem = tuple[Served, list[Any], bool]  # served, examples, keep features for feedback


def featurize_group(
    featurizer: Featurizer, groups: Sequence[list[Any]], *, labels: bool
) -> tuple[Batch | None, list[int], dict[int, BaseException]]:
    """Featurize the concatenation of ``groups``; drop (and report) groups with a bad example.

    Returns the batch of the surviving groups (None if none survive), their positions, and
    the errors by position.
    """
    alive = list(range(len(groups)))
    errors: dict[int, BaseException] = {}
    while alive:
        examples = groups[0] if len(groups) == 1 else [ex for g in alive for ex in groups[g]]
        try:
            return featurizer.transform(examples, labels=labels), alive, errors
        except InvalidExample as exc:
            if exc.index is None:
                raise
            if len(groups) == 1:  # one request: its error as it is
                errors[0] = exc
                return None, [], errors
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
    margins, classes, proba = served.model.scored(batch)  # one pass over the batch
    name = served.featurizer.label_name
    version = served.version
    names = [name(k) for k in range(served.featurizer.n_classes)]
    if margins.ndim == 2:
        rows = range(batch.n)
        margins, proba = margins[rows, classes], proba[rows, classes]
    out: list[dict[str, Any]] = []
    rows_out = zip(classes.tolist(), margins.tolist(), proba.tolist(), strict=True)
    for i, (k, m, p) in enumerate(rows_out):
        out.append(
            {
                "label": names[k],
                "score": min(1.0, max(0.0, p)),
                "margin": m,
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


def read_json(
    featurizer: Featurizer, raw: bytes, kind: str, *, labels: bool, max_batch: int
) -> tuple[Batch, list[str | None]] | None:
    """A big JSON batch parsed and featurized in one compiled pass (the batch and its ids),
    or None: then the body takes the general path (parse, then featurize), which also
    accepts or refuses it."""
    if kind != "json" or len(raw) < FAST_BYTES:
        return None
    return featurize_json(featurizer, raw, labels=labels, max_batch=max_batch)


def _settle(outcome: Any) -> Any:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


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
        self,
        m: str,
        featurizer: Featurizer,
        examples: list[Any],
        ids: list[str | None],
        size: int = 0,
    ) -> Appended:
        """Featurize and append (``size``: the body's bytes); the rows of this request not
        appended as duplicates (an id repeated within the request, or already seen by the
        store), and the entry the rest went into."""
        keep = first_occurrences(ids)
        repeated = 0 if keep is None else len(ids) - len(keep)
        item = (featurizer, examples, ids, keep)
        if len(examples) > SMALL:
            dropped, entry = _settle((await self._flush_ingest(m, [item], size))[0])
        else:
            q = self._ingest.get(m)
            if q is None:

                async def flush(items: list[IngestItem]) -> list[Appended | BaseException]:
                    return await self._flush_ingest(m, items)

                q = self._ingest[m] = Coalescer(flush)
            dropped, entry = await q.submit(item)
        return dropped + repeated, entry

    async def ingest_batch(self, m: str, batch: Batch, ids: list[str | None]) -> Appended:
        """Append a batch featurized already (:func:`read_json`): ids repeated within it are
        appended once; one entry."""
        keep = first_occurrences(ids)
        if keep is None:
            return await self.backend.append(m, batch, ids)
        dropped, entry = await self.backend.append(m, batch.take(keep), [ids[i] for i in keep])
        return dropped + len(ids) - len(keep), entry

    async def _flush_ingest(
        self, m: str, items: list[IngestItem], size: int = 0
    ) -> list[Appended | BaseException]:
        outcomes: list[Appended | BaseException] = [(0, None)] * len(items)
        by_featurizer: dict[int, list[int]] = {}
        for pos, item in enumerate(items):  # a re-created model brings a new featurizer
            by_featurizer.setdefault(id(item[0]), []).append(pos)
        for positions in by_featurizer.values():
            groups = [items[pos][1] for pos in positions]
            batch, alive, errors = await run_cpu(
                size, featurize_group, items[positions[0]][0], groups, labels=True
            )
            for g, err in errors.items():
                outcomes[positions[g]] = err
            if batch is None:
                continue
            rows: list[int] = []  # every example is checked; repeated ids are appended once
            ids: list[str | None] = []
            sizes: list[int] = []
            start = 0
            for g in alive:
                _, examples, group_ids, keep = items[positions[g]]
                kept = range(len(examples)) if keep is None else keep
                rows.extend(start + i for i in kept)
                ids.extend(group_ids if keep is None else [group_ids[i] for i in keep])
                sizes.append(len(kept))
                start += len(examples)
            if len(rows) < batch.n:
                batch = batch.take(rows)
            done = await self.backend.append_groups(m, batch, ids, sizes)  # one entry
            for g, outcome in zip(alive, done, strict=True):
                outcomes[positions[g]] = outcome
        return outcomes

    async def predict(
        self, m: str, served: Served, examples: list[Any], keep: bool = True, size: int = 0
    ) -> list[dict[str, Any]]:
        """One answer per example (``keep``: keep their features for feedback)."""
        if len(examples) > SMALL:
            return _settle((await self._flush_predict(m, [(served, examples, keep)], size))[0])
        q = self._predict.get(m)
        if q is None:

            async def flush(
                items: list[PredictItem],
            ) -> list[list[dict[str, Any]] | BaseException]:
                return await self._flush_predict(m, items)

            q = self._predict[m] = Coalescer(flush)
        return await q.submit((served, examples, keep))

    async def predict_batch(
        self, m: str, served: Served, batch: Batch, keep: bool
    ) -> list[dict[str, Any]]:
        """Answers for a batch featurized already (:func:`read_json`), features kept for
        feedback when ``keep``."""
        group = uuid.uuid4().hex if keep else None
        scored = answers(served, batch, group)
        if group is not None:
            await self.backend.keep([(m, group, batch, served.feedback_ttl)])
        return scored

    async def _flush_predict(
        self, m: str, items: list[PredictItem], size: int = 0
    ) -> list[list[dict[str, Any]] | BaseException]:
        outcomes: list[list[dict[str, Any]] | BaseException] = [[] for _ in items]
        by_served: dict[tuple[int, bool], list[int]] = {}
        for pos, (served, _, keep) in enumerate(items):  # a swap mid-queue: each's own model
            by_served.setdefault((id(served), keep), []).append(pos)
        keeps: list[tuple[str, str, Batch, int]] = []
        for (_, keep), positions in by_served.items():
            served = items[positions[0]][0]
            groups = [items[pos][1] for pos in positions]
            group = uuid.uuid4().hex if keep else None
            batch, alive, errors, scored = await run_cpu(size, _score, served, groups, group)
            for g, err in errors.items():
                outcomes[positions[g]] = err
            if batch is None:
                continue
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


def _score(
    served: Served, groups: list[list[Any]], group: str | None
) -> tuple[Batch | None, list[int], dict[int, BaseException], list[dict[str, Any]]]:
    batch, alive, errors = featurize_group(served.featurizer, groups, labels=False)
    return batch, alive, errors, [] if batch is None else answers(served, batch, group)
