"""Offline progressive validation: ``streamlearn evaluate FILE``.

Every example is first predicted by the model *as served*, then learned from, in file order
(or in the order of an ``--order`` file of ids). This is exactly what the service does to a
stream, so the figures here are the figures the dashboard would show.

- **mistakes / updates** come from the learners' own counters (defined in docs/algorithms.md);
- **ROC AUC** (binary) is computed from the *progressive* margins — the served margin of
  each example just before it is learned — with rank statistics (ties get average ranks);
  ``1 − AUC`` in percent is the TREC spam track's (1−ROCA)% figure;
- **log loss, rolling AUC, rolling log loss** (binary) come from the same
  :class:`~service.learning.quality.QualityTracker` the worker feeds, over the same served
  margins — so they equal the live ``GET /models/{m}/metrics`` figures for the same stream,
  to the bit. The live ``auc`` is kept in a histogram: it is within ``auc_error_bound`` (also
  reported here) of the exact ``auc`` printed here;
- **members** (an ``ensemble``): each member's weight, mistakes and log loss;
- **learn_seconds** is the time inside the learning loops only; **seconds** is the whole run
  (reading, featurizing, learning, scoring).

Learning goes in chunks (``chunk`` examples per ``learn`` call, identical to one at a time).
The served margins come from the learning kernels themselves (``Learner.learn(batch,
margins=...)``: the margin of each row as served just before it is learned, written in the
pass that decides its mistake), so the AUC costs only the final rank sort; ``auc=False``
skips keeping them.

Readers: NDJSON (``{"features": ..., "text": ..., "label": ..., "id": ...}`` per line, through
the model's :class:`~service.learning.features.Featurizer`) and svmlight (``LABEL idx:val``,
indices as given, parsed by :mod:`service.cli.svmlight`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from service.cli.datasets import FORMATS, guess_format, open_binary, read_order
from service.cli.svmlight import Parsed, read_svmlight_file
from service.errors import InvalidExample, StreamlearnError
from service.learning.batch import Batch
from service.learning.features import ALLOWED_KEYS
from service.learning.labels import Labels
from service.learning.linear import Learner
from service.learning.quality import WINDOW, QualityTracker, roc_auc
from service.learning.spec import ModelSpec

Progress = Callable[[int], None]
"""Called with the number of examples just processed (for a progress bar)."""


class EvaluationError(StreamlearnError):
    """The file cannot be evaluated (bad line, unknown label, missing id, bad option)."""

    code = "evaluation_error"


@dataclass
class Report:
    """What ``streamlearn evaluate`` prints (``--json``: this, as one JSON object)."""

    file: str
    format: str
    algorithm: str
    params: dict[str, Any]
    n_classes: int
    dim: int
    examples: int
    mistakes: int
    updates: int
    mistake_rate: float
    auc: float | None
    one_minus_auc_percent: float | None
    auc_error_bound: float | None  # of the live (histogram) AUC, see QualityTracker
    rolling_auc: float | None  # over the last ``window`` examples
    log_loss: float | None  # of the served score σ(margin), p clipped to [1e-15, 1 − 1e-15]
    rolling_log_loss: float | None
    window: int
    seconds: float
    learn_seconds: float
    examples_per_s: float
    dropped_keys: dict[str, int] = field(default_factory=dict)
    """Unknown keys dropped from NDJSON lines (a file's own metadata): name → lines."""
    members: list[dict[str, Any]] | None = None
    """Per member of an ``ensemble`` (``Learner.member_metrics()``): algorithm, params, weight,
    examples_seen, mistakes, updates, log_loss, mean_log_loss; None for a single learner."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# the progressive loop
# ----------------------------------------------------------------------------------------------


def _view(batch: Batch, start: int, stop: int) -> Batch:
    """Rows ``start:stop`` sharing the batch's index and value arrays (only indptr is new)."""
    lo, hi = int(batch.indptr[start]), int(batch.indptr[stop])
    return Batch(
        batch.indptr[start : stop + 1] - lo,
        batch.indices[lo:hi],
        batch.data[lo:hi],
        batch.y[start:stop],
    )


def learn_progressive(
    learner: Learner, batch: Batch, *, margins: np.ndarray | None = None, chunk: int = 10_000
) -> tuple[np.ndarray, float]:
    """Predict-then-learn over ``batch``; returns (mistake flags, seconds spent learning).

    With ``margins`` (float64, shape (n,) binary or (n, K) multi-class), each row's served
    margin is written there, by the kernels, as the row is learned.
    """
    flags = np.zeros(batch.n, dtype=bool)
    spent = 0.0
    for start in range(0, batch.n, chunk):
        stop = min(start + chunk, batch.n)
        part = batch if (start, stop) == (0, batch.n) else _view(batch, start, stop)
        t0 = time.perf_counter()
        flags[start:stop] = learner.learn(
            part, margins=None if margins is None else margins[start:stop]
        )
        spent += time.perf_counter() - t0
    return flags, spent


# ----------------------------------------------------------------------------------------------
# readers
# ----------------------------------------------------------------------------------------------


def known_keys(ex: dict[str, Any], dropped: Counter[str] | None) -> dict[str, Any]:
    """``ex`` without the keys an example does not have (counted in ``dropped``).

    >>> seen = Counter()
    >>> known_keys({"text": "hi", "label": 1, "source": "x", "meta": {}}, seen), dict(seen)
    ({'text': 'hi', 'label': 1, 'meta': {}}, {'source': 1})
    """
    if ex.keys() <= ALLOWED_KEYS:
        return ex
    if dropped is not None:
        dropped.update(str(k) for k in ex.keys() - ALLOWED_KEYS)
    return {k: v for k, v in ex.items() if k in ALLOWED_KEYS}


def read_ndjson(
    path: Path, order: Sequence[str] | None = None, dropped: Counter[str] | None = None
) -> list[dict[str, Any]]:
    """Every example of an NDJSON file (blank lines skipped), optionally in ``order`` of ids;
    unknown keys are dropped (and counted in ``dropped``)."""
    examples = [ex for group in iter_ndjson(path, 1 << 16, dropped) for ex in group]
    if order is None:
        return examples
    by_id: dict[str, dict[str, Any]] = {}
    for ex in examples:
        if "id" in ex:
            by_id[str(ex["id"])] = ex
    missing = [i for i in order if i not in by_id]
    if missing:
        raise EvaluationError(
            f"--order names {len(missing)} id(s) not in {path}, e.g. {missing[0]!r}"
        )
    return [by_id[i] for i in order]


def iter_ndjson(
    path: Path, chunk: int, dropped: Counter[str] | None = None
) -> Iterator[list[dict[str, Any]]]:
    """The examples of an NDJSON file in lists of ``chunk`` (blank lines skipped), streamed;
    unknown keys are dropped (and counted in ``dropped``)."""
    group: list[dict[str, Any]] = []
    with open_binary(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                ex = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise EvaluationError(f"{path}:{lineno}: not JSON ({e})") from e
            if not isinstance(ex, dict):
                raise EvaluationError(f"{path}:{lineno}: an example must be a JSON object")
            group.append(known_keys(ex, dropped))
            if len(group) == chunk:
                yield group
                group = []
    if group:
        yield group


def _chunked(items: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def svmlight_labels(parsed: Parsed, labels: Labels) -> np.ndarray:
    """Class indices of the parsed labels: numbers (−1/+1/0/1 or declared integer classes)
    map through :class:`Labels`, names (``ham``/``spam``) too; each distinct label once."""
    if parsed.label_values is not None:
        values = parsed.label_values
        uniq, inverse = np.unique(values, return_inverse=True)
        mapped = np.empty(uniq.size, dtype=np.int32)
        for k, u in enumerate(uniq.tolist()):
            value: Any = int(u) if float(u).is_integer() else u
            try:
                mapped[k] = labels.index(value)
            except ValueError:
                # a declared class spelled like a number ("1") but declared as a string
                try:
                    mapped[k] = labels.index(_number_text(u))
                except ValueError:
                    row = int(np.argmax(values == u))
                    raise EvaluationError(
                        f"svmlight line {int(parsed.lines[row]) + 1}: label {value!r} is not "
                        "one of the classes (give them with --classes)"
                    ) from None
        return mapped[inverse].astype(np.int32)
    assert parsed.labels is not None
    cache: dict[bytes, int] = {}
    out = np.empty(len(parsed.labels), dtype=np.int32)
    for i, token in enumerate(parsed.labels):
        found: int | None = cache.get(token)
        if found is None:
            text = token.decode("utf-8", "replace")
            try:
                found = labels.index(text)
            except ValueError:
                try:
                    found = labels.index(int(text))
                except ValueError:
                    raise EvaluationError(
                        f"svmlight line {int(parsed.lines[i]) + 1}: label {text!r} is not one "
                        "of the classes (give them with --classes)"
                    ) from None
            cache[token] = found
        out[i] = found
    return out


def _number_text(u: float) -> str:
    return str(int(u)) if float(u).is_integer() else repr(u)


# ----------------------------------------------------------------------------------------------
# the command's work
# ----------------------------------------------------------------------------------------------


def build_spec(
    *,
    algorithm: str | None,
    params: Mapping[str, Any],
    bits: int | None,
    hashing: bool,
    dim: int | None,
    classes: Sequence[Any] | None,
    normalize: bool,
    preset: str | None = None,
    text: Mapping[str, Any] | None = None,
    transform: str | None = None,
) -> ModelSpec:
    """The model spec an evaluation runs, from the command's options (InvalidSpec if bad)."""
    d: dict[str, Any] = {
        "params": {k: _literal(v) for k, v in params.items()},
        "hashing": hashing,
        "normalize": normalize,
    }
    if transform is not None:  # unset: the preset's (or "none")
        d["transform"] = transform
    if algorithm is not None:
        d["algorithm"] = algorithm
    if preset is not None:
        d["preset"] = preset
    if bits is not None:
        d["bits"] = bits
    if dim is not None:
        d["dim"] = dim
    if classes is not None:
        d["classes"] = list(classes)
    if text is not None:
        d["text"] = dict(text)
    if preset is None and algorithm is None:
        raise EvaluationError("give --algorithm NAME or --preset NAME")
    if preset is not None and not params:
        del d["params"]
    return ModelSpec.from_dict(d)


def _iter_chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(start + size, n)


def evaluate_file(
    path: Path,
    *,
    fmt: str | None = None,
    algorithm: str | None = None,
    params: Mapping[str, Any] | None = None,
    bits: int | None = None,
    hashing: bool = True,
    dim: int | None = None,
    classes: Sequence[Any] | None = None,
    normalize: bool = False,
    preset: str | None = None,
    text: Mapping[str, Any] | None = None,
    transform: str | None = None,
    order: Path | None = None,
    auc: bool = True,
    chunk: int = 10_000,
    progress: Progress | None = None,
) -> Report:
    """Progressive validation of one file; see the module docstring."""
    t_start = time.perf_counter()
    dropped: Counter[str] = Counter()
    if chunk < 1:
        raise EvaluationError(f"chunk must be >= 1, got {chunk}")
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise EvaluationError(f"--format must be ndjson or svmlight, got {fmt!r}")
    params = dict(params or {})
    if fmt == "svmlight":
        if order is not None:
            raise EvaluationError("--order needs ids: use an NDJSON file")
        if bits is not None or preset is not None or text is not None:
            raise EvaluationError(
                "svmlight indices are used as given: --bits, --preset and --text do not apply"
            )
        parsed = read_svmlight_file(path, normalize=normalize, transform=transform or "none")
        size = max(dim or 0, parsed.max_index + 1, 1)
        if dim is not None and parsed.max_index >= dim:
            raise EvaluationError(
                f"feature index {parsed.max_index} is out of range for --dim {dim}"
            )
        spec = build_spec(algorithm=algorithm, params=params, bits=None, hashing=False, dim=size,
                          classes=classes, normalize=normalize, transform=transform)  # fmt: skip
        y = svmlight_labels(parsed, Labels(spec.classes, spec.positive))
        batches: Iterator[Batch] = iter([Batch(parsed.indptr, parsed.indices, parsed.data, y)])
    else:
        spec = build_spec(algorithm=algorithm, params=params, bits=bits, hashing=hashing, dim=dim,
                          classes=classes, normalize=normalize, preset=preset, text=text,
                          transform=transform)  # fmt: skip
        # offline, the file is trusted: the API's limits on names and words do not apply
        featurizer = spec.featurizer(
            max_features=1 << 20, max_text_chars=1 << 26, max_name_chars=1 << 26,
            max_token_chars=1 << 26,
        )  # fmt: skip
        # in file order the file is streamed chunk by chunk; an --order needs it all first
        groups = (
            _chunked(read_ndjson(path, read_order(order), dropped), chunk)
            if order is not None
            else iter_ndjson(path, chunk, dropped)
        )

        def featurized() -> Iterator[Batch]:
            start = 0
            for group in groups:
                try:
                    yield featurizer.transform(group)
                except InvalidExample as e:
                    where = start + (e.index or 0)
                    what = "example" if order is not None else "example number"
                    hint = ""
                    if e.field == "label" and classes is None and "not one of" in e.message:
                        hint = (
                            "; name the file's classes with --classes, negative class first "
                            "(e.g. --classes ham,spam)"
                        )
                    raise EvaluationError(
                        f"{path}: {what} {where + 1}: {e.field}: {e.message}{hint}"
                    ) from e
                start += len(group)

        batches = featurized()
    learner = spec.build_learner()
    binary = spec.n_classes == 2
    want_auc = auc and binary
    tracker = QualityTracker() if want_auc else None
    flags_all: list[np.ndarray] = []
    margins_all: list[np.ndarray] = []
    labels_all: list[np.ndarray] = []
    learn_seconds = 0.0
    for batch in batches:
        for start, stop in _iter_chunks(batch.n, chunk):
            part = batch if (start, stop) == (0, batch.n) else _view(batch, start, stop)
            margins = np.empty(part.n) if want_auc else None
            flags, spent = learn_progressive(learner, part, margins=margins, chunk=chunk)
            learn_seconds += spent
            flags_all.append(flags)
            labels_all.append(part.y)
            if margins is not None:
                margins_all.append(margins)
            if tracker is not None and margins is not None:
                tracker.update(margins, part.y, learner.link)
            if progress is not None:
                progress(part.n)
    n = learner.examples_seen
    area = None
    if want_auc and n:
        area = roc_auc(np.concatenate(margins_all), np.concatenate(labels_all) == 1)
    seconds = time.perf_counter() - t_start
    quality = tracker.summary() if tracker is not None else {}
    return Report(
        file=str(path),
        format=fmt,
        algorithm=spec.algorithm,
        params=dict(spec.params),
        n_classes=spec.n_classes,
        dim=spec.dim,
        examples=n,
        mistakes=learner.mistakes,
        updates=learner.updates,
        mistake_rate=learner.mistakes / n if n else 0.0,
        auc=area,
        one_minus_auc_percent=None if area is None else 100.0 * (1.0 - area),
        auc_error_bound=quality.get("auc_error_bound"),
        rolling_auc=quality.get("rolling_auc"),
        log_loss=quality.get("log_loss"),
        rolling_log_loss=quality.get("rolling_log_loss"),
        window=WINDOW,
        seconds=seconds,
        learn_seconds=learn_seconds,
        examples_per_s=n / seconds if seconds > 0 else 0.0,
        dropped_keys=dict(sorted(dropped.items())),
        members=learner.member_metrics(),
    )


def _literal(value: Any) -> Any:
    """A command-line string as the JSON value it spells (``"0.5"`` → 0.5, ``"true"`` → True,
    ``"hinge"`` stays a string): a spec takes numbers as numbers, never as strings.

    >>> [_literal(v) for v in ("0.5", "3", "true", "False", "hinge", 2)]
    [0.5, 3, True, False, 'hinge', 2]
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return value


__all__ = [
    "EvaluationError",
    "Report",
    "build_spec",
    "evaluate_file",
    "learn_progressive",
    "read_ndjson",
    "roc_auc",
]
