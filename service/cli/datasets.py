"""Data shipped inside the package, and reading files that may be compressed.

Spambase (UCI, CC BY 4.0 — see ``service/data/SOURCE.md``) travels with the package, so
``streamlearn demo`` and the tests that learn real data work from any checkout or wheel.

``open_binary`` opens a file for reading, decompressing ``.gz``, ``.bz2`` and ``.xz`` by their
suffix, so ``evaluate`` and ``replay`` take compressed files as they are.

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


def read_text(path: Path) -> str:
    """The whole (possibly compressed) file as UTF-8 text."""
    with open_binary(path) as f:
        return f.read().decode()


def spambase_order() -> list[str]:
    """The ids of the packaged Spambase in its fixed shuffled order."""
    return SPAMBASE_ORDER.read_text().split()


__all__ = [
    "DATA_DIR",
    "SPAMBASE",
    "SPAMBASE_ORDER",
    "base_suffix",
    "open_binary",
    "read_text",
    "spambase_order",
]
