"""Helpers of the worker tests: canonical specs, synthetic batches, the reference run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from service.learning.features import Batch
from service.learning.quality import QualityTracker
from service.learning.spec import ModelSpec
from service.store import Store
from tests.store.pipeline_support import random_sizes, split, synthetic


def spec(algorithm: str = "pa1", bits: int = 12, **params: Any) -> dict[str, Any]:
    """The canonical spec dict, as the API stores it."""
    return ModelSpec.from_dict({"algorithm": algorithm, "bits": bits, "params": params}).to_dict()


def batches(
    n: int, seed: int, dim: int = 2**12, nnz: int = 20, lo: int = 50, hi: int = 400
) -> list[Batch]:
    """``n`` synthetic examples cut into batches of random sizes."""
    rng = np.random.default_rng(seed + 1000)
    return split(synthetic(n, dim, nnz, seed), random_sizes(rng, n, lo, hi))


def reference(
    spec_dict: Mapping[str, Any], stream: Sequence[Batch], state: Mapping[str, Any] | None = None
) -> Any:
    """One uninterrupted in-process learner over ``stream`` (optionally from ``state``)."""
    learner = ModelSpec.from_dict(dict(spec_dict)).build_learner()
    if state is not None:
        learner.set_state(state)
    for b in stream:
        learner.learn(b)
    return learner


def reference_quality(stream: Sequence[Batch], spec_dict: Mapping[str, Any]) -> Any:
    """The quality tracker of one uninterrupted in-process run over ``stream``."""
    learner = ModelSpec.from_dict(dict(spec_dict)).build_learner()
    tracker = QualityTracker()
    for b in stream:
        _, margins = learner.learn_scored(b)
        tracker.update(margins, b.y, learner.link)
    return tracker


async def append_all(store: Store, m: str, stream: Sequence[Batch], chunk: int = 20) -> None:
    for i in range(0, len(stream), chunk):
        await store.append_many(m, [(b, None) for b in stream[i : i + chunk]])


def assert_same(actual: Mapping[str, Any], expected: Mapping[str, Any], what: str) -> None:
    """Bit-identical states (arrays by bytes, scalars by value)."""
    assert set(actual) == set(expected), f"{what}: keys {sorted(set(actual) ^ set(expected))}"
    for key, want in expected.items():
        got = actual[key]
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {key}"
            assert got.tobytes() == want.tobytes(), f"{what}: {key} differs"
        else:
            assert got == want, f"{what}: {key} = {got!r}, want {want!r}"
