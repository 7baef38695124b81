"""The label ↔ class-index mapping of a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_CLASSES: tuple[Any, ...] = (-1, 1)
BINARY_ALIASES: dict[Any, int] = {
    -1: 0, 0: 0, 1: 1, "-1": 0, "0": 0, "1": 1, "+1": 1,
}  # fmt: skip
"""Labels the default binary model accepts: −1/+1, 0/1 and their strings; true/false too,
as ``True == 1`` and ``False == 0`` in Python (and so in this dict)."""


class Labels:
    """The label ↔ class-index mapping of a model.

        Binary: index 0 is the negative class, 1 the positive one (``positive``, default the
        second declared class). The default classes ``(-1, 1)`` also accept 0/1, true/false and
        the strings "-1", "+1", "0", "1". Declared classes accept exactly themselves (a float equal
        to an int class, like ``2.0`` for ``2``, is the same JSON number and is accepted). The
    classes and ``positive`` are those of a validated spec (``ModelSpec.from_dict`` checks them).

        >>> lab = Labels(("ham", "spam"), "spam")
        >>> lab.index("spam"), lab.name(0)
        (1, 'ham')
        >>> Labels((-1, 1), 1).index(True)
        1
    """

    __slots__ = ("_map", "_names", "_reject_bool", "n_classes")

    def __init__(self, classes: Sequence[Any], positive: Any = None) -> None:
        classes = tuple(classes)
        if len(classes) == 2:
            pos = classes[1] if positive is None else positive
            neg = classes[0] if pos == classes[1] else classes[1]
            names: tuple[Any, ...] = (neg, pos)
        else:
            names = classes
        self._names = names
        self.n_classes = len(names)
        if classes == DEFAULT_CLASSES and names == DEFAULT_CLASSES:
            self._map: dict[Any, int] = dict(BINARY_ALIASES)
            self._reject_bool = False
        else:
            self._map = {c: i for i, c in enumerate(names)}
            self._reject_bool = True

    def index(self, value: Any) -> int:
        """The class index of a label, or ``ValueError`` naming it."""
        if self._reject_bool and type(value) is bool:
            raise ValueError(f"label {value!r} is not one of the classes {list(self._names)!r}")
        try:
            return self._map[value]
        except (KeyError, TypeError):
            raise ValueError(
                f"label {value!r} is not one of the classes {list(self._names)!r}"
            ) from None

    def name(self, index: int) -> Any:
        """The class as the client wrote it in the spec."""
        if not 0 <= index < self.n_classes:
            raise ValueError(f"class index must be in 0..{self.n_classes - 1}, got {index}")
        return self._names[index]

    def indices(self, values: list[Any]) -> tuple[np.ndarray, int]:
        """Class indices of many labels; also the position of the first bad one (or -1)."""
        try:
            got = list(map(self._map.get, values))
        except TypeError:  # an unhashable label: find it the slow way
            got = [self._map.get(v) if _hashable(v) else None for v in values]
        bad = -1
        if None in got:
            bad = got.index(None)
        if self._reject_bool and bool in set(map(type, values)):
            first_bool = next(i for i, v in enumerate(values) if type(v) is bool)
            bad = first_bool if bad < 0 else min(bad, first_bool)
        if bad >= 0:
            got = [0 if g is None else g for g in got]
        return np.fromiter(got, dtype=np.int32, count=len(got)), bad


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True
