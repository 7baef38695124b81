"""Passive-aggressive learners PA, PA-I and PA-II (Crammer et al. 2006), binary.

With ℓ = max(0, 1 − y·s): τ = ℓ/‖x‖² (PA), min(C, ℓ/‖x‖²) (PA-I), ℓ/(‖x‖² + 1/(2C)) (PA-II);
then ``w += τ·y·x`` and ``b += τ·y``. As in River's ``PAClassifier`` (which the tests match
example for example), the bias is learned beside the weights but left out of ‖x‖², and an
all-zero ``x`` gives τ = 0 for PA and PA-I (PA-II's ``1/(2C)`` keeps it finite).

>>> from service.learning.batch import Batch
>>> m = PA1(dim=2, C=0.1)
>>> m.learn(Batch.from_rows([([0], [2.0]), ([0], [2.0])], [1, 1])).tolist()
[True, False]
>>> m.w.tolist(), m.b, m.updates
([0.4, 0.0], 0.2, 2)
"""

from __future__ import annotations

from service.learning import _additive
from service.learning._additive import AdditiveLearner
from service.learning.linear import positive
from service.learning.registry import register


@register
class PA(AdditiveLearner):
    """PA: the closest weights that classify the example with margin 1 (no C; τ = ℓ/‖x‖²)."""

    name = "pa"
    RULE = _additive.PA

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)


@register
class PA1(AdditiveLearner):
    """PA-I: the step capped at ``C`` (> 0), robust to label noise."""

    name = "pa1"
    RULE = _additive.PA1

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


@register
class PA2(AdditiveLearner):
    """PA-II: a squared slack penalised by ``1/(2C)`` (C > 0)."""

    name = "pa2"
    RULE = _additive.PA2

    def __init__(self, dim: int, n_classes: int = 2, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)
