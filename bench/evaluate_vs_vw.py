"""Whole-process time of ``streamlearn evaluate`` on an svmlight file vs Vowpal Wabbit reading
the same examples from a file (its own text format), plus the featurizer's throughput.

    python bench/evaluate_vs_vw.py [--examples 200000] [--nnz 100] [--bits 18]

Prints a table; nothing is asserted. VW runs through its Python package's C++ driver
(``Workspace("-d FILE ...")``), so its time includes process start, parsing and learning, as
``streamlearn evaluate``'s does (which also includes the interpreter and numba cache load).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_files(tmp: Path, n: int, nnz: int, bits: int, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    dim = 2**bits
    w = rng.normal(size=dim)
    svm_lines, vw_lines = [], []
    for _ in range(n):
        idx = np.sort(rng.choice(dim, size=nnz, replace=False))
        val = np.round(rng.random(nnz), 4)
        y = 1 if float(w[idx] @ val) + rng.normal() * 0.5 > 0 else -1
        feats = " ".join(f"{i}:{v:g}" for i, v in zip(idx.tolist(), val.tolist(), strict=True))
        svm_lines.append(f"{y} {feats}")
        vw_lines.append(f"{y} | {feats}")
    svm, vw = tmp / "data.svm", tmp / "data.vw"
    svm.write_text("\n".join(svm_lines) + "\n")
    vw.write_text("\n".join(vw_lines) + "\n")
    return svm, vw


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def featurizer_rates(batches: int = 20) -> list[tuple[str, float]]:
    sys.path.insert(0, str(ROOT))
    from service.learning.spec import ModelSpec

    rng = random.Random(0)
    out = []
    names = [f"feature_{i}" for i in range(100)]
    fixed = [{"features": {k: rng.random() for k in names}, "label": 1} for _ in range(1000)]
    vocab = [f"f{i}" for i in range(20_000)]
    varied = [
        {"features": {k: rng.random() for k in rng.sample(vocab, 100)}, "label": 1}
        for _ in range(1000)
    ]
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9)))
             for _ in range(5000)]  # fmt: skip
    texts = [{"text": " ".join(rng.choice(words) for _ in range(60)), "label": 1}
             for _ in range(1000)]  # fmt: skip
    named = ModelSpec.from_dict({"algorithm": "pa1"}).featurizer()
    spam = ModelSpec.from_dict({"preset": "spam"}).featurizer()
    chars = ModelSpec.from_dict({"preset": "spam", "text": {"char_ngrams": [4, 4]}}).featurizer()
    for label, f, data in (
        ("100 named features, one schema", named, fixed),
        ("100 named features, random names", named, varied),
        ("text, 60 words (spam preset: word unigrams)", spam, texts),
        ("text, 60 words, word unigrams + char 4-grams", chars, texts),
    ):
        f.transform(data)
        best = float("inf")  # best of 5 rounds, in CPU time: robust on a shared machine
        for _ in range(5):
            t0 = time.process_time()
            for _ in range(batches // 5 or 1):
                f.transform(data)
            best = min(best, (time.process_time() - t0) / (batches // 5 or 1))
        out.append((label, len(data) / best))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=200_000)
    ap.add_argument("--nnz", type=int, default=100)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--featurizer-only", action="store_true")
    args = ap.parse_args()
    print("featurizer (1,000-example batches, one process, CPU time):")
    for label, rate in featurizer_rates():
        print(f"  {label:<55} {rate:>12,.0f} examples/s")
    if args.featurizer_only:
        return
    with tempfile.TemporaryDirectory() as tmp:
        svm, vw = write_files(Path(tmp), args.examples, args.nnz, args.bits)
        mb = svm.stat().st_size / 1e6
        print(f"\n{args.examples:,} examples x {args.nnz} non-zeros ({mb:.0f} MB svmlight):")
        ours = [sys.executable, "-m", "service.cli", "evaluate", str(svm), "-a", "pa1", "--json"]
        rows = []
        timed([*ours, "--no-auc"])  # warm the numba cache
        rows.append(("streamlearn evaluate -a pa1 --no-auc", timed([*ours, "--no-auc"])))
        rows.append(("streamlearn evaluate -a pa1 (exact progressive AUC)", timed(ours)))
        try:
            import vowpalwabbit  # noqa: F401

            code = (
                "from vowpalwabbit import Workspace; "
                f"w = Workspace('-d {vw} -b {args.bits} --binary --quiet --no_stdin'); w.finish()"
            )
            rows.append(
                ("Vowpal Wabbit -d FILE --binary (python -c)", timed([sys.executable, "-c", code]))
            )
        except ImportError:
            print("  (vowpalwabbit not installed)")
        for label, seconds in rows:
            print(f"  {label:<55} {seconds:8.2f} s  {args.examples / seconds:>12,.0f} examples/s")


if __name__ == "__main__":
    main()
