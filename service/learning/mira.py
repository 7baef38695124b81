"""MIRA, binary (Crammer & Singer 2003): the smallest change that fixes a mistake, capped.

On a mistake (y·s ≤ 0) — or, in the aggressive form with ``margin`` > 0, whenever
y·s < ``margin`` — take ``τ = min(C, (1 − y·s)/‖x‖²)`` and ``w += τ·y·x``, ``b += τ·y``. As for
the PA family, the bias is learned apart and left out of ‖x‖²; an all-zero ``x`` gives τ = 0.
With ``margin`` = 1 this is PA-I; with ``margin`` = 0 it is conservative (mistake-driven).

>>> from service.learning.batch import Batch
>>> m = MIRA(dim=2, C=10.0)
>>> m.learn(Batch.from_rows([([0], [2.0]), ([0], [2.0])], [1, 1])).tolist()
[True, False]
>>> m.w.tolist(), m.b, m.updates   # τ = 1/4; then y·s = 1.25 > 0: no update
([0.5, 0.0], 0.25, 1)
"""

from __future__ import annotations

from service.learning import _additive
from service.learning._additive import AdditiveLearner
from service.learning.linear import InvalidParameter, non_negative, positive
from service.learning.registry import register


@register
class MIRA(AdditiveLearner):
    """MIRA with cap ``C`` (> 0) and ``margin`` in [0, 1] (> 0: the aggressive form)."""

    name = "mira"
    RULE = _additive.MIRA

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0, margin: float = 0.0):
        self.C = positive("C", C)
        self.margin = non_negative("margin", margin)
        if self.margin > 1.0:  # the step aims at y·s = 1: a larger margin would never move w
            raise InvalidParameter("margin", f"margin must be <= 1, got {margin!r}")
        super().__init__(dim, n_classes)
