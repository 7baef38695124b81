"""Model specs: what ``PUT /models/{m}`` takes, what ``sl:{m}:spec`` stores, and presets.

A :class:`ModelSpec` is validated completely when it is built from a dict (unknown keys,
unknown algorithm, bad hyper-parameters — by building the learner once —, hashing sizes,
classes, text options) and raises :class:`~service.errors.InvalidSpec` naming the field.
:meth:`ModelSpec.to_dict` is canonical: presets applied, every default filled in, so
``from_dict(s.to_dict()) == s`` and two specs that mean the same compare equal.

Presets are named, measured defaults (``docs/presets.md``). A preset supplies every field the
client did not give; ``params`` are merged key by key when the client keeps the preset's
algorithm. With no ``algorithm`` and no ``preset`` at all, a binary spec gets ``"spam"`` and a
multi-class one ``"text"``, so ``{"classes": ["ham", "spam"]}`` alone is a working spam filter;
the spam preset's classes, when none are given, are ``["ham", "spam"]``. Every hashing model
has a text featurizer: the default one (binary word unigrams, L2-normalised) unless ``text``
gives options, or ``"text": false`` leaves it out.

>>> s = ModelSpec.from_dict({"algorithm": "pa1", "params": {"C": 0.5}, "bits": 10})
>>> s.dim, s.classes, s.positive, s.params
(1024, (-1, 1), 1, {'C': 0.5})
>>> ModelSpec.from_dict(s.to_dict()) == s
True
>>> ModelSpec.from_dict({"classes": ["ham", "spam"]}).preset
'spam'
>>> ModelSpec.from_dict({"algorithm": "pa1", "bits": 40})
Traceback (most recent call last):
...
service.errors.InvalidSpec: bits must be an integer in 1..28, got 40
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.errors import InvalidSpec
from service.learning.features import TRANSFORMS, Featurizer
from service.learning.linear import Learner
from service.learning.registry import make_learner
from service.learning.text import check_char_limit, check_ngram_range, check_token_kinds

DEFAULT_BITS = 18
MAX_BITS = 28
MAX_DIM = 2**MAX_BITS

SPEC_KEYS = frozenset(
    {"algorithm", "params", "bits", "dim", "hashing", "classes", "positive", "text",
     "quadratic", "normalize", "transform", "preset"}
)  # fmt: skip
TEXT_DEFAULTS: dict[str, Any] = {
    "word_ngrams": (1, 1), "char_ngrams": None, "binary": True, "normalize": True,
    "char_limit": None, "email": False, "tokens": (),
}  # fmt: skip
TEXT_KEYS = frozenset(TEXT_DEFAULTS)

# The presets: measured on real labelled text in docs/presets.md (bench/quality.py); keep the
# two in step. spam: Vowpal Wabbit's update (adagrad: normalised adaptive, importance-invariant
# steps, bias as a constant feature) with the modified Huber loss and lr 0.35, over binary,
# L2-normalised word uni+bigrams and character 4-grams of the first 3,000 characters;
# named features through log1p. It beats VW's defaults, River's PA and sklearn's SGD fed
# words or words+char4 on 6 of the 11 real streams of docs/presets.md in both (1−ROCA)% and
# mistakes. "email" is left off: it keeps only five header fields, and the other headers
# (Received, X-Mailer, …) that a raw-text filter learns from would be lost; it and the
# special tokens also cost 30-40% of the speed on short messages.
_TEXT = {
    "word_ngrams": [1, 2], "char_ngrams": [4, 4], "binary": True, "normalize": True,
    "char_limit": 3000, "email": False, "tokens": [],
}  # fmt: skip
PRESETS: dict[str, dict[str, Any]] = {
    "spam": {
        "algorithm": "adagrad",
        "params": {"lr": 0.35, "loss": "modified_huber", "bias": True, "invariant": True},
        "bits": 20,
        "text": _TEXT,
        "transform": "log1p",
        "normalize": False,
    },
    # multi-class text: one-against-all adagrad (vw --oaa K's update) with the modified Huber
    # loss, over word uni+bigrams and character 5-grams of the first 500 characters (a
    # document's lead); fewer mistakes than every anchor on TREC questions and Reuters R8
    # (docs/presets.md)
    "text": {
        "algorithm": "adagrad",
        "params": {"lr": 1.0, "loss": "modified_huber", "bias": True, "invariant": True},
        "bits": 20,
        "text": {**_TEXT, "char_ngrams": [5, 5], "char_limit": 500},
        "transform": "log1p",
        "normalize": False,
    },
}


PRESET_CLASSES: dict[str, list[Any]] = {"spam": ["ham", "spam"]}
"""A preset's classes when the spec gives none (``positive`` is then the second)."""


