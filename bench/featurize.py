"""Text featurizing speed: the compiled path against the Python reference
(``compiled_text=False``, which also checks word lengths in Python, so it is slower than the
Python path the compiled one replaced), and ``streamlearn evaluate --preset spam`` on short
messages end to end.

    python bench/featurize.py [--examples 100000] [--rounds 5] [--no-evaluate]

Short messages are synthetic, SMS-sized (20–160 characters: words, numbers, URLs, amounts,
upper-case runs, accents and emoji), generated from a fixed seed; nothing is read from outside
the repository. Prints medians over ``--rounds`` (CPU time of the featurizer on 1,000-message
batches; wall time of whole ``evaluate`` runs); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_VOCABULARY = """the you to and is for are call now free your have txt text win claim prize reply
stop please send mobile week just will get can ok love home later sorry lunch meeting see
tomorrow tonight cash won urgent offer service customer guaranteed award ringtone voucher draw
chance today going good time need want know think café déjà naïve über"""
WORDS = _VOCABULARY.split()
EXTRAS = ["😀", "👍", "£100", "$5.99", "€20", "08001234567", "87121", "http://bit.ly/x1",
          "www.win-now.com", "FREE", "URGENT!", "WIN", "2nd", "T&C's", "16+", "..."]  # fmt: skip


def messages(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        spam = rng.random() < 0.3
        k = rng.randint(4, 28)
        toks = [rng.choice(EXTRAS) if rng.random() < (0.25 if spam else 0.05) else
                rng.choice(WORDS[:40] if spam else WORDS[20:]) for _ in range(k)]  # fmt: skip
        text = " ".join(toks)[:160]
        if rng.random() < 0.3:
            text = text.capitalize()
        out.append({"id": f"m{i}", "text": text, "label": "spam" if spam else "ham"})
    return out


TEXTS = {
    "words": {"word_ngrams": [1, 1], "char_ngrams": None},
    "words + char 4-grams": {"word_ngrams": [1, 1], "char_ngrams": [4, 4]},
    "words + char 3..5-grams": {"word_ngrams": [1, 1], "char_ngrams": [3, 5]},
}


def featurizer_rates(data: list[dict[str, Any]], rounds: int) -> list[tuple[str, float, float]]:
    sys.path.insert(0, str(ROOT))
    from service.learning.spec import ModelSpec

    batches = [data[i : i + 1000] for i in range(0, min(len(data), 20_000), 1000)]
    n = sum(len(b) for b in batches)
    out = []
    for label, text in TEXTS.items():
        spec = ModelSpec.from_dict({"preset": "spam", "classes": ["ham", "spam"], "text": text})
        rates = []
        for compiled in (False, True):
            f = spec.featurizer(compiled_text=compiled)
            f.transform(batches[0])  # warm caches and the compiled code
            times = []
            for _ in range(rounds):
                t0 = time.process_time()
                for b in batches:
                    f.transform(b)
                times.append(time.process_time() - t0)
            rates.append(n / statistics.median(times))
        out.append((label, rates[0], rates[1]))
    return out


def evaluate_rates(path: Path, rounds: int) -> list[tuple[str, float, float]]:
    out = []
    for label, text in TEXTS.items():
        cmd = [sys.executable, "-m", "service.cli", "evaluate", str(path), "--preset", "spam",
               "--classes", "ham,spam", "--text", json.dumps(text), "--json"]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)  # warm the numba cache
        runs = []
        for _ in range(rounds):
            done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
            runs.append(json.loads(done.stdout))
        rate = statistics.median(r["examples_per_s"] for r in runs)
        learn = statistics.median(r["examples"] / r["learn_seconds"] for r in runs)
        out.append((label, rate, learn))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-evaluate", action="store_true")
    args = ap.parse_args()
    data = messages(args.examples)
    mean = statistics.mean(len(d["text"]) for d in data)
    print(f"{len(data):,} synthetic short messages, {mean:.0f} characters on average\n")
    print("featurizer, 1,000-message batches, CPU time, median of", args.rounds, "rounds:")
    print(f"  {'text options':<28} {'reference':>12} {'compiled':>12} {'ratio':>7}")
    for label, py, comp in featurizer_rates(data, args.rounds):
        print(f"  {label:<28} {py:>10,.0f}/s {comp:>10,.0f}/s {comp / py:>6.1f}x")
    if args.no_evaluate:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "short.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in data))
        print(f"\nstreamlearn evaluate FILE --preset spam (whole run; median of {args.rounds}):")
        print(f"  {'text options':<28} {'messages/s':>12} {'learning alone':>15}")
        for label, rate, learn in evaluate_rates(path, args.rounds):
            print(f"  {label:<28} {rate:>10,.0f}/s {learn:>13,.0f}/s")


if __name__ == "__main__":
    main()
