"""Whole-process time of ``streamlearn evaluate`` on an svmlight file vs Vowpal Wabbit's CLI
reading the same examples from a file (its own text format), plus the featurizer's throughput.

    python bench/evaluate_vs_vw.py [--examples 100000] [--nnz 100] [--bits 18] [--runs 7]
        [--skip-featurizer] [--other-tree DIR]   # DIR: e.g. `git worktree add DIR <commit>`

Each command is a whole process, run ``--runs`` times after one warm-up (the numba cache is
warm, the files are in the page cache), alternating between the commands so that load on a
shared machine falls on all of them alike. Prints the median wall time and the median CPU time
(user + system of the child) of each, and each one's ratio to VW; nothing is asserted. VW runs
as ``python -m vowpalwabbit -d FILE -b BITS --binary --quiet --no_stdin`` (its C++ driver: process
start, parsing and learning), as ``streamlearn evaluate`` includes the interpreter, imports
and numba's cache load.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
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


def timed(cmd: list[str], cwd: Path = ROOT) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one whole-process run in ``cwd``."""
    before = os.times()
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return wall, cpu


def side_by_side(
    commands: dict[str, tuple[list[str], Path]], runs: int
) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) of each (command, cwd), the runs interleaved, after a warm-up each."""
    for cmd, cwd in commands.values():
        timed(cmd, cwd)
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in commands}
    for _ in range(runs):
        for label, (cmd, cwd) in commands.items():
            samples[label].append(timed(cmd, cwd))
    return {
        label: (statistics.median(w for w, _ in xs), statistics.median(c for _, c in xs))
        for label, xs in samples.items()
    }


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
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--nnz", type=int, default=100)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--runs", type=int, default=7, help="timed runs of each command")
    ap.add_argument("--featurizer-only", action="store_true")
    ap.add_argument("--skip-featurizer", action="store_true")
    ap.add_argument(
        "--other-tree",
        type=Path,
        help="also time `streamlearn evaluate` from this checkout (e.g. an older commit's)",
    )
    args = ap.parse_args()
    if not args.skip_featurizer:
        print("featurizer (1,000-example batches, one process, CPU time):")
        for label, rate in featurizer_rates():
            print(f"  {label:<55} {rate:>12,.0f} examples/s")
    if args.featurizer_only:
        return
    with tempfile.TemporaryDirectory() as tmp:
        svm, vw = write_files(Path(tmp), args.examples, args.nnz, args.bits)
        mb = svm.stat().st_size / 1e6
        ours = [sys.executable, "-m", "service.cli", "evaluate", str(svm), "-a", "pa1", "--json"]
        commands: dict[str, tuple[list[str], Path]] = {
            "python -c pass (interpreter start, for scale)": ([sys.executable, "-c", "pass"], ROOT),
            "streamlearn evaluate -a pa1 --no-auc": ([*ours, "--no-auc"], ROOT),
            "streamlearn evaluate -a pa1 (exact progressive AUC)": (ours, ROOT),
        }
        if args.other_tree is not None:  # python -m runs the package of its working directory
            other = args.other_tree.resolve()
            commands["  the same, from --other-tree, --no-auc"] = ([*ours, "--no-auc"], other)
            commands["  the same, from --other-tree (AUC)"] = (ours, other)
        vw_label = "python -m vowpalwabbit -d FILE --binary"
        try:
            import vowpalwabbit  # noqa: F401

            commands[vw_label] = ([
                sys.executable, "-m", "vowpalwabbit", "-d", str(vw), "-b", str(args.bits),
                "--binary", "--quiet", "--no_stdin",
            ], ROOT)  # fmt: skip
        except ImportError:
            print("  (vowpalwabbit not installed: pip install vowpalwabbit)")
        medians = side_by_side(commands, args.runs)
    print(
        f"\n{args.examples:,} examples x {args.nnz} non-zeros ({mb:.0f} MB svmlight), "
        f"whole processes, median of {args.runs} (load average {os.getloadavg()[0]:.1f}):"
    )
    print(f"  {'command':<55} {'wall s':>7} {'CPU s':>7} {'wall/VW':>8} {'CPU/VW':>7}")
    ref = medians.get(vw_label)
    for label, (wall, cpu) in medians.items():
        ratio = f"{wall / ref[0]:8.2f} {cpu / ref[1]:7.2f}" if ref else ""
        print(f"  {label:<55} {wall:7.2f} {cpu:7.2f} {ratio}")


if __name__ == "__main__":
    main()
