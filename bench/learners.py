"""Learner benchmark: our compiled binary learners against River, scikit-learn and Vowpal Wabbit.

Progressive validation everywhere (predict, then learn, example after example), on three
streams:

* ``uniform`` — ``--n`` examples (200,000), ~``--nnz`` (100) distinct features each drawn
  uniformly from ``2**--bits`` (2**18) buckets, values N(0, 0.1²), labels from a dense random
  hyperplane with a little noise. Worst case for the cache (every weight read is a random
  access into a 2 MB vector) and nearly unlearnable (each weight is seen ~76 times), so the
  update path runs on almost every other example.
* ``zipf`` — the same sizes, but features drawn Zipf(1.1)-distributed over the buckets (as
  words are in text) and labels from a sparse hyperplane over the 2,000 most frequent
  features with 5 % label noise: learnable, text-like.
* ``spambase`` — the 4,601 Spambase messages in their shuffled order (57 dense features).

For each of our algorithms: examples/s of ``learner.learn(batch)`` over the whole stream
(compiled, one core, arrays already in memory: no parsing), median of ``--repeats`` fresh
runs after a warm-up that compiles the kernels; and its mistakes. Baselines:

* River ``Perceptron`` and ``PAClassifier(C=1, mode=1)``: ``learn_one`` alone is timed on the
  first ``--river-sample`` examples and extrapolated (River's speed does not depend on n);
  mistakes come from a separate predict-then-learn pass over the same subsample.
* scikit-learn ``SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1")`` —
  ``partial_fit`` one example at a time on ``--sk-sample`` examples (extrapolated), and in
  mini-batches of ``--minibatch`` over the whole stream (predict the mini-batch, then learn
  it: progressive at mini-batch granularity).
* Vowpal Wabbit (``pip install vowpalwabbit``), if importable: its C++ driver reads an
  svmlight-like text file itself, so its time *includes parsing* (ours does not); default
  learner (adaptive, normalised, invariant updates on squared loss) with ``--binary``.

Run from the repository root::

    python3 bench/learners.py                 # everything (~10 minutes on the shared 2-core VM)
    python3 bench/learners.py --n 20000 --repeats 1 --streams spambase   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.cli.datasets import SPAMBASE, SPAMBASE_ORDER, read_text
from service.learning.features import Batch
from service.learning.registry import algorithms, make_learner

# --------------------------------------------------------------------------------------------
# Streams


def _csr(idx: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of (sorted) indices with duplicates dropped, as CSR arrays."""
    keep = np.ones(idx.shape, dtype=bool)
    keep[:, 1:] = idx[:, 1:] != idx[:, :-1]
    indptr = np.zeros(idx.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    return indptr, idx[keep].astype(np.int32), val[keep]


def uniform_stream(n: int, bits: int, nnz: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    dim = 1 << bits
    idx = np.sort(rng.integers(0, dim, size=(n, nnz)), axis=1)
    indptr, indices, data = _csr(idx, rng.normal(scale=0.1, size=(n, nnz)))
    truth = rng.normal(size=dim)
    margin = np.add.reduceat(truth[indices] * data, indptr[:-1])
    y = (margin + 0.05 * rng.normal(size=n) > 0).astype(np.int32)
    return Batch(indptr, indices, data, y)


def zipf_stream(n: int, bits: int, nnz: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    dim = 1 << bits
    ranks = np.minimum(rng.zipf(1.1, size=(n, nnz * 2)), dim) - 1
    perm = rng.permutation(dim)
    bucket = perm[ranks]  # frequent "words" land on scattered buckets
    idx = np.sort(bucket, axis=1)
    indptr, indices, data = _csr(idx, np.abs(rng.normal(size=idx.shape)) * 0.2)
    # keep ~nnz distinct features per row (the Zipf draw repeats frequent words)
    lengths = np.minimum(np.diff(indptr), nnz)
    rows = [
        (indices[a : a + k], data[a : a + k]) for a, k in zip(indptr[:-1], lengths, strict=True)
    ]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate([r[0] for r in rows])
    data = np.concatenate([r[1] for r in rows])
    truth = np.zeros(dim)
    frequent = perm[: min(2000, dim)]  # the 2,000 most frequent words carry the label
    truth[frequent] = rng.normal(size=frequent.shape[0])
    margin = np.add.reduceat(truth[indices] * data, indptr[:-1])
    y = (margin > np.median(margin)).astype(np.int32)
    flip = rng.random(n) < 0.05
    y[flip] = 1 - y[flip]
    return Batch(indptr, indices, data, y)


def spambase_stream() -> Batch | None:
    path, order = SPAMBASE, SPAMBASE_ORDER
    if not path.exists() or not order.exists():
        return None
    recs = {}
    for line in read_text(path).splitlines():
        if line.strip():
            rec = json.loads(line)
            recs[rec["id"]] = rec
    names = sorted({k for rec in recs.values() for k in rec["features"]})
    index = {k: i for i, k in enumerate(names)}
    rows, ys = [], []
    for ident in order.read_text().split():
        feats = recs[ident]["features"]
        rows.append(([index[k] for k in feats], [float(v) for v in feats.values()]))
        ys.append(int(recs[ident]["label"] == "spam"))
    return Batch.from_rows(rows, ys)


# --------------------------------------------------------------------------------------------
# Measurements


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median over ``repeats`` runs of the process's CPU time (``time.process_time``: all its
    threads, and only them), so other work on a shared machine distorts the figure less
    than wall time would; it still shares caches and memory bandwidth with that work."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.process_time()
        result = fn()
        times.append(time.process_time() - t0)
    return statistics.median(times), result


def ours(batch: Batch, dim: int, name: str, repeats: int) -> dict[str, Any]:
    make_learner(name, dim, 2, {}).learn(batch.slice(0, min(batch.n, 50)))  # compile/load

    def run() -> int:
        learner = make_learner(name, dim, 2, {})
        learner.learn(batch)
        return learner.mistakes

    seconds, mistakes = median_time(run, repeats)
    return {"rate": batch.n / seconds, "mistakes": mistakes, "n": batch.n}


def read_bound(batch: Batch, dim: int, repeats: int) -> dict[str, Any]:
    """Margins ``w·x + b`` alone over the stream (compiled): the floor under any learner's
    time, since each must at least read its weights once per feature."""
    from service.learning._kernels import csr_margins

    w = np.random.default_rng(0).normal(size=dim)
    csr_margins(batch.indptr[:2], batch.indices, batch.data, w, 0.0)
    seconds, _ = median_time(
        lambda: csr_margins(batch.indptr, batch.indices, batch.data, w, 0.0), repeats
    )
    return {"rate": batch.n / seconds, "mistakes": 0, "n": batch.n}


def river_rows(batch: Batch, k: int) -> tuple[list[dict[int, float]], list[bool]]:
    xs, ys = [], []
    for i in range(min(k, batch.n)):
        lo, hi = batch.indptr[i], batch.indptr[i + 1]
        xs.append(dict(zip(batch.indices[lo:hi].tolist(), batch.data[lo:hi].tolist(), strict=True)))
        ys.append(bool(batch.y[i] == 1))
    return xs, ys


def river(batch: Batch, which: str, sample: int, repeats: int) -> dict[str, Any]:
    from river import linear_model

    def model() -> Any:
        if which == "perceptron":
            return linear_model.Perceptron()
        return linear_model.PAClassifier(C=1.0, mode=1)

    xs, ys = river_rows(batch, sample)

    def learn_only() -> None:
        m = model()
        for x, y in zip(xs, ys, strict=True):
            m.learn_one(x, y)

    seconds, _ = median_time(learn_only, repeats)
    m, mistakes = model(), 0
    for x, y in zip(xs, ys, strict=True):
        mistakes += m.predict_one(x) != y
        m.learn_one(x, y)
    return {"rate": len(xs) / seconds, "mistakes": mistakes, "n": len(xs)}


def sklearn_one(batch: Batch, dim: int, sample: int, repeats: int) -> dict[str, Any]:
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import SGDClassifier

    k = min(sample, batch.n)
    X = csr_matrix((batch.data, batch.indices, batch.indptr), shape=(batch.n, dim))[:k]
    rows = [X[i] for i in range(k)]
    y = batch.y[:k]

    def run() -> int:
        clf = SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0)
        mistakes = 0
        for i in range(k):
            if i:
                mistakes += int(clf.predict(rows[i])[0] != y[i])
            else:
                mistakes += int(y[0] == 1)  # an unfitted model: predict the negative class
            clf.partial_fit(rows[i], y[i : i + 1], classes=[0, 1])
        return mistakes

    seconds, mistakes = median_time(run, repeats)
    return {"rate": k / seconds, "mistakes": mistakes, "n": k}


def sklearn_batches(batch: Batch, dim: int, size: int, repeats: int) -> dict[str, Any]:
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import SGDClassifier

    X = csr_matrix((batch.data, batch.indices, batch.indptr), shape=(batch.n, dim))

    def run() -> int:
        clf = SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0)
        mistakes = 0
        for a in range(0, batch.n, size):
            Xb, yb = X[a : a + size], batch.y[a : a + size]
            if a:
                mistakes += int(np.sum(clf.predict(Xb) != yb))
            else:
                mistakes += int(np.sum(yb == 1))
            clf.partial_fit(Xb, yb, classes=[0, 1])
        return mistakes

    seconds, mistakes = median_time(run, repeats)
    return {"rate": batch.n / seconds, "mistakes": mistakes, "n": batch.n}


