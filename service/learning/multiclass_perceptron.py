"""The multi-class perceptron (Crammer & Singer 2003, "uniform" update to the top wrong row).

Update when ``s_y ≤ s_r`` (r the highest-scoring wrong class): ``W[y] += x, b[y] += 1`` and
``W[r] −= x, b[r] −= 1``. The ``≤`` mirrors the binary rule ``y·s ≤ 0``: with two classes the
difference ``W[1] − W[0]`` moves exactly like twice the binary perceptron's ``w``, so both
make the same mistakes, example for example (tested).

>>> from service.learning.batch import Batch
>>> m = MulticlassPerceptron(dim=2, n_classes=3)
>>> x = Batch.from_rows([([0], [1.0]), ([1], [1.0]), ([0], [1.0]), ([0], [1.0])], [2, 1, 2, 2])
>>> m.learn(x).tolist()
[True, True, True, False]
>>> m.serving().W.tolist(), m.serving().b.tolist(), m.updates
([[-1.0, 0.0], [-1.0, 1.0], [2.0, -1.0]], [-1.0, 0.0, 1.0], 3)
"""

from __future__ import annotations

from service.learning._multiclass import PERCEPTRON, MulticlassAdditiveLearner
from service.learning.registry import register


@register
class MulticlassPerceptron(MulticlassAdditiveLearner):
    """One perceptron row per class; no hyper-parameters (the loop is
    :func:`~service.learning._multiclass.learn_multiclass_additive`)."""

    name = "perceptron"
    RULE = PERCEPTRON

    def __init__(self, dim: int, n_classes: int = 3):
        super().__init__(dim, n_classes)


__all__ = ["MulticlassPerceptron"]
