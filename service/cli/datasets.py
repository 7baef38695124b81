"""Data shipped inside the package, and reading files that may be compressed.

Spambase (UCI, CC BY 4.0 — see ``service/data/SOURCE.md``) travels with the package, so
``streamlearn demo`` and the tests that learn real data work from any checkout or wheel.

``open_binary`` opens a file for reading, decompressing ``.gz``, ``.bz2`` and ``.xz`` by their
suffix, so ``evaluate`` and ``replay`` take compressed files as they are; both guess a file's
format (:func:`guess_format`) and read an ``--order`` file (:func:`read_order`) here.

>>> SPAMBASE.name, SPAMBASE_ORDER.name
('spambase.jsonl.gz', 'spambase_order.txt')
>>> len(spambase_order())
4601
"""

from __future__ import annotations

import bz2
import gzip
import lzma
from pathlib import Path
from typing import IO

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SPAMBASE = DATA_DIR / "spambase.jsonl.gz"
SPAMBASE_ORDER = DATA_DIR / "spambase_order.txt"

COMPRESSED = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
FORMATS = ("ndjson", "svmlight")
SVMLIGHT_SUFFIXES = (".svm", ".svmlight", ".libsvm", ".txt")


def open_binary(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, decompressed when it ends in .gz, .bz2 or .xz."""
    opener = COMPRESSED.get(path.suffix.lower())
    if opener is None:
        return path.open("rb")
    return opener(path, "rb")  # type: ignore[operator]


def base_suffix(path: Path) -> str:
    """The suffix that says the format, under any compression suffix.

    >>> base_suffix(Path("a.svm.xz")), base_suffix(Path("a.jsonl")), base_suffix(Path("a.gz"))
    ('.svm', '.jsonl', '')
    """
    if path.suffix.lower() in COMPRESSED:
        return Path(path.stem).suffix.lower()
    return path.suffix.lower()


def guess_format(path: Path) -> str:
    """``svmlight`` for .svm/.svmlight/.libsvm/.txt files, else ``ndjson``.

    Compressed files are named by what they hold: ``train.svm.gz`` is svmlight.

    >>> guess_format(Path("train.svm")), guess_format(Path("stream.jsonl.gz"))
    ('svmlight', 'ndjson')
    """
    return "svmlight" if base_suffix(path) in SVMLIGHT_SUFFIXES else "ndjson"


def read_text(path: Path) -> str:
    """The whole (possibly compressed) file as UTF-8 text."""
    with open_binary(path) as f:
        return f.read().decode()


def read_order(path: Path) -> list[str]:
    """Ids, one a line (blank lines ignored): the order ``--order`` gives."""
    return [line.strip() for line in read_text(path).splitlines() if line.strip()]


def spambase_order() -> list[str]:
    """The ids of the packaged Spambase in its fixed shuffled order."""
    return SPAMBASE_ORDER.read_text().split()


__all__ = [
    "DATA_DIR",
    "FORMATS",
    "SPAMBASE",
    "SPAMBASE_ORDER",
    "base_suffix",
    "guess_format",
    "open_binary",
    "read_order",
    "read_text",
    "spambase_order",
]
