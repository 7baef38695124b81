"""An ensemble of binary learners over the same features, mixed online by exponential
weights on their progressive log loss (Hedge / the exponentially weighted average
forecaster; Vovk 1990, Littlestone & Warmuth 1994, Cesa-Bianchi & Lugosi 2006 §2).

Every member learns every example, exactly as it would alone (its own served margin, its own
mistakes, its own thick threshold if it has one). The ensemble serves, for row t,

    s_t = Σ_m α_{t,m}·s_{t,m},    α_{t,m} ∝ exp(−η·L_{t−1,m}),

where ``s_{t,m}`` is member m's served margin and ``L_{t−1,m} = Σ_{τ<t} ℓ(s_{τ,m}, y_τ)``
its cumulative log loss ``ℓ(s, y) = log(1 + e^{−y·s})`` so far (``η`` = ``eta``). Mistakes
and the served margin are the ensemble's: decided by ``s_t`` before anything learns the row.

Why a combination of *margins*: the service serves one linear model (``W·x + b``, one sparse
dot product, no Redis round trip); ``Σ α_m (W_m·x + b_m)`` is one, with
``W = Σ α_m W_m`` — so the ensemble is served, versioned and rolled back like any learner.
(Mixing the members' probabilities instead would give log loss regret ``ln M`` outright, but
its margin is not linear in x.)

The bound. The log loss is convex in the margin, so ``ℓ(s_t) ≤ Σ_m α_{t,m} ℓ(s_{t,m})``
(Jensen), and Hedge's analysis (Hoeffding's lemma on each round) gives, for every stream of
T rows and every member m*,

    Σ_t ℓ(s_t, y_t)  ≤  L_{T,m*} + ln(M)/η + (η/8)·Σ_t R_t²,

with ``R_t = max_m ℓ(s_{t,m}, y_t) − min_m ℓ(s_{t,m}, y_t)`` the spread of the members' losses
on row t: the ensemble's log loss is never worse than its best member's by more than
``ln(M)/η + (η/8)·Σ R_t²`` (tested on a stream where one member is clearly best). For losses
in [0, B] and a known horizon T, η = √(8 ln M/(T B²)) makes this ``B·√(T ln M / 2)``; the
default η = 1 favours following the leader quickly, which is what a stream with a clear best
member wants (the realised regret is then a few nats).

Counters: ``examples_seen`` and ``mistakes`` are the ensemble's; ``updates`` counts rows on
which the mixing weights moved (the members' losses differed). Each member's own counters
and log loss are in :meth:`Ensemble.member_metrics`. State: every member's state (keys
prefixed ``m0.``, ``m1.``, …) and the cumulative losses ``loss`` (the weights follow from
them), so ``get_state``/``set_state`` round-trip exactly. Members may not be ensembles; the
``thick`` option belongs to the members, not to the ensemble.

>>> from service.learning.batch import Batch
>>> e = Ensemble(dim=2, members=[{"algorithm": "adagrad"}, {"algorithm": "perceptron"}])
>>> b = Batch.from_rows([([0], [1.0]), ([1], [1.0])] * 50, [1, 0] * 50)
>>> _ = e.learn(b)
>>> [(m["algorithm"], round(m["weight"], 3)) for m in e.member_metrics()]
[('adagrad', 1.0), ('perceptron', 0.0)]
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numba import njit

from service.errors import InvalidSpec
from service.learning._kernels import sign
from service.learning.batch import Batch
from service.learning.linear import (
    MAX_NORM,
    MISTAKES,
    SEEN,
    UPDATES,
    InvalidParameter,
    Learner,
    State,
    _check_dim,
    positive,
)
from service.learning.registry import make_learner, register

DEFAULT_MEMBERS: tuple[dict[str, Any], ...] = (
    {"algorithm": "adagrad", "params": {}},
    {"algorithm": "pa1", "params": {}},
    {"algorithm": "averaged_perceptron", "params": {}},
)
MAX_MEMBERS = 16


@njit(cache=True, nogil=True)
def mixing(loss: np.ndarray, eta: float, alpha: np.ndarray) -> None:
    """``alpha ∝ exp(−η·loss)``, normalised (the smallest loss subtracted first)."""
    lo = loss[0]
    for m in range(1, loss.shape[0]):
        lo = min(lo, loss[m])
    total = 0.0
    for m in range(loss.shape[0]):
        alpha[m] = math.exp(-eta * (loss[m] - lo))
        total += alpha[m]
    for m in range(loss.shape[0]):
        alpha[m] /= total


@njit(cache=True, nogil=True)
def log_loss(s: float, y: float) -> float:
    """``log(1 + e^{−y·s})`` without overflow."""
    z = y * s
    if z > 0.0:
        return math.log1p(math.exp(-z))
    return -z + math.log1p(math.exp(z))


@njit(cache=True, nogil=True)
def mix_margins(S: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``Σ_m alpha[m]·S[m, i]`` for every row i, in member order (as the kernel sums)."""
    M, n = S.shape
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        s = 0.0
        for m in range(M):
            s += alpha[m] * S[m, i]
        out[i] = s
    return out


