"""Feature values: the float conversion and range check every value goes through.

Shared by the featurizer (JSON examples) and the svmlight reader, so a value is accepted or
refused alike whichever way it came in.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from service.errors import InvalidExample

MAX_ABS_VALUE = 1e100
"""Largest |value| a feature may have. Beyond it (or NaN/±inf) an example is rejected: the
square of a value must stay finite even summed over ``max_features`` features (‖x‖² feeds every
PA step size); :data:`MAX_FEATURES` is the bound this puts on ``max_features``."""

MAX_FEATURES = int(sys.float_info.max / MAX_ABS_VALUE**2) // 2
"""The largest ``max_features`` a featurizer accepts: with every value within
:data:`MAX_ABS_VALUE`, ‖x‖² of a row of that many features stays finite (with room to spare)."""

FIELD_NAME_CHARS = 64
"""How much of a feature name an error's ``field`` quotes (a longer name is cut, with "…")."""


def feature_field(name: Any) -> str:
    """``features.<name>`` for an error, the name cut to :data:`FIELD_NAME_CHARS`."""
    text = str(name)
    if len(text) > FIELD_NAME_CHARS:
        text = text[:FIELD_NAME_CHARS] + "…"
    return f"features.{text}"


def first_unencodable(texts: list[str]) -> int:
    """Index of the first text that is not valid UTF-8 (a lone surrogate, which JSON's
    ``\\ud800`` can carry), or -1."""
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        for k, t in enumerate(texts):
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                return k
    return -1


def to_float(
    values: list[Any],
    ends: np.ndarray,
    errors: list[InvalidExample],
    field_of: Callable[[int], str],
    row_of: np.ndarray | None = None,
) -> np.ndarray | None:
    """Values as float64, checking types, finiteness and range over the whole batch at once."""

    def fail(pos: int, msg: str) -> None:
        k = int(np.searchsorted(ends, pos, side="right"))
        row = int(row_of[k]) if row_of is not None else k
        errors.append(InvalidExample(msg, field=field_of(pos), index=row))

    def first_non_number() -> int | None:
        for pos, v in enumerate(values):
            if type(v) is bool or not isinstance(v, int | float):
                fail(pos, f"a feature value must be a number, got {v!r}")
                return pos
        return None

    # array('d') converts in C and refuses strings, None, lists…; only bools (ints to it) and
    # ints beyond the float range get through or fail differently. A bool can only have
    # become 0.0 or 1.0, so only those positions need their Python type looked at.
    try:
        arr = np.frombuffer(array("d", values), dtype=np.float64)
    except TypeError:
        if first_non_number() is None:  # an exotic number type: the general conversion
            arr = np.array(values, dtype=np.float64)
        else:
            return None
    except OverflowError:
        pos = next(p for p, v in enumerate(values) if isinstance(v, int) and abs(v) > 1e300)
        fail(pos, f"feature value {values[pos]} is out of range (|v| <= {MAX_ABS_VALUE:g})")
        return None
    suspects = np.flatnonzero((arr == 0.0) | (arr == 1.0))
    if suspects.size:
        picked = (
            itemgetter(*suspects.tolist())(values) if suspects.size > 1 else [values[suspects[0]]]
        )
        if bool in set(map(type, picked)):
            first_non_number()
            return None
    bad = ~(np.abs(arr) <= MAX_ABS_VALUE)
    if bad.any():
        pos = int(np.argmax(bad))
        fail(pos, f"feature value {values[pos]!r} is not finite or |v| > {MAX_ABS_VALUE:g}")
        return None
    return arr
