"""The learner base class and the served linear model.

A :class:`Learner` is the mutable thing a worker feeds batches to; a :class:`LinearModel` is
the immutable-by-convention snapshot a version holds and the API serves.

Why the base class is shaped this way: every algorithm differs only in its compiled update
kernel and in the arrays it keeps. So a subclass declares

- ``name`` / ``multiclass`` (its registry key) and, for the served probabilities, ``link``;
- ``_arrays``: the names of its numpy state arrays (``"w"`` …), allocated by
  :meth:`Learner._init_arrays` (zeros of shape ``(dim,)`` unless overridden);
- ``_int_slots`` / ``_float_slots``: names of extra integer / float scalars (a step counter,
  a scale, the bias …). They live in two small arrays, ``self._c`` (int64: ``examples_seen``,
  ``mistakes``, ``updates``, then the int slots) and ``self._f`` (float64: ``max_norm``, then
  the float slots), which the kernel receives and updates in place — so counters are kept by
  compiled code, not per-example Python. Kernels index them by name: :data:`SEEN`,
  :data:`MISTAKES`, :data:`UPDATES`, :data:`MAX_NORM`, and ``B, SCALE = float_slots("b",
  "scale")`` for a learner's own (the same tuple the class declares);
- ``_learn(batch, out, margins)``: call the kernel over the whole batch, filling ``out[i]``
  with the mistake flag of row ``i`` and ``margins[i]`` with its served margin (a float, or
  the K scores of a multi-class learner) — both decided in the same compiled pass, from the
  weights as served just before the row is learned;
- ``_served()``: the served weights ``(W, b)`` (views are fine; :meth:`serving` copies), and
  optionally ``decision`` when the served margins can be read without forming ``W``.

Everything else — validation of the batch, counters, ``get_state``/``set_state`` (exact, by
construction: the state *is* the arrays and the slots), ``params`` (the ``__init__``
keyword arguments, read back by name as in River and scikit-learn, plus ``thick``, the
train-on-or-near-errors option every binary kernel takes — :meth:`Learner.set_thick`),
``repr`` and ``serving()`` — is done here once.

>>> from service.learning.registry import make_learner
>>> p = make_learner("perceptron", 2)
>>> flags, margins = p.learn_scored(Batch.from_rows([([0], [1.0]), ([0], [2.0])], [1, 1]))
>>> flags.tolist(), margins.tolist()   # served 0 (a mistake), then 1·2 + 1
([True, False], [0.0, 3.0])
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from service.errors import InvalidSpec
from service.learning._kernels import csr_margins, csr_margins_multi
from service.learning.batch import Batch

State = dict[str, Any]

_COUNTERS = ("examples_seen", "mistakes", "updates")

#: Positions in ``Learner._c`` (int64) that every kernel updates: examples seen, mistakes,
#: updates; a learner's own int slots follow from :data:`FIRST_INT_SLOT`.
SEEN, MISTAKES, UPDATES = 0, 1, 2
FIRST_INT_SLOT = len(_COUNTERS)
#: Position in ``Learner._f`` (float64) of R = max ‖x‖; a learner's float slots follow.
MAX_NORM = 0
FIRST_FLOAT_SLOT = 1


def int_slots(*names: str) -> tuple[int, ...]:
    """Indices in ``_c`` of a learner's ``_int_slots`` = ``names`` (kernels name them once:
    ``RUN, POCKET_RUN = int_slots(*_INTS)``)."""
    return tuple(range(FIRST_INT_SLOT, FIRST_INT_SLOT + len(names)))


def float_slots(*names: str) -> tuple[int, ...]:
    """Indices in ``_f`` of a learner's ``_float_slots`` = ``names``."""
    return tuple(range(FIRST_FLOAT_SLOT, FIRST_FLOAT_SLOT + len(names)))


class InvalidParameter(InvalidSpec, ValueError):
    """A hyper-parameter is out of its domain. Also a ``ValueError``, so plain Python callers
    can catch it as such; ``field`` is ``"params.<name>"`` for the API's error body."""

    def __init__(self, name: str, message: str):
        super().__init__(message, field=f"params.{name}")


