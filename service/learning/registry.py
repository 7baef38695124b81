"""The algorithm registry: name → learner class, and :func:`make_learner`.

A new algorithm is one new module plus ``@register`` on its class. Binary and multi-class
forms share a name (``"perceptron"``), so the key is ``(name, multiclass)``; a spec with more
than two classes selects the multi-class form.

Importing this module imports every algorithm module of the package (the binary ones by name,
and every ``multiclass_*`` module found on disk), so :data:`REGISTRY` is complete as soon as
it can be read.

>>> learner = make_learner("pa1", dim=4, n_classes=2, params={"C": 0.5})
>>> learner
PA1(dim=4, C=0.5)
>>> make_learner("pa1", 4, 2, {"C": 0})
Traceback (most recent call last):
...
service.learning.params.InvalidParameter: C must be > 0, got 0
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from service.errors import InvalidSpec
from service.learning.linear import Learner

REGISTRY: dict[tuple[str, bool], type[Learner]] = {}

L = TypeVar("L", bound=type[Learner])


def register(cls: L) -> L:
    """Class decorator: add ``cls`` to :data:`REGISTRY` under ``(cls.name, cls.multiclass)``."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no registry name")
    key = (cls.name, cls.multiclass)
    if key in REGISTRY and REGISTRY[key] is not cls:
        raise TypeError(
            f"algorithm {key} is registered twice ({REGISTRY[key].__name__}, {cls.__name__})"
        )
    REGISTRY[key] = cls
    return cls


def algorithms(multiclass: bool | None = None) -> list[str]:
    """Registered names, sorted (all, or only the binary / multi-class ones)."""
    return sorted({n for (n, m) in REGISTRY if multiclass is None or m == multiclass})


def _coerce(name: str, value: Any, default: Any) -> Any:
    """Turn a string from a command line (``--param C=0.5``) into the default's type.

    Anything else is passed through unchanged: the learner's ``__init__`` validates it.
    """
    if not isinstance(value, str) or isinstance(default, str):
        return value
    text = value.strip()
    if isinstance(default, bool):
        low = text.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        return value
    try:
        if isinstance(default, int) and not any(ch in text for ch in ".eE"):
            return int(text)
        return float(text)
    except ValueError:
        return value


def learner_class(name: str, n_classes: int = 2) -> type[Learner]:
    """The class registered for ``name`` in the form ``n_classes`` selects."""
    multiclass = n_classes > 2
    cls = REGISTRY.get((name, multiclass))
    if cls is None:
        kind = "multi-class" if multiclass else "binary"
        raise InvalidSpec(
            f"unknown {kind} algorithm {name!r}; expected one of {algorithms(multiclass)}",
            field="algorithm",
        )
    return cls


def make_learner(
    name: str,
    dim: int,
    n_classes: int = 2,
    params: Mapping[str, Any] | None = None,
    *,
    coerce: bool = True,
) -> Learner:
    """Build a learner by name, with its hyper-parameters validated eagerly.

    With ``coerce`` (the default, for command lines and Python callers) strings are first
    turned into each parameter's type (``"0.5"`` → 0.5); without it (a JSON spec) a string
    where a number or a bool belongs is refused.

    Raises :class:`~service.errors.InvalidSpec` with ``field="algorithm"`` for an unknown
    algorithm and ``field="params.<name>"`` for an unknown or invalid hyper-parameter.
    ``params["thick"]`` (train on or near errors; every binary learner) goes to
    :meth:`Learner.set_thick <service.learning.linear.Learner.set_thick>`.
    """
    cls = learner_class(name, n_classes)
    given = dict(params or {})
    thick = given.pop("thick", None)
    defaults = cls.defaults()
    for key in given:
        if key not in defaults:
            raise InvalidSpec(
                f"unknown parameter {key!r} for {name}; expected one of {sorted(defaults)}",
                field=f"params.{key}",
            )
    kwargs = {k: _coerce(k, v, defaults[k]) if coerce else v for k, v in given.items()}
    learner = cls(dim, n_classes, **kwargs)
    learner.set_thick(thick)
    return learner


_BINARY_MODULES = (
    "perceptron",
    "averaged_perceptron",
    "pocket",
    "mira",
    "pa",
    "pegasos",
    "logistic",
    "adagrad",
    "ensemble",
)


def _load_all() -> None:
    names = list(_BINARY_MODULES)
    names += sorted(
        info.name
        for info in pkgutil.iter_modules([str(Path(__file__).parent)])
        if info.name.startswith("multiclass_")
    )
    for module in names:
        importlib.import_module(f"service.learning.{module}")


_load_all()

__all__ = ["REGISTRY", "algorithms", "learner_class", "make_learner", "register"]
