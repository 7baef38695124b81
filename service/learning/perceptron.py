"""Rosenblatt's perceptron, binary.

Update when y·s ≤ 0: ``w += y·x``, ``b += y`` (η = 1, the bias learned apart with step 1).
This is River's ``linear_model.Perceptron()`` exactly: hinge loss with threshold 0 and a
``<=`` test, SGD with learning rate 1 for weights and intercept; a tie (s = 0) predicts the
negative class. The test suite checks the two agree example for example.

>>> from service.learning.batch import Batch
>>> p = Perceptron(dim=3)
>>> p.learn(Batch.from_rows([([0], [1.0]), ([1], [1.0]), ([0], [1.0])], [1, 0, 1])).tolist()
[True, True, False]
>>> p.w.tolist(), p.b, p.mistakes, p.updates
([1.0, -1.0, 0.0], 0.0, 2, 2)
"""

from __future__ import annotations

from service.learning import _additive
from service.learning._additive import AdditiveLearner
from service.learning.registry import register


@register
class Perceptron(AdditiveLearner):
    """The classic perceptron (Rosenblatt 1958); no hyper-parameters."""

    name = "perceptron"
    RULE = _additive.PERCEPTRON

    def __init__(self, dim: int, n_classes: int = 2):
        super().__init__(dim, n_classes)