@njit(cache=True, nogil=True)
def _combine(
    S: np.ndarray,
    y: np.ndarray,
    loss: np.ndarray,
    eta: float,
    c: np.ndarray,
    out: np.ndarray,
    margins: np.ndarray,
) -> None:
    """Row by row: serve ``Σ α_m S[m, i]`` with α from the losses so far, count the mistake,
    then add each member's log loss on the row. c = [seen, mistakes, updates]."""
    M, n = S.shape
    alpha = np.empty(M, dtype=np.float64)
    seen, mistakes, updates = c[SEEN], c[MISTAKES], c[UPDATES]
    for i in range(n):
        mixing(loss, eta, alpha)
        s = 0.0
        for m in range(M):
            s += alpha[m] * S[m, i]
        margins[i] = s
        yi = sign(y[i])
        if (s > 0.0) != (yi > 0.0):
            out[i] = True
            mistakes += 1
        lo = np.inf
        hi = -np.inf
        for m in range(M):
            step = log_loss(S[m, i], yi)
            loss[m] += step
            lo = min(lo, step)
            hi = max(hi, step)
        if hi > lo:
            updates += 1
        seen += 1
    c[SEEN], c[MISTAKES], c[UPDATES] = seen, mistakes, updates


def _members(value: Any) -> list[dict[str, Any]]:
    """Validate ``members``: 2..16 objects ``{"algorithm": name, "params": {...}}`` (or a JSON
    string of that list, from a command line)."""
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # if not JSON, reported below as it was given
            value = json.loads(value)
    if value is None:
        return [dict(m) for m in DEFAULT_MEMBERS]
    if not isinstance(value, list | tuple) or not 2 <= len(value) <= MAX_MEMBERS:
        raise InvalidParameter(
            "members",
            f"members must be a list of 2 to {MAX_MEMBERS} learners, got {value!r}",
        )
    out = []
    for k, member in enumerate(value):
        if not isinstance(member, Mapping) or not set(member) <= {"algorithm", "params"}:
            raise InvalidParameter(
                "members",
                f'members[{k}] must be {{"algorithm": name, "params": {{...}}}}, got {member!r}',
            )
        algorithm, params = member.get("algorithm"), member.get("params", {})
        if not isinstance(algorithm, str) or algorithm == Ensemble.name:
            raise InvalidParameter(
                "members", f"members[{k}].algorithm must name a binary learner, got {algorithm!r}"
            )
        if not isinstance(params, Mapping):
            raise InvalidParameter("members", f"members[{k}].params must be an object")
        out.append({"algorithm": algorithm, "params": dict(params)})
    return out


