"""What the ROC AUC costs ``streamlearn evaluate``: the default run (AUC on) against
``--no-auc`` on a generated svmlight file.

The served margins come out of the learning kernels (``Learner.learn(batch, margins=...)``),
so the AUC adds one array write per row in the kernel and a final rank sort; this prints the
wall time of the whole command (parse, learn, score) both ways, medians of ``--repeats``
interleaved runs, and the ratio.

Run from the repository root::

    python3 bench/evaluate_auc.py                          # 100,000 rows, pa1 and adagrad
    python3 bench/evaluate_auc.py --rows 20000 --repeats 3 --algorithms perceptron
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_svmlight(path: Path, rows: int, nnz: int, dim: int, seed: int = 0) -> None:
    """Sparse rows (``nnz`` distinct features of ``dim``), labels from a noisy hyperplane."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=dim)
    with path.open("w") as fh:
        for _ in range(rows):
            idx = np.sort(rng.choice(dim, size=nnz, replace=False))
            val = np.round(rng.normal(size=nnz), 4)
            y = 1 if truth[idx] @ val + 0.5 * rng.normal() > 0 else -1
            fh.write(f"{y} " + " ".join(f"{j}:{v}" for j, v in zip(idx, val, strict=True)) + "\n")


def run(path: Path, algorithm: str, auc: bool) -> float:
    cmd = [sys.executable, "-m", "service.cli", "evaluate", str(path), "--algorithm", algorithm,
           "--json"] + ([] if auc else ["--no-auc"])  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--nnz", type=int, default=30)
    ap.add_argument("--dim", type=int, default=1 << 18)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--algorithms", default="pa1,adagrad")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.svm"
        write_svmlight(path, args.rows, args.nnz, args.dim)
        print(f"# evaluate, AUC on vs --no-auc: {args.rows:,} rows x {args.nnz} features, "
              f"median wall time of {args.repeats} runs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
        print("\n| algorithm | AUC on (s) | --no-auc (s) | ratio |\n|---|---:|---:|---:|")
        for algorithm in args.algorithms.split(","):
            run(path, algorithm, True)  # warm the numba cache
            on, off = [], []
            for _ in range(args.repeats):
                on.append(run(path, algorithm, True))
                off.append(run(path, algorithm, False))
            a, b = statistics.median(on), statistics.median(off)
            print(f"| {algorithm} | {a:.3f} | {b:.3f} | {a / b:.3f}x |")


if __name__ == "__main__":
    main()