@dataclass(frozen=True, slots=True)
class TextSpec:
    """Text featurizer options (see :mod:`service.learning.text` for the conventions).

    ``word_ngrams``/``char_ngrams``: ``(lo, hi)`` ranges of n, or None to leave them out;
    ``binary``: 1 per distinct token instead of counts; ``normalize``: scale the text part of
    an example to unit L2 norm (named features keep their values); ``char_limit``: character
    n-grams only within the first N characters of the normalised text (None: all);
    ``email``: RFC 822 messages give header features (``h:<field>:``) apart from the body;
    ``tokens``: special tokens among ``url``, ``number``, ``currency``, ``caps``.
    """

    word_ngrams: tuple[int, int] | None = (1, 1)
    char_ngrams: tuple[int, int] | None = None
    binary: bool = True
    normalize: bool = True
    char_limit: int | None = None
    email: bool = False
    tokens: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Any) -> TextSpec:
        if not isinstance(d, Mapping):
            raise InvalidSpec(
                f"text must be an object of options, null (the default) or false (no text), "
                f"got {d!r}",
                field="text",
            )
        unknown = sorted(set(d) - TEXT_KEYS)
        if unknown:
            raise InvalidSpec(
                f"unknown text option(s) {unknown}; expected some of {sorted(TEXT_KEYS)}",
                field=f"text.{unknown[0]}",
            )
        ranges: dict[str, tuple[int, int] | None] = {}
        for key in ("word_ngrams", "char_ngrams"):
            value = d.get(key, TEXT_DEFAULTS[key])
            if value is None:
                ranges[key] = None
                continue
            try:
                ranges[key] = check_ngram_range(key, value)
            except ValueError as e:
                raise InvalidSpec(str(e), field=f"text.{key}") from None
        if ranges["word_ngrams"] is None and ranges["char_ngrams"] is None:
            raise InvalidSpec("text needs word_ngrams or char_ngrams (both are null)", field="text")
        flags = {}
        for key in ("binary", "normalize", "email"):
            value = d.get(key, TEXT_DEFAULTS[key])
            if type(value) is not bool:
                raise InvalidSpec(f"text.{key} must be true or false, got {value!r}",
                                  field=f"text.{key}")  # fmt: skip
            flags[key] = value
        try:
            char_limit = check_char_limit(d.get("char_limit"))
        except ValueError as e:
            raise InvalidSpec(f"text.{e}", field="text.char_limit") from None
        if char_limit is not None and ranges["char_ngrams"] is None:
            raise InvalidSpec("text.char_limit needs char_ngrams", field="text.char_limit")
        try:
            tokens = check_token_kinds(d.get("tokens", ()))
        except ValueError as e:
            raise InvalidSpec(f"text.{e}", field="text.tokens") from None
        return cls(ranges["word_ngrams"], ranges["char_ngrams"], flags["binary"],
                   flags["normalize"], char_limit, flags["email"], tokens)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "word_ngrams": list(self.word_ngrams) if self.word_ngrams else None,
            "char_ngrams": list(self.char_ngrams) if self.char_ngrams else None,
            "binary": self.binary,
            "normalize": self.normalize,
            "char_limit": self.char_limit,
            "email": self.email,
            "tokens": list(self.tokens),
        }


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A validated model spec; build it with :meth:`from_dict`."""

    algorithm: str
    params: dict[str, Any] = field(default_factory=dict)
    bits: int | None = DEFAULT_BITS
    dim: int = 2**DEFAULT_BITS
    hashing: bool = True
    classes: tuple[Any, ...] = (-1, 1)
    positive: Any | None = 1
    text: TextSpec | None = None
    quadratic: tuple[tuple[str, str], ...] = ()
    normalize: bool = False
    transform: str = "none"
    preset: str | None = None

    # -- derived -------------------------------------------------------------------------------
    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def multiclass(self) -> bool:
        return len(self.classes) > 2

    def build_learner(self) -> Learner:
        """A fresh learner for this spec (weights of shape (dim,) or (K, dim))."""
        return make_learner(self.algorithm, self.dim, self.n_classes, self.params)

    def featurizer(self, **limits: Any) -> Featurizer:
        """The featurizer of this spec; ``limits`` are ``max_features``, ``max_text_chars``…
        (the keyword arguments of :class:`Featurizer`)."""
        return Featurizer(self, **limits)

    # -- (de)serialisation -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe and canonical (``from_dict(s.to_dict()) == s``)."""
        return {
            "algorithm": self.algorithm,
            "params": dict(self.params),
            "bits": self.bits,
            "dim": self.dim,
            "hashing": self.hashing,
            "classes": list(self.classes),
            "positive": self.positive,
            "text": self.text.to_dict()
            if self.text is not None
            else (False if self.hashing else None),
            "quadratic": [list(p) for p in self.quadratic],
            "normalize": self.normalize,
            "transform": self.transform,
            "preset": self.preset,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ModelSpec:
        """Validate a spec dict (presets applied, defaults filled in)."""
        if not isinstance(d, Mapping):
            raise InvalidSpec(f"a model spec must be an object, got {type(d).__name__}")
        unknown = sorted(str(k) for k in set(d) - SPEC_KEYS)
        if unknown:
            raise InvalidSpec(
                f"unknown key(s) {unknown} in the spec; expected some of {sorted(SPEC_KEYS)}",
                field=unknown[0],
            )
        if "classes" in d:
            classes = _classes(d["classes"])
        else:
            preset = _preset_name(d, 2)
            classes = _classes(
                PRESET_CLASSES.get(preset if isinstance(preset, str) else "", [-1, 1])
            )
        d = _apply_preset(d, len(classes))
        algorithm = d.get("algorithm")
        if not isinstance(algorithm, str) or not algorithm:
            raise InvalidSpec(f"algorithm must be a name, got {algorithm!r}", field="algorithm")
        positive = _positive(d.get("positive"), classes)
        hashing = _flag(d, "hashing", True)
        bits, dim = _size(d, hashing)
        text = _text(d.get("text"), hashing)
        quadratic = _quadratic(d.get("quadratic", []))
        if not hashing and (text is not None or quadratic):
            raise InvalidSpec(
                "text and quadratic features need hashing (hashing: true)",
                field="text" if text is not None else "quadratic",
            )
        params = _params(algorithm, len(classes), d.get("params", {}))
        return cls(
            algorithm=algorithm,
            params=params,
            bits=bits,
            dim=dim,
            hashing=hashing,
            classes=classes,
            positive=positive,
            text=text,
            quadratic=quadratic,
            normalize=_flag(d, "normalize", False),
            transform=_transform(d.get("transform", "none")),
            preset=d.get("preset"),
        )


# ----------------------------------------------------------------------------------------------
# validation helpers, one per field
# ----------------------------------------------------------------------------------------------


def _preset_name(d: Mapping[str, Any], n_classes: int) -> Any:
    """The preset a spec asks for: named, or implied (no algorithm and no preset at all)."""
    name = d.get("preset")
    if name is None and d.get("algorithm") is None:
        name = "spam" if n_classes == 2 else "text"
    return name


def _text(value: Any, hashing: bool) -> TextSpec | None:
    """The text featurizer: the default one for every hashing model (absent or null), none
    with ``false`` (or without hashing), else the options given."""
    if value is False or (value is None and not hashing):
        return None
    if value is None or value is True:
        return TextSpec()
    return TextSpec.from_dict(value)


def _apply_preset(d: Mapping[str, Any], n_classes: int) -> dict[str, Any]:
    name = _preset_name(d, n_classes)
    out = {k: v for k, v in d.items() if k != "preset"}
    if name is None:
        return out
    if not isinstance(name, str) or name not in PRESETS:
        raise InvalidSpec(
            f"unknown preset {name!r}; expected one of {sorted(PRESETS)}", field="preset"
        )
    preset = copy.deepcopy(PRESETS[name])
    same_algorithm = out.get("algorithm", preset["algorithm"]) == preset["algorithm"]
    merged = {**preset, **out}
    if same_algorithm and isinstance(out.get("params"), Mapping):
        merged["params"] = {**preset["params"], **out["params"]}
    elif not same_algorithm and "params" not in out:
        merged["params"] = {}
    merged["preset"] = name
    return merged


def _classes(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple):
        raise InvalidSpec(f"classes must be a list, got {value!r}", field="classes")
    for c in value:
        if type(c) not in (str, int):
            raise InvalidSpec(
                f"each class must be a string or an integer, got {c!r}", field="classes"
            )
    if len(value) < 2:
        raise InvalidSpec(f"classes must list at least 2 classes, got {list(value)!r}",
                          field="classes")  # fmt: skip
    if len(set(value)) != len(value):
        raise InvalidSpec(f"classes must be unique, got {list(value)!r}", field="classes")
    if len(value) > 10_000:
        raise InvalidSpec(f"at most 10000 classes, got {len(value)}", field="classes")
    return tuple(value)


def _positive(value: Any, classes: tuple[Any, ...]) -> Any:
    if len(classes) > 2:
        if value is not None:
            raise InvalidSpec("positive applies to binary models only", field="positive")
        return None
    if value is None:
        return classes[1]
    if type(value) not in (str, int) or value not in classes:
        raise InvalidSpec(
            f"positive must be one of the classes {list(classes)!r}, got {value!r}",
            field="positive",
        )
    return value


def _flag(d: Mapping[str, Any], key: str, default: bool) -> bool:
    value = d.get(key, default)
    if type(value) is not bool:
        raise InvalidSpec(f"{key} must be true or false, got {value!r}", field=key)
    return value


def _int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


def _size(d: Mapping[str, Any], hashing: bool) -> tuple[int | None, int]:
    raw_bits, raw_dim = d.get("bits"), d.get("dim")
    if not hashing:
        if raw_bits is not None:
            raise InvalidSpec("bits applies to hashing only; give dim", field="bits")
        dim = _int(raw_dim)
        if dim is None or not 1 <= dim <= MAX_DIM:
            raise InvalidSpec(
                f"dim must be an integer in 1..{MAX_DIM} without hashing, got {raw_dim!r}",
                field="dim",
            )
        return None, dim
    if raw_bits is None and raw_dim is not None:
        dim = _int(raw_dim)
        if dim is None or dim < 2 or dim & (dim - 1) or dim > MAX_DIM:
            raise InvalidSpec(
                f"with hashing, dim must be a power of two up to 2**{MAX_BITS}, got {raw_dim!r}",
                field="dim",
            )
        return int(math.log2(dim)), dim
    bits = _int(DEFAULT_BITS if raw_bits is None else raw_bits)
    if bits is None or not 1 <= bits <= MAX_BITS:
        raise InvalidSpec(f"bits must be an integer in 1..{MAX_BITS}, got {raw_bits!r}",
                          field="bits")  # fmt: skip
    if raw_dim is not None and _int(raw_dim) != 2**bits:
        raise InvalidSpec(f"dim must be 2**bits = {2**bits}, got {raw_dim!r}", field="dim")
    return bits, 2**bits


def _transform(value: Any) -> str:
    if value not in TRANSFORMS or type(value) is not str:
        raise InvalidSpec(
            f"transform must be one of {list(TRANSFORMS)}, got {value!r}", field="transform"
        )
    return str(value)


def _quadratic(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list | tuple):
        raise InvalidSpec(f"quadratic must be a list of pairs, got {value!r}", field="quadratic")
    pairs = []
    for pair in value:
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(g, str) and g and ":" not in g for g in pair)
        ):
            raise InvalidSpec(
                f"each quadratic entry must be a pair of group names (no ':'), got {pair!r}",
                field="quadratic",
            )
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _params(algorithm: str, n_classes: int, value: Any) -> dict[str, Any]:
    """Validate by building the learner once (on a tiny dim), then read the full, canonical
    hyper-parameters back from it."""
    if not isinstance(value, Mapping):
        raise InvalidSpec(f"params must be an object, got {value!r}", field="params")
    for k, v in value.items():
        if not _json_like(v):
            raise InvalidSpec(
                f"params.{k} must be a number, a bool, a string (or, for options such as thick "
                f"and members, JSON objects and lists of them), got {v!r}",
                field=f"params.{k}",
            )
    try:
        learner = make_learner(algorithm, 1, n_classes, dict(value), coerce=False)
    except InvalidSpec:
        raise
    except (ValueError, TypeError) as e:
        raise InvalidSpec(f"bad params for {algorithm}: {e}", field="params") from None
    return {k: _plain(v) for k, v in learner.params.items()}


def _json_like(v: Any, depth: int = 0) -> bool:
    """A scalar, or (a few levels deep) a list / string-keyed object of such values; what each
    value means is the learner's to validate."""
    if v is None or type(v) in (bool, int, float, str):
        return True
    if depth >= 4:
        return False
    if isinstance(v, list | tuple):
        return all(_json_like(x, depth + 1) for x in v)
    if isinstance(v, Mapping):
        return all(isinstance(k, str) and _json_like(x, depth + 1) for k, x in v.items())
    return False


def _plain(v: Any) -> Any:
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


__all__ = ["PRESETS", "ModelSpec", "TextSpec"]