@register
class Ensemble(Learner):
    """Binary learners mixed by exponential weights (``eta`` > 0) on their log loss."""

    name = "ensemble"
    supports_thick: ClassVar[bool] = False
    _arrays = ("loss",)
    loss: np.ndarray

    def __init__(
        self,
        dim: int,
        n_classes: int = 2,
        members: list[dict[str, Any]] | None = None,
        eta: float = 1.0,
    ):
        _check_dim(dim)  # before the members, so a bad dim is reported as such
        self.eta = positive("eta", eta)
        specs = _members(members)
        built = []
        for k, spec in enumerate(specs):
            try:
                built.append(make_learner(spec["algorithm"], dim, n_classes, spec["params"]))
            except (InvalidSpec, ValueError) as e:
                raise InvalidParameter("members", f"members[{k}]: {e}") from None
        self._learners: list[Learner] = built
        super().__init__(dim, n_classes)

    @property
    def members(self) -> list[dict[str, Any]]:
        """The members, canonical: ``{"algorithm", "params"}`` with every default filled in."""
        return [{"algorithm": m.name, "params": m.params} for m in self._learners]

    def _init_arrays(self) -> dict[str, np.ndarray]:
        return {"loss": np.zeros(len(self._learners), dtype=np.float64)}

    def weights(self) -> np.ndarray:
        """The mixing weights α that serve the next row."""
        alpha = np.empty(len(self._learners), dtype=np.float64)
        mixing(self.loss, self.eta, alpha)
        return alpha

    def _learn(self, batch: Batch, out: np.ndarray, margins: np.ndarray) -> None:
        S = np.empty((len(self._learners), batch.n), dtype=np.float64)
        for m, member in enumerate(self._learners):
            member._learn(batch, np.zeros(batch.n, dtype=np.bool_), S[m])
        _combine(S, batch.y, self.loss, self.eta, self._c, out, margins)
        self._f[MAX_NORM] = max(m.max_norm for m in self._learners)

    def decision(self, batch: Batch) -> np.ndarray:
        S = np.stack([m.decision(batch) for m in self._learners])
        out: np.ndarray = mix_margins(S, self.weights())
        return out

    def _served(self) -> tuple[np.ndarray, float]:
        """``Σ α_m W_m, Σ α_m b_m`` (O(M·dim): snapshots only; margins avoid it)."""
        alpha = self.weights()
        W = np.zeros(self.dim, dtype=np.float64)
        b = 0.0
        for a, member in zip(alpha, self._learners, strict=True):
            Wm, bm = member._served()
            W += a * Wm
            b += float(a) * float(bm)
        return W, b

    def member_metrics(self) -> list[dict[str, Any]]:
        """Each member's progressive figures: algorithm, params, weight (α for the next row),
        examples_seen, mistakes, updates, log_loss (sum) and mean_log_loss."""
        alpha = self.weights()
        out = []
        for k, member in enumerate(self._learners):
            n = member.examples_seen
            out.append({
                "algorithm": member.name,
                "params": member.params,
                "weight": float(alpha[k]),
                "examples_seen": n,
                "mistakes": member.mistakes,
                "updates": member.updates,
                "log_loss": float(self.loss[k]),
                "mean_log_loss": float(self.loss[k]) / n if n else 0.0,
            })  # fmt: skip
        return out

    # ---- state: the ensemble's counters and losses, then every member's, prefixed -----------

    def get_state(self, *, copy: bool = True) -> State:
        state = super().get_state(copy=copy)
        for k, member in enumerate(self._learners):
            for key, value in member.get_state(copy=copy).items():
                state[f"m{k}.{key}"] = value
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Checked first (every member on a fresh copy), applied after."""
        own = {k: v for k, v in state.items() if "." not in k}
        parts: list[dict[str, Any]] = [{} for _ in self._learners]
        for key, value in state.items():
            if "." in key:
                head, _, rest = key.partition(".")
                k = int(head[1:]) if head[:1] == "m" and head[1:].isdigit() else -1
                if not 0 <= k < len(parts):
                    raise ValueError(f"state key {key!r} names no member")
                parts[k][rest] = value
        fresh = []
        for k, (member, part) in enumerate(zip(self._learners, parts, strict=True)):
            copy = make_learner(member.name, self.dim, self.n_classes, member.params)
            try:
                copy.set_state(part)
            except ValueError as e:
                raise ValueError(f"member {k}: {e}") from None
            fresh.append(copy)
        super().set_state(own)
        self._learners = fresh


__all__ = ["DEFAULT_MEMBERS", "Ensemble", "log_loss", "mixing"]