# --------------------------------------------------------------------------------------------
# Eager validation helpers: each returns the value, converted, or raises InvalidParameter
# with a message naming the field and the offending value ("C must be > 0, got 0").
# --------------------------------------------------------------------------------------------


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidParameter(name, f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidParameter(name, f"{name} must be finite, got {value!r}")
    return v


# The sane range of a positive hyper-parameter (C, learning rates, λ, penalties): smaller
# values are subnormal-ish noise (1e-320 makes every step vanish), larger ones overflow the
# weights within a few updates.
MIN_PARAM = 1e-12
MAX_PARAM = 1e12


def positive(name: str, value: Any) -> float:
    """A finite float > 0, within [MIN_PARAM, MAX_PARAM]."""
    v = _number(name, value)
    if v <= 0:
        raise InvalidParameter(name, f"{name} must be > 0, got {value!r}")
    if not MIN_PARAM <= v <= MAX_PARAM:
        raise InvalidParameter(
            name, f"{name} must be in [{MIN_PARAM:g}, {MAX_PARAM:g}], got {value!r}"
        )
    return v


def non_negative(name: str, value: Any) -> float:
    """A finite float ≥ 0: 0, or within [MIN_PARAM, MAX_PARAM]."""
    v = _number(name, value)
    if v < 0:
        raise InvalidParameter(name, f"{name} must be >= 0, got {value!r}")
    if v != 0 and not MIN_PARAM <= v <= MAX_PARAM:
        raise InvalidParameter(
            name, f"{name} must be 0 or in [{MIN_PARAM:g}, {MAX_PARAM:g}], got {value!r}"
        )
    return v


def boolean(name: str, value: Any) -> bool:
    """A real bool (not 0/1, not "yes")."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameter(name, f"{name} must be true or false, got {value!r}")
    return bool(value)


def one_of(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """One of a fixed set of values (compared with ``==``, type-checked)."""
    for c in choices:
        if type(value) is type(c) and value == c:
            return c
    raise InvalidParameter(name, f"{name} must be one of {list(choices)!r}, got {value!r}")


def _check_dim(dim: Any) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise InvalidSpec(f"dim must be an integer >= 1, got {dim!r}", field="dim")
    return int(dim)


# --------------------------------------------------------------------------------------------
# The served model
# --------------------------------------------------------------------------------------------


def _sigmoid(s: np.ndarray) -> np.ndarray:
    """A sigmoid that never overflows (exp of a non-positive number only)."""
    e = np.exp(-np.abs(s))
    return np.where(s >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


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
        return np.argmax(s, axis=1).astype(np.int32)

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


# --------------------------------------------------------------------------------------------
# The learner base class
# --------------------------------------------------------------------------------------------


class Learner:
    """Base of every algorithm; see the module docstring for what a subclass supplies.

    Hyper-parameters are exactly the keyword arguments of the subclass's ``__init__`` after
    ``dim`` and ``n_classes``, stored under the same names; :attr:`params` reads them back.
    """

    name: ClassVar[str] = ""
    multiclass: ClassVar[bool] = False
    link: str = "sigmoid"  # per class, or per instance when a parameter decides it
    _arrays: ClassVar[tuple[str, ...]] = ("w",)
    _int_slots: ClassVar[tuple[str, ...]] = ()
    _float_slots: ClassVar[tuple[str, ...]] = ()

    def __init__(self, dim: int, n_classes: int = 2):
        self.dim = _check_dim(dim)
        if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer):
            raise InvalidSpec(f"n_classes must be an integer, got {n_classes!r}", field="classes")
        if self.multiclass and n_classes < 2:
            raise InvalidSpec(f"n_classes must be >= 2, got {n_classes}", field="classes")
        if not self.multiclass and n_classes != 2:
            raise InvalidSpec(
                f"{self.name or type(self).__name__} is binary: n_classes must be 2, got {n_classes}",
                field="classes",
            )
        self.n_classes = int(n_classes)
        self._c = np.zeros(len(_COUNTERS) + len(self._int_slots), dtype=np.int64)
        self._f = np.zeros(1 + len(self._float_slots), dtype=np.float64)
        for key, arr in self._init_arrays().items():
            setattr(self, key, arr)

    # ---- hooks for subclasses ----------------------------------------------------------------

    def _init_arrays(self) -> dict[str, np.ndarray]:
        """The state arrays at the start, by name (default: zeros of shape (dim,))."""
        return {key: np.zeros(self.dim, dtype=np.float64) for key in self._arrays}

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        """Run the compiled kernel over the whole batch, updating state and counters in place,
        setting ``out[i]`` when row ``i`` was a mistake and ``margins[i]`` to its served
        margin (shape (n,) binary, (n, K) multi-class; C-contiguous float64)."""
        raise NotImplementedError

    def _served(self) -> tuple[np.ndarray, np.ndarray | float]:
        """The served weights ``(W, b)``; may be views of the state (callers copy)."""
        raise NotImplementedError

    _thick: tuple[float, int] = (math.inf, 1)
    thick: dict[str, Any] | None = None

    def _thick_args(self) -> tuple[float, int]:
        """``(thick, repeats)`` for a binary kernel: learn a row while ``y·s ≤ thick``, up to
        ``repeats`` times (``(inf, 1)``: every row once)."""
        return self._thick

    #: Whether this learner takes the ``thick`` option (every binary learner whose kernel
    #: reads ``_thick_args``; not the multi-class forms, not the ensemble).
    supports_thick: ClassVar[bool] = True

    def set_thick(self, thick: Any) -> None:
        """Train only on or near errors: the ``thick`` hyper-parameter, validated.

        ``{"margin": m, "repeats": r}`` (m ≥ 0 finite, r an integer in 1..100, default 1), a
        JSON string of it (from a command line), or None (off). After serving row i with
        margin s, the row is learned only if ``y·s ≤ m`` — the served score is wrong or
        within m of the threshold — and learned again, s read anew, while that still holds
        and the step still moves the weights, up to r times in all. A row outside is not
        learned at all (it is still seen; its mistake is counted against s as always).
        """
        name = "thick"
        if isinstance(thick, str):
            try:
                thick = json.loads(thick)
            except ValueError:
                raise InvalidParameter(
                    name, f'thick must be {{"margin": m, "repeats": r}} or null, got {thick!r}'
                ) from None
        if thick is None:
            self.thick, self._thick = None, (math.inf, 1)
            return
        if self.multiclass or not self.supports_thick:
            raise InvalidParameter(
                name, f"thick applies to binary single learners, not {self.name or 'this'}"
            )
        if not isinstance(thick, Mapping) or not set(thick) <= {"margin", "repeats"}:
            raise InvalidParameter(
                name, f'thick must be {{"margin": m, "repeats": r}} or null, got {thick!r}'
            )
        if "margin" not in thick:
            raise InvalidParameter(name, f"thick needs a margin, got {dict(thick)!r}")
        margin = non_negative("thick.margin", thick["margin"])
        repeats = thick.get("repeats", 1)
        if (
            isinstance(repeats, bool)
            or not isinstance(repeats, int | np.integer)
            or not (1 <= repeats <= 100)
        ):
            raise InvalidParameter(
                name, f"thick.repeats must be an integer in 1..100, got {repeats!r}"
            )
        self.thick = {"margin": margin, "repeats": int(repeats)}
        self._thick = (margin, int(repeats))

    # ---- slots: named scalars kept in the arrays the kernels update ---------------------------

    def _islot(self, key: str) -> int:
        return FIRST_INT_SLOT + self._int_slots.index(key)

    def _fslot(self, key: str) -> int:
        return FIRST_FLOAT_SLOT + self._float_slots.index(key)

    # ---- counters ------------------------------------------------------------------------------

    @property
    def examples_seen(self) -> int:
        return int(self._c[SEEN])

    @property
    def mistakes(self) -> int:
        return int(self._c[MISTAKES])

    @property
    def updates(self) -> int:
        return int(self._c[UPDATES])

    @property
    def max_norm(self) -> float:
        """R, the largest ‖x‖ seen so far."""
        return float(self._f[MAX_NORM])

    def counters(self) -> dict[str, int | float]:
        return {
            "examples_seen": self.examples_seen,
            "mistakes": self.mistakes,
            "updates": self.updates,
            "max_norm": self.max_norm,
        }

    # ---- learning and serving --------------------------------------------------------------------

    def _check_batch(self, batch: Batch, *, labels: bool) -> None:
        _check_indices(batch, self.dim)
        if labels and batch.n:
            y = batch.y
            if int(y.min()) < 0 or int(y.max()) >= self.n_classes:
                i = int(np.flatnonzero((y < 0) | (y >= self.n_classes))[0])
                raise ValueError(
                    f"label must be a class index in [0, {self.n_classes}), got y[{i}] = {int(y[i])}"
                )

    def margins_shape(self, n: int) -> tuple[int, ...]:
        """The shape of the served margins of ``n`` rows: (n,) binary, (n, K) multi-class."""
        return (n, self.n_classes) if self.multiclass else (n,)

    def learn(self, batch: Batch, *, margins: np.ndarray | None = None) -> np.ndarray:
        """Progressive learning: for each row in order, predict as served, then learn.

        Returns the mistake flags (bool, shape (n,)). The batch is not modified. When
        ``margins`` is given (float64, shape (n,) binary or (n, K) multi-class) it is filled
        with each row's served margin just before that row is learned — by the kernel, in
        the pass that decides the mistake (row ``i`` is a mistake exactly when the label
        predicted from ``margins[i]`` differs from ``y[i]``).
        """
        self._check_batch(batch, labels=True)
        shape = self.margins_shape(batch.n)
        if margins is not None and (
            not isinstance(margins, np.ndarray)
            or margins.dtype != np.float64
            or margins.shape != shape
            or not margins.flags.c_contiguous
            or not margins.flags.writeable
        ):
            got = (
                f"{margins.dtype} {margins.shape}" if isinstance(margins, np.ndarray)
                else type(margins).__name__
            )  # fmt: skip
            raise ValueError(
                f"margins must be a writable C-contiguous float64 array of shape {shape}, got {got}"
            )
        out = np.zeros(batch.n, dtype=np.bool_)
        if batch.n:
            self._learn(_normalised(batch), out, np.empty(shape) if margins is None else margins)
        return out

    def learn_scored(self, batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        """``(mistakes, margins)``: :meth:`learn` with the served margins of every row."""
        margins = np.empty(self.margins_shape(batch.n), dtype=np.float64)
        return self.learn(batch, margins=margins), margins

    def member_metrics(self) -> list[dict[str, Any]] | None:
        """Per-member progressive metrics of a combined learner (``ensemble``); None for a
        single learner."""
        return None

    def decision(self, batch: Batch) -> np.ndarray:
        """Served margins: shape (n,) binary, (n, K) multi-class."""
        W, b = self._served()
        return LinearModel(W, b, self.link).margins(batch)

    def serving(self) -> LinearModel:
        """A snapshot (a copy) of the served weights."""
        W, b = self._served()
        b_copy = float(b) if np.ndim(b) == 0 else np.array(b, dtype=np.float64)
        return LinearModel(np.array(W, dtype=np.float64), b_copy, self.link)

    # ---- state -----------------------------------------------------------------------------------

    def get_state(self, *, copy: bool = True) -> State:
        """Everything needed to continue exactly: counters, scalar slots and copies of arrays
        (with ``copy=False`` the arrays themselves, for a caller that only reads them now)."""
        state: State = {key: int(self._c[i]) for i, key in enumerate(_COUNTERS)}
        state["max_norm"] = float(self._f[MAX_NORM])
        for key in self._int_slots:
            state[key] = int(self._c[self._islot(key)])
        for key in self._float_slots:
            state[key] = float(self._f[self._fslot(key)])
        for key in self._arrays:
            state[key] = getattr(self, key).copy() if copy else getattr(self, key)
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Load a state from :meth:`get_state` (of a learner with the same dim and classes).

        Checked first, applied after, so a bad state leaves the learner untouched.
        """
        expected = {*_COUNTERS, "max_norm", *self._int_slots, *self._float_slots, *self._arrays}
        if set(state) != expected:
            missing, extra = expected - set(state), set(state) - expected
            raise ValueError(
                f"state keys differ: missing {sorted(missing)}, unexpected {sorted(extra)}"
            )
        arrays = {}
        for key in self._arrays:
            cur = getattr(self, key)
            arr = np.array(state[key], dtype=cur.dtype)
            if arr.shape != cur.shape:
                raise ValueError(f"state[{key!r}] must have shape {cur.shape}, got {arr.shape}")
            arrays[key] = arr
        c = np.array(
            [int(state[k]) for k in _COUNTERS] + [int(state[k]) for k in self._int_slots],
            dtype=np.int64,
        )
        f = np.array(
            [float(state["max_norm"])] + [float(state[k]) for k in self._float_slots],
            dtype=np.float64,
        )
        self._c, self._f = c, f
        for key, arr in arrays.items():
            setattr(self, key, arr)

    # ---- hyper-parameters ------------------------------------------------------------------------

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The hyper-parameter names: ``__init__``'s arguments after ``dim`` and ``n_classes``."""
        sig = inspect.signature(cls.__init__)
        return tuple(p for p in sig.parameters if p not in ("self", "dim", "n_classes"))

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        sig = inspect.signature(cls.__init__)
        return {k: sig.parameters[k].default for k in cls.param_names()}

    @property
    def params(self) -> dict[str, Any]:
        """The ``__init__`` hyper-parameters, plus ``thick`` when it is set."""
        out = {k: getattr(self, k) for k in self.param_names()}
        if self.thick is not None:
            out["thick"] = dict(self.thick)
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        head = f"dim={self.dim}" + (f", n_classes={self.n_classes}" if self.multiclass else "")
        return f"{type(self).__name__}({head}{', ' if args else ''}{args})"


def _normalised(batch: Batch) -> Batch:
    """The batch with arrays in the kernels' dtypes (a no-op for batches built by Batch)."""
    indptr, indices, data = _as_csr(batch)
    y = np.ascontiguousarray(batch.y, dtype=np.int32)
    if indptr is batch.indptr and indices is batch.indices and data is batch.data and y is batch.y:
        return batch
    return Batch(indptr, indices, data, y)


__all__ = [
    "FIRST_FLOAT_SLOT",
    "FIRST_INT_SLOT",
    "MAX_NORM",
    "MISTAKES",
    "SEEN",
    "UPDATES",
    "InvalidParameter",
    "Learner",
    "LinearModel",
    "State",
    "boolean",
    "float_slots",
    "int_slots",
    "non_negative",
    "one_of",
    "positive",
]
