"""Building a learner from a stored spec dict, and encoding what a commit writes.

The spec dict is what ``ModelSpec.to_dict()`` wrote; ``ModelSpec.from_dict`` re-validates it
and builds the learner, so the worker and the API agree on every default.

Sparse commits (docs/pipeline.md, "Redis layout"): a commit writes only the feature rows
that changed since the last one. The worker knows which rows a batch *touched* (its
``indices``); that is exactly the set of rows that changed for the algorithms of
:data:`STATE_LOCAL` — their kernels write the weights of the example's features and scalar
slots, nothing else (no O(dim) rescaling, no pocket copy). Their served weights are local
too for :data:`SERVING_LOCAL` (the averaged perceptron's average ``w − u/T`` moves every
non-zero row with ``T``). Other algorithms write full (sparse: non-zero rows only) blobs.
``tests/workers/test_sparse_commit.py`` checks both tables against the kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from service.learning.linear import Learner
from service.learning.spec import ModelSpec
from service.store.codec import StateValue, feature_axes

# Algorithms (binary and multi-class forms alike) whose learning changes only the rows of
# the features of the examples learned (plus scalars and per-class arrays).
STATE_LOCAL = frozenset(
    {"adagrad", "perceptron", "pa", "pa1", "pa2", "mira", "averaged_perceptron"}
)
# ... and whose served weights change only at those rows too.
SERVING_LOCAL = frozenset({"adagrad", "perceptron", "pa", "pa1", "pa2", "mira"})


def state_view(learner: Any) -> dict[str, StateValue]:
    """The learner's state with its arrays *not* copied (encode it before learning more)."""
    state: dict[str, StateValue] = learner.get_state(copy=False)
    return state


def serving_view(learner: Any) -> dict[str, StateValue]:
    """The served weights as ``LinearModel.get_state()`` lays them out, without copying W
    where the learner serves a view of its state (``_served`` is the documented hook)."""
    W, b = learner._served()
    bias: StateValue = float(b) if np.ndim(b) == 0 else np.array(b, dtype=np.float64)
    return {"W": np.asarray(W, dtype=np.float64), "b": bias, "link": learner.link}


def axes_of(learner: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Feature axes of the learner's state and of its served weights (``codec.feature_axes``)."""
    mc = bool(learner.multiclass)
    return (
        feature_axes(state_view(learner), learner.dim, mc),
        feature_axes(serving_view(learner), learner.dim, mc),
    )


def build_learner(spec: Mapping[str, Any]) -> Learner:
    """A fresh learner for a stored spec dict (:class:`InvalidSpec` if it cannot be built)."""
    return ModelSpec.from_dict(dict(spec)).build_learner()
