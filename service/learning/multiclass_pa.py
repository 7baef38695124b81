"""Multi-class passive-aggressive learners (Crammer et al. 2006, §7; Crammer & Singer 2003),
single-constraint form; the loop is
:func:`~service.learning._multiclass.learn_multiclass_additive`.

With ``r`` the highest-scoring wrong class and ``ℓ = max(0, 1 − (s_y − s_r))``, the update
``W[y] += τ·x, W[r] −= τ·x`` (and ``b[y] += τ, b[r] −= τ``) changes the margin
``s_y − s_r`` by ``2τ‖x‖²``, hence the step
``τ = ℓ/(2‖x‖²)`` (PA), ``min(C, ℓ/(2‖x‖²))`` (PA-I), ``ℓ/(2‖x‖² + 1/(2C))`` (PA-II).
As in the binary family the bias is learned beside the weights and left out of ‖x‖², and an
all-zero ``x`` gives τ = 0 for PA and PA-I.

>>> from service.learning.batch import Batch
>>> m = MulticlassPA1(dim=2, n_classes=3, C=1.0)
>>> m.learn(Batch.from_rows([([0], [1.0]), ([0], [1.0])], [2, 2])).tolist()
[True, False]
>>> m.serving().W[:, 0].tolist(), m.serving().b.tolist()   # τ = 1/(2·1) = 0.5
([-0.5, 0.0, 0.5], [-0.5, 0.0, 0.5])
"""

from __future__ import annotations

from service.learning._multiclass import PA, PA1, PA2, MulticlassAdditiveLearner
from service.learning.linear import positive
from service.learning.registry import register


@register
class MulticlassPA(MulticlassAdditiveLearner):
    """Multi-class PA: the smallest change that puts the true class 1 above the top wrong one."""

    name = "pa"
    RULE = PA

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__(dim, n_classes)


@register
class MulticlassPA1(MulticlassAdditiveLearner):
    """Multi-class PA-I: the step capped at ``C`` (> 0)."""

    name = "pa1"
    RULE = PA1

    def __init__(self, dim: int, n_classes: int = 3, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


@register
class MulticlassPA2(MulticlassAdditiveLearner):
    """Multi-class PA-II: a squared slack penalised by ``1/(2C)`` (C > 0)."""

    name = "pa2"
    RULE = PA2

    def __init__(self, dim: int, n_classes: int = 3, C: float = 1.0):
        self.C = positive("C", C)
        super().__init__(dim, n_classes)


__all__ = ["MulticlassPA", "MulticlassPA1", "MulticlassPA2"]
