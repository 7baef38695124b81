"""A seeded synthetic text-spam stream: ham and spam vocabularies, noise, obfuscation, drift.

    python bench/textgen.py --examples 20000 --seed 0 > /tmp/textspam.jsonl

Each line is ``{"id": "t-000001", "text": "...", "label": "ham" | "spam"}``. What makes it a
fair test of a text spam filter rather than a toy:

- a large shared vocabulary (Zipf-distributed function and everyday words) that carries no
  signal, so the class words are a minority of every message;
- class vocabularies that overlap (ham borrows spam words — "free", "offer" — and spam
  borrows ham words), so single words are weak evidence;
- spammer obfuscation (``fr33``, ``v.i.a.g.r.a``, ``cllick``) whose rate grows over time
  (``--obfuscation`` scales it) — character n-grams can follow it, word unigrams cannot;
- drift: spam runs in *campaigns*, each with its own product words that appear, peak and
  fade, so the filter must keep learning; ham topics drift more slowly;
- label noise (``--noise``, default 3%) and a class prior that moves between 35% and 55% spam.

Everything comes from ``random.Random(seed)``: the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from collections.abc import Iterator

SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "te",
    "lu",
    "sa",
    "no",
    "be",
    "di",
    "fa",
    "go",
    "hu",
    "ji",
    "le",
    "ma",
    "ne",
    "pi",
    "qu",
    "ra",
    "si",
    "to",
    "vu",
    "we",
    "xi",
    "yo",
    "za",
    "an",
    "en",
    "in",
    "on",
    "un",
    "ar",
    "er",
    "ir",
    "or",
    "ur",
    "al",
    "el",
    "il",
    "ol",
    "ul",
]

SPAM_SEEDS = [
    "free",
    "offer",
    "winner",
    "cash",
    "prize",
    "click",
    "buy",
    "cheap",
    "discount",
    "viagra",
    "pills",
    "loan",
    "credit",
    "guaranteed",
    "risk",
    "urgent",
    "limited",
    "deal",
    "money",
    "bonus",
    "casino",
    "lottery",
    "unsubscribe",
    "order",
    "now",
    "save",
    "income",
    "investment",
    "crypto",
    "bitcoin",
    "refund",
    "claim",
    "exclusive",
]
HAM_SEEDS = [
    "meeting",
    "project",
    "report",
    "schedule",
    "team",
    "review",
    "lunch",
    "thanks",
    "attached",
    "draft",
    "family",
    "weekend",
    "call",
    "notes",
    "agenda",
    "budget",
    "deadline",
    "paper",
    "code",
    "deploy",
    "release",
    "question",
    "dinner",
    "kids",
    "trip",
    "photos",
    "minutes",
    "slides",
    "invoice",
    "feedback",
]


def _pseudo_words(rng: random.Random, count: int, lo: int = 2, hi: int = 4) -> list[str]:
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(lo, hi))))
    return sorted(words)


def _zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (k + 1) ** s for k in range(n)]


def _obfuscate(rng: random.Random, word: str) -> str:
    """A spammer's spelling: leet digits, inserted dots, or a doubled letter."""
    kind = rng.randrange(3)
    if kind == 0:
        table = str.maketrans({"e": "3", "i": "1", "o": "0", "a": "4", "s": "5"})
        return word.translate(table)
    if kind == 1:
        return ".".join(word)
    k = rng.randrange(len(word))
    return word[:k] + word[k] + word[k:]


class SpamStream:
    """The generator; iterate :meth:`examples` for dicts."""

    def __init__(
        self, seed: int = 0, noise: float = 0.03, campaign_len: int = 2500, obfuscation: float = 1.0
    ) -> None:
        if not 0.0 <= noise < 0.5:
            raise ValueError(f"noise must be in [0, 0.5), got {noise}")
        if campaign_len < 1:
            raise ValueError(f"campaign_len must be >= 1, got {campaign_len}")
        self.rng = random.Random(seed)
        self.noise = noise
        self.obfuscation = obfuscation
        self.campaign_len = campaign_len
        rng = self.rng
        self.common = _pseudo_words(rng, 3000)
        weights = _zipf_weights(len(self.common))
        self.common_cw = list(itertools.accumulate(weights))
        self.ham_words = HAM_SEEDS + _pseudo_words(rng, 400, 3, 5)
        self.spam_words = SPAM_SEEDS + _pseudo_words(rng, 400, 3, 5)
        self.campaign_pool = _pseudo_words(rng, 2000, 2, 3)

    def _campaign(self, t: int) -> list[str]:
        """The product words of the campaign running at time t (a fresh set every period)."""
        period = t // self.campaign_len
        local = random.Random(period * 7919 + 13)
        return local.sample(self.campaign_pool, 25)

    def examples(self, n: int) -> Iterator[dict[str, str]]:
        rng = self.rng
        for t in range(n):
            phase = t / max(n, 1)
            p_spam = 0.45 + 0.10 * (1 if (t // 3000) % 2 else -1)
            spam = rng.random() < p_spam
            length = max(5, int(rng.gauss(45, 18)))
            campaign = self._campaign(t)
            ham_drift = int(phase * 200)  # ham topics slide along the vocabulary slowly
            words: list[str] = []
            for _ in range(length):
                u = rng.random()
                if u < 0.70:
                    words.append(rng.choices(self.common, cum_weights=self.common_cw)[0])
                elif spam:
                    if u < 0.80:
                        words.append(rng.choice(campaign))
                    elif u < 0.95:
                        w = rng.choice(self.spam_words[:60])
                        if rng.random() < (0.15 + 0.5 * phase) * self.obfuscation:
                            w = _obfuscate(rng, w)
                        words.append(w)
                    else:
                        words.append(rng.choice(self.ham_words))
                else:
                    if u < 0.94:
                        lo = ham_drift % (len(self.ham_words) - 80)
                        words.append(rng.choice(self.ham_words[lo : lo + 80]))
                    else:
                        words.append(rng.choice(self.spam_words[:40]))
            if spam and rng.random() < 0.3:
                words.append(
                    rng.choice(["!!!", "$$$", "100%", "www." + rng.choice(campaign) + ".biz"])
                )
            label = spam if rng.random() >= self.noise else not spam
            yield {
                "id": f"t-{t + 1:06d}",
                "text": " ".join(words),
                "label": "spam" if label else "ham",
            }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--examples", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=0.03)
    ap.add_argument(
        "--obfuscation", type=float, default=1.0, help="scale of the obfuscation rate (0 = none)"
    )
    args = ap.parse_args(argv)
    out = sys.stdout
    for ex in SpamStream(args.seed, args.noise, obfuscation=args.obfuscation).examples(
        args.examples
    ):
        out.write(json.dumps(ex) + "\n")


if __name__ == "__main__":
    main()
