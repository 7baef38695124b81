"""The data shipped in the package, and compressed files read as they are."""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import lzma
import re
import tomllib
from pathlib import Path

import orjson
import pytest

from service.cli.datasets import (
    SPAMBASE,
    SPAMBASE_ORDER,
    guess_format,
    open_binary,
    read_text,
    spambase_order,
)
from service.cli.replay import find_spambase, read_lines

ROOT = Path(__file__).resolve().parents[1]


def test_spambase_ships_in_the_package_with_its_source() -> None:
    lines = read_text(SPAMBASE).splitlines()
    assert len(lines) == 4601
    rows = [orjson.loads(x) for x in lines]
    assert sum(r["label"] == "spam" for r in rows) == 1813
    assert sorted(spambase_order()) == sorted(r["id"] for r in rows)
    source = (SPAMBASE.parent / "SOURCE.md").read_text()
    for needed in ("UCI", "CC BY 4.0", "Hopkins", "10.24432/C53G6X"):
        assert needed in source


def test_package_data_declares_every_shipped_data_file() -> None:
    """What ``pip install .`` or a wheel carries: each file in service/data matches a
    package-data pattern of pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service"]
    for path in (SPAMBASE, SPAMBASE_ORDER, SPAMBASE.parent / "SOURCE.md"):
        relative = path.relative_to(ROOT / "service").as_posix()
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), relative


def test_the_demo_finds_the_packaged_copy_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_spambase() == (SPAMBASE, SPAMBASE_ORDER)
    with pytest.raises(FileNotFoundError, match="leave out --data"):
        find_spambase(tmp_path)


def test_no_code_or_test_reads_data_outside_the_repository() -> None:
    """A user's clone has no shared data folder beside it."""
    offenders = []
    for folder in ("service", "workers", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text()
            if re.search(r"""["']shared["']\s*/|\.\./shared""", text):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)],
)
def test_compressed_files_are_read_as_they_are(tmp_path: Path, suffix: str, compress) -> None:  # type: ignore[no-untyped-def]
    plain = b'{"features": {"a": 1}, "label": 1}\n\n{"text": "hi", "label": -1}\n'
    path = tmp_path / f"mail.jsonl{suffix}"
    path.write_bytes(compress(plain))
    with open_binary(path) as f:
        assert f.read() == plain
    assert guess_format(path) == "ndjson"
    assert guess_format(tmp_path / f"mail.svm{suffix}") == "svmlight"
    assert read_lines(path, "ndjson") == [
        b'{"features": {"a": 1}, "label": 1}',
        b'{"text": "hi", "label": -1}',
    ]
