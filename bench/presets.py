"""The first, synthetic study of the ``spam`` preset: progressive error and ROC AUC of candidate
specs on Spambase (numeric features, shuffled order) and on synthetic text spam streams
(``bench/textgen.py``), printed as markdown tables. The preset is now chosen on real text
against Vowpal Wabbit, River and scikit-learn by ``bench/quality.py`` (``docs/presets.md``).

    python bench/presets.py [--text-examples 20000] [--seeds 0 1]

Every number is progressive validation (predict, then learn, one example at a time in
effect) through :func:`service.cli.evaluate.evaluate_file`, exactly what ``streamlearn evaluate``
prints; (1−ROCA)% is the TREC spam track's figure, 100·(1 − AUC).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from textgen import SpamStream  # noqa: E402

from service.cli.evaluate import evaluate_file  # noqa: E402

SPAMBASE = ROOT / "service" / "data" / "spambase.jsonl.gz"  # shipped in the package
WORDS_CHARS = {"word_ngrams": [1, 1], "char_ngrams": [4, 4], "binary": True, "normalize": True}

# (label, options for evaluate_file). Text options apply to the text stream; every candidate
# runs on Spambase with its algorithm and the value transform named in the label.
CANDIDATES: list[tuple[str, dict[str, Any]]] = [
    ("pa1 C=1, words", {"algorithm": "pa1", "text": {"char_ngrams": None}}),
    ("pa1 C=1, char 4-grams", {"algorithm": "pa1", "text": {"word_ngrams": None, "char_ngrams": [4, 4]}}),
    ("pa1 C=1, words+char4", {"algorithm": "pa1", "text": WORDS_CHARS}),
    ("pa1 C=1, words+char4, counts", {"algorithm": "pa1", "text": {**WORDS_CHARS, "binary": False}}),
    ("pa1 C=1, words+char4, no L2", {"algorithm": "pa1", "text": {**WORDS_CHARS, "normalize": False}}),
    ("pa1 C=0.1, words+char4", {"algorithm": "pa1", "params": {"C": 0.1}, "text": WORDS_CHARS}),
    ("pa2 C=0.1, words+char4", {"algorithm": "pa2", "params": {"C": 0.1}, "text": WORDS_CHARS}),
    ("perceptron, words+char4", {"algorithm": "perceptron", "text": WORDS_CHARS}),
    ("averaged perceptron, words+char4", {"algorithm": "averaged_perceptron", "text": WORDS_CHARS}),
    ("mira margin=1 (thick threshold), words+char4",
     {"algorithm": "mira", "params": {"margin": 1.0}, "text": WORDS_CHARS}),
    ("logistic lr=0.1, words+char4", {"algorithm": "logistic", "text": WORDS_CHARS}),
    ("logistic lr=0.5, words+char4", {"algorithm": "logistic", "params": {"lr": 0.5}, "text": WORDS_CHARS}),
    ("pegasos lam=1e-4, words+char4", {"algorithm": "pegasos", "params": {"bias": True}, "text": WORDS_CHARS}),
    ("adagrad lr=0.5 logistic, words+char4", {"algorithm": "adagrad", "text": WORDS_CHARS}),
    ("adagrad lr=0.5 logistic, no bias", {"algorithm": "adagrad", "params": {"bias": False}, "text": WORDS_CHARS}),
    ("adagrad lr=1 logistic, words+char4", {"algorithm": "adagrad", "params": {"lr": 1.0}, "text": WORDS_CHARS}),
    ("adagrad lr=0.5 hinge, words+char4", {"algorithm": "adagrad", "params": {"loss": "hinge"}, "text": WORDS_CHARS}),
    ("adagrad lr=0.2 logistic, words+char4", {"algorithm": "adagrad", "params": {"lr": 0.2}, "text": WORDS_CHARS}),
    ("adagrad lr=0.5 logistic, words", {"algorithm": "adagrad", "text": {**WORDS_CHARS, "char_ngrams": None}}),
    ("adagrad lr=0.5 logistic, char4", {"algorithm": "adagrad", "text": {**WORDS_CHARS, "word_ngrams": None}}),
    ("adagrad lr=0.5 logistic, words 1-2 + char4",
     {"algorithm": "adagrad", "text": {**WORDS_CHARS, "word_ngrams": [1, 2]}}),
    ("adagrad lr=0.5 logistic, words + char 3-5",
     {"algorithm": "adagrad", "text": {**WORDS_CHARS, "char_ngrams": [3, 5]}}),
    ("adagrad lr=0.5 logistic, words+char4, no L2",
     {"algorithm": "adagrad", "text": {**WORDS_CHARS, "normalize": False}}),
]  # fmt: skip


def run(path: Path, opts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    r = evaluate_file(path, classes=["ham", "spam"], bits=20, **opts, **extra)
    return {
        "err": 100.0 * r.mistake_rate,
        "auc": r.auc,
        "roca": r.one_minus_auc_percent,
        "ex_s": r.examples_per_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--text-examples", type=int, default=20_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--only", help="run only candidates whose label contains this")
    args = ap.parse_args()
    candidates = [c for c in CANDIDATES if not args.only or args.only in c[0]]
    with tempfile.TemporaryDirectory() as tmp:
        streams = []
        for seed in args.seeds:
            path = Path(tmp) / f"text-{seed}.jsonl"
            with path.open("w") as fh:
                import json

                for ex in SpamStream(seed).examples(args.text_examples):
                    fh.write(json.dumps(ex) + "\n")
            streams.append((seed, path))
        head = (
            "| candidate | "
            + " | ".join(f"text s{seed} err % | (1−ROCA)%" for seed, _ in streams)
            + " | Spambase err % (none / log1p) | Spambase (1−ROCA)% (none / log1p) |"
        )
        print(head)
        print("|" + "---|" * (1 + 2 * len(streams) + 2))
        for label, opts in candidates:
            cells = []
            for _, path in streams:
                m = run(path, opts)
                cells += [f"{m['err']:.2f}", f"{m['roca']:.3f}"]
            sb = {}
            numeric = {k: v for k, v in opts.items() if k != "text"}
            for transform in ("none", "log1p"):
                sb[transform] = run(
                    SPAMBASE,
                    numeric,
                    transform=transform,
                    order=SPAMBASE.with_name("spambase_order.txt"),
                )
            cells.append(f"{sb['none']['err']:.2f} / {sb['log1p']['err']:.2f}")
            cells.append(f"{sb['none']['roca']:.3f} / {sb['log1p']['roca']:.3f}")
            print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
