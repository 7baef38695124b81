"""Eager validation of hyper-parameters: each helper returns the value, converted, or raises
:class:`InvalidParameter` with a message naming the field and the offending value ("C must be
> 0, got 0"). Every learner's ``__init__`` checks its parameters with these."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from service.errors import InvalidSpec


class InvalidParameter(InvalidSpec, ValueError):
    """A hyper-parameter is out of its domain. Also a ``ValueError``, so plain Python callers
    can catch it as such; ``field`` is ``"params.<name>"`` for the API's error body."""

    def __init__(self, name: str, message: str):
        super().__init__(message, field=f"params.{name}")


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


__all__ = [
    "MAX_PARAM",
    "MIN_PARAM",
    "InvalidParameter",
    "boolean",
    "non_negative",
    "one_of",
    "positive",
]
