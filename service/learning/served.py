"""The served model: :class:`LinearModel`, the weights a version holds and the API scores
with, and the two batch checks every compiled scoring or learning call makes first
(``_as_csr``: the kernels' dtypes; ``_check_indices``: every index below ``dim``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from service.learning._kernels import csr_margins, csr_margins_multi
from service.learning.batch import Batch

State = dict[str, Any]


def _sigmoid(s: np.ndarray) -> np.ndarray:
    """A sigmoid that never overflows (exp of a non-positive number only)."""
    e = np.exp(-np.abs(s))
    p: np.ndarray = np.where(s >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return p


def _softmax(S: np.ndarray) -> np.ndarray:
    """Row-wise softmax with the max subtracted first, so huge logits cannot overflow.

    ``S − max`` may still overflow to −inf for logits of opposite signs near the float
    limit (exp then gives the right 0); a row with +inf logits shares the mass among them.
    """
    top = S.max(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        E = np.exp(S - top)
    infinite = np.isposinf(top[:, 0])
    if infinite.any():
        E[infinite] = np.isposinf(S[infinite]).astype(np.float64)
    out: np.ndarray = E / E.sum(axis=1, keepdims=True)
    return out


def _as_csr(batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch's arrays in the exact dtypes the kernels were compiled for (no copy if so)."""
    return (
        np.ascontiguousarray(batch.indptr, dtype=np.int64),
        np.ascontiguousarray(batch.indices, dtype=np.int32),
        np.ascontiguousarray(batch.data, dtype=np.float64),
    )


def _check_indices(batch: Batch, dim: int) -> None:
    """Every index in [0, dim): the kernels do not bounds-check, so this guards memory.

    One pass: viewed as uint32, a negative index is huge, so ``max`` alone decides.
    """
    if batch.nnz == 0:
        return
    indices = np.ascontiguousarray(batch.indices, dtype=np.int32)
    if int(indices.view(np.uint32).max()) >= dim:
        bad = indices[(indices < 0) | (indices >= dim)][0]
        raise ValueError(f"feature index must be in [0, {dim}), got {int(bad)}")


class LinearModel:
    """Weights ready to serve: ``W`` (dim,) and a float ``b`` (binary), or ``W`` (K, dim) and
    ``b`` (K,) (multi-class).

    ``link`` says how margins become probabilities: ``"sigmoid"`` (probability-like, from a
    margin-based learner, not calibrated), ``"calibrated-sigmoid"`` (the model's own
    probability, e.g. logistic regression) or ``"softmax"`` (multi-class).

    >>> m = LinearModel(np.array([1.0, -2.0, 0.0]), 0.5)
    >>> b = Batch.from_rows([([0], [1.0]), ([1], [1.0])], [-1, -1])
    >>> m.margins(b).tolist(), m.predict(b).tolist()
    ([1.5, -1.5], [1, 0])
    >>> [round(p, 4) for p in m.proba(b).tolist()]
    [0.8176, 0.1824]
    """

    __slots__ = ("W", "b", "link")

    def __init__(self, W: np.ndarray, b: np.ndarray | float, link: str = "sigmoid"):
        W = np.ascontiguousarray(W, dtype=np.float64)
        if W.ndim == 1:
            self.b: np.ndarray | float = float(b)
        elif W.ndim == 2:
            self.b = np.asarray(b, dtype=np.float64).reshape(W.shape[0])
        else:
            raise ValueError(f"W must be 1-d or 2-d, got shape {W.shape}")
        self.W = W
        self.link = link

    @property
    def multiclass(self) -> bool:
        return bool(self.W.ndim == 2)

    @property
    def dim(self) -> int:
        return int(self.W.shape[-1])

    def margins(self, batch: Batch) -> np.ndarray:
        """``s = W·x + b``: shape (n,) binary, (n, K) multi-class."""
        _check_indices(batch, self.dim)
        indptr, indices, data = _as_csr(batch)
        if self.W.ndim == 1:
            return csr_margins(indptr, indices, data, self.W, float(self.b))
        return csr_margins_multi(indptr, indices, data, self.W, np.asarray(self.b))

    def predict(self, batch: Batch) -> np.ndarray:
        """Class indices: binary 1 iff s > 0 (a tie goes to the negative class); else argmax."""
        s = self.margins(batch)
        if s.ndim == 1:
            return (s > 0).astype(np.int32)
        best: np.ndarray = np.argmax(s, axis=1).astype(np.int32)
        return best

    def proba(self, batch: Batch) -> np.ndarray:
        """P(positive) of shape (n,) binary, or class probabilities (n, K) multi-class."""
        s = self.margins(batch)
        if s.ndim == 1:
            return _sigmoid(s)
        return _softmax(s)

    def scored(self, batch: Batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(margins, classes, proba)`` from one pass over the batch (what :meth:`margins`,
        :meth:`predict` and :meth:`proba` give)."""
        s = self.margins(batch)
        if s.ndim == 1:
            return s, (s > 0).astype(np.int32), _sigmoid(s)
        return s, np.argmax(s, axis=1).astype(np.int32), _softmax(s)

    def get_state(self) -> State:
        return {"W": self.W.copy(), "b": self.b if isinstance(self.b, float) else self.b.copy(),
                "link": self.link}  # fmt: skip

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LinearModel:
        return cls(np.array(state["W"], dtype=np.float64), state["b"], str(state["link"]))

    def __repr__(self) -> str:
        return f"LinearModel(shape={self.W.shape}, link={self.link!r})"


__all__ = ["LinearModel", "State"]