def vowpal(batch: Batch, bits: int, repeats: int) -> dict[str, Any] | None:
    try:
        from vowpalwabbit import Workspace
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.vw")
        with open(path, "w") as fh:
            for i in range(batch.n):
                lo, hi = batch.indptr[i], batch.indptr[i + 1]
                feats = " ".join(
                    f"{j}:{v:.17g}"
                    for j, v in zip(batch.indices[lo:hi], batch.data[lo:hi], strict=True)
                )
                fh.write(f"{1 if batch.y[i] == 1 else -1} | {feats}\n")

        def run() -> float:
            vw = Workspace(f"-d {path} -b {bits} --binary --quiet --no_stdin")
            loss = vw.get_sum_loss()
            vw.finish()
            return float(loss)

        seconds, loss = median_time(run, repeats)
    return {"rate": batch.n / seconds, "mistakes": round(loss), "n": batch.n}


# --------------------------------------------------------------------------------------------
# Report


def fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M/s" if r >= 1e6 else f"{r / 1e3:.1f} k/s"


def table(title: str, rows: list[tuple[str, dict[str, Any], str]], river_rate: float | None) -> str:
    out = [f"\n### {title}\n", "| learner | examples/s | × River Perceptron | mistakes | on | note |",
           "|---|---:|---:|---:|---:|---|"]  # fmt: skip
    for name, r, note in rows:
        ratio = "–"
        if river_rate:
            x = r["rate"] / river_rate
            ratio = f"{x:,.0f}×" if x >= 10 else f"{x:.2g}×"
        rate = r["mistakes"] / r["n"] if r["n"] else 0.0
        out.append(
            f"| {name} | {fmt_rate(r['rate'])} | {ratio} | {r['mistakes']:,} ({rate:.1%}) "
            f"| {r['n']:,} | {note} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--bits", type=int, default=18)
    ap.add_argument("--nnz", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each of our learners")
    ap.add_argument("--baseline-repeats", type=int, default=3, help="runs of each baseline")
    ap.add_argument("--river-sample", type=int, default=20_000)
    ap.add_argument("--sk-sample", type=int, default=1_000)
    ap.add_argument("--minibatch", type=int, default=1_000)
    ap.add_argument("--streams", default="uniform,zipf,spambase")
    ap.add_argument("--no-baselines", action="store_true", help="only our learners")
    args = ap.parse_args()

    streams: dict[str, tuple[Batch, int, int]] = {}
    wanted = args.streams.split(",")
    if "uniform" in wanted:
        streams["uniform"] = (
            uniform_stream(args.n, args.bits, args.nnz),
            1 << args.bits,
            args.bits,
        )
    if "zipf" in wanted:
        streams["zipf"] = (zipf_stream(args.n, args.bits, args.nnz), 1 << args.bits, args.bits)
    if "spambase" in wanted and (sb := spambase_stream()) is not None:
        streams["spambase"] = (sb, 57, 6)

    print(
        f"# learners — median CPU time of {args.repeats} runs ({args.baseline_repeats} for "
        "baselines), one core, numba, "
        f"Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f} at start"
    )
    for label, (batch, dim, bits) in streams.items():
        nnz = batch.nnz / batch.n
        rows: list[tuple[str, dict[str, Any], str]] = []
        for name in algorithms(multiclass=False):
            rows.append((name, ours(batch, dim, name, args.repeats), "ours, learn(batch)"))
        rows.append(
            ("(w·x only: the read bound)", read_bound(batch, dim, args.repeats), "no learning")
        )
        river_rate = None
        if not args.no_baselines:
            rp = river(batch, "perceptron", args.river_sample, args.baseline_repeats)
            river_rate = rp["rate"]
            rows.append(("River Perceptron", rp, "learn_one, subsample, extrapolated"))
            rows.append(("River PAClassifier(mode=1)", river(batch, "pa1", args.river_sample,
                                                             args.baseline_repeats), "learn_one, subsample"))  # fmt: skip
            rows.append(("sklearn SGD pa1, 1 at a time", sklearn_one(batch, dim, args.sk_sample,
                                                                     args.baseline_repeats), "partial_fit, subsample"))  # fmt: skip
            rows.append((f"sklearn SGD pa1, batches of {args.minibatch}",
                         sklearn_batches(batch, dim, args.minibatch, args.baseline_repeats), "partial_fit"))  # fmt: skip
            vw = vowpal(batch, max(bits, 6), args.baseline_repeats)
            if vw is not None:
                rows.append(
                    ("Vowpal Wabbit (default, --binary)", vw, "C++, includes parsing a file")
                )
            else:
                print("\n(Vowpal Wabbit not installed: `pip install vowpalwabbit` to include it)")
        title = f"{label}: {batch.n:,} examples, {nnz:.1f} non-zeros/row, dim {dim:,}"
        print(table(title, rows, river_rate))


if __name__ == "__main__":
    main()
