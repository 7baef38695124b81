"""``streamlearn evaluate``: the svmlight reader (exact values, errors by line), ROC AUC,
progressive semantics (chunking is invisible, AUC from the served margins), both formats
agree, the CLI through typer's runner and once through ``python -m service.cli``."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.evaluate import EvaluationError, evaluate_file, roc_auc
from service.cli.evaluate_command import parse_classes
from service.cli.svmlight import _POW10, _scan_plain, parse_svmlight, read_svmlight_file
from service.errors import MalformedBody
from service.learning.batch import Batch
from service.learning.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[1]


def write_stream(tmp: Path, n: int = 600, seed: int = 0, k: int = 2) -> tuple[Path, Path]:
    """The same random sparse stream as NDJSON (integer names, no hashing) and svmlight."""
    rng = random.Random(seed)
    w = [[rng.gauss(0, 1) for _ in range(30)] for _ in range(k)]
    nd, svm = [], []
    for i in range(n):
        idx = sorted(rng.sample(range(30), 6))
        val = [round(rng.uniform(-2, 2), 3) for _ in idx]
        scores = [sum(w[c][j] * v for j, v in zip(idx, val, strict=True)) for c in range(k)]
        y = max(range(k), key=lambda c: scores[c])
        if rng.random() < 0.1:
            y = rng.randrange(k)
        label = (1 if y == 1 else -1) if k == 2 else f"c{y}"
        nd.append(
            json.dumps(
                {
                    "id": f"ex-{i}",
                    "features": {str(j): v for j, v in zip(idx, val, strict=True)},
                    "label": label,
                }
            )
        )
        svm.append(f"{label} " + " ".join(f"{j}:{v}" for j, v in zip(idx, val, strict=True)))
    a, b = tmp / "stream.jsonl", tmp / "stream.svm"
    a.write_text("\n".join(nd) + "\n")
    b.write_text("\n".join(svm) + "\n")
    return a, b


# --- ROC AUC ------------------------------------------------------------------------------------


def test_roc_auc_matches_scikit_learn_with_ties() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 300))
        scores = rng.integers(-5, 5, size=n).astype(float)  # many ties
        y = rng.random(n) < 0.4
        if y.all() or not y.any():
            assert roc_auc(scores, y) is None
            continue
        assert roc_auc(scores, y) == pytest.approx(metrics.roc_auc_score(y, scores), abs=1e-12)


# --- the svmlight reader ------------------------------------------------------------------------


def test_svmlight_values_are_exactly_what_float_gives() -> None:
    rng = random.Random(1)
    tokens = [
        "0.64", "1e-3", "-2.5E+2", "3", "+7.", ".5", "0.1000000000000000055511151231257827",
        "123456789012345678", "1e22", "1e-22", "4.9e-300", "-0", "0.000000123", "9007199254740993",
    ]  # fmt: skip
    tokens += [repr(rng.uniform(-1e6, 1e6)) for _ in range(300)]
    tokens += [f"{rng.uniform(-10, 10):.{rng.randint(0, 12)}f}" for _ in range(300)]
    text = "\n".join(f"1 {i}:{t}" for i, t in enumerate(tokens)).encode()
    parsed = parse_svmlight(text)
    expected = [float(t) for t in tokens]
    nonzero = [(i, v) for i, v in enumerate(expected) if v != 0.0]
    assert parsed.indices.tolist() == [i for i, _ in nonzero]
    assert parsed.data.tolist() == [v for _, v in nonzero]  # bit for bit


def test_svmlight_fast_and_general_scans_agree_wherever_the_file_changes_style() -> None:
    """The usual rows (``LABEL IDX:VAL`` single-spaced, short decimals) take a fast scan; the
    first line that is anything else hands over to the general one. Every value is what
    ``float()`` gives, and the rows, labels and line numbers do not depend on where (or
    whether) the hand-over happens."""
    rng = random.Random(7)
    rows, expected = [], []
    for r in range(400):
        idx = sorted(rng.sample(range(1, 10**6), rng.randint(0, 8)))
        vals = [
            rng.choice(
                [
                    f"{rng.uniform(-1e3, 1e3):.{rng.randint(0, 11)}f}",
                    str(rng.randint(-(10**14), 10**14)),
                    f"+{rng.random():.4f}",
                    "-0",
                    # from row 200 on, 16 digits: the general scan takes over there
                    f"{rng.random():.{15 if r >= 200 else 14}f}",
                ]
            )
            for _ in idx
        ]
        label = rng.choice(["1", "-1", "+1", "0"])
        rows.append(f"{label} " + " ".join(f"{i}:{v}" for i, v in zip(idx, vals, strict=True)))
        expected.append(
            (float(label), [(i, float(v)) for i, v in zip(idx, vals, strict=True) if float(v)])
        )
    plain = "\n".join(r.rstrip() for r in rows)

    def check(text: str, first_line: int, gap_at: int | None = None) -> None:
        parsed = parse_svmlight(text.encode())
        assert parsed.label_values is not None
        assert parsed.label_values.tolist() == [y for y, _ in expected]
        for r, (_, feats) in enumerate(expected):
            lo, hi = parsed.indptr[r], parsed.indptr[r + 1]
            got = zip(parsed.indices[lo:hi].tolist(), parsed.data[lo:hi].tolist(), strict=True)
            assert list(got) == feats
        shift = [first_line + r + (gap_at is not None and r >= gap_at) for r in range(400)]
        assert parsed.lines.tolist() == shift

    check(plain, 0)  # fast scan up to the first 16-digit value, at row 200 or just after
    buf = np.frombuffer(plain.encode(), dtype=np.uint8)
    n = len(buf)
    fast_rows = _scan_plain(buf, np.empty((n, 3), np.int64), np.empty(n), np.empty(n, bool),
                            np.zeros(n + 1, np.int64), np.empty(n, np.int32), np.empty(n),
                            _POW10)[1]  # fmt: skip
    assert 200 <= fast_rows < 210
    check("# header\n" + plain, 1)  # general scan throughout
    lines = plain.split("\n")
    check("\n".join([*lines[:250], "# a comment mid-file", *lines[250:]]), 0, gap_at=250)
    # an error after the hand-over names its line; a name label after it keeps every token
    with pytest.raises(MalformedBody, match="line 302:"):
        parse_svmlight("\n".join([*lines[:300], "", "1 5:x"]).encode())
    named = parse_svmlight("\n".join([*lines[:300], "ham 1:1"]).encode())
    assert named.labels is not None and len(named.labels) == 301
    assert named.labels[:300] == [r.split(" ", 1)[0].encode() for r in lines[:300]]


def test_svmlight_files_plain_mapped_or_compressed_parse_alike(tmp_path: Path) -> None:
    import gzip

    _, svm = write_stream(tmp_path, n=200, seed=3)
    zipped = tmp_path / "stream.svm.gz"
    zipped.write_bytes(gzip.compress(svm.read_bytes()))
    empty = tmp_path / "empty.svm"
    empty.write_bytes(b"")
    want = parse_svmlight(svm.read_bytes())
    for path in (svm, zipped):
        got = read_svmlight_file(path)
        for a, b in zip(
            (got.indptr, got.indices, got.data), (want.indptr, want.indices, want.data), strict=True
        ):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(got.label_values, want.label_values)
    assert read_svmlight_file(empty).n == 0
    bad = tmp_path / "bad.svm"
    bad.write_bytes(svm.read_bytes() + b"1 4:x\n")
    with pytest.raises(MalformedBody, match="line 201:"):
        read_svmlight_file(bad)


def test_svmlight_matches_scikit_learn_loader(tmp_path: Path) -> None:
    datasets = pytest.importorskip("sklearn.datasets")
    _, svm = write_stream(tmp_path, n=300)
    X, y = datasets.load_svmlight_file(str(svm), zero_based=True)
    parsed = parse_svmlight(svm.read_bytes())
    dense = np.zeros((parsed.n, X.shape[1]))
    for i in range(parsed.n):
        lo, hi = parsed.indptr[i], parsed.indptr[i + 1]
        dense[i, parsed.indices[lo:hi]] = parsed.data[lo:hi]
    np.testing.assert_array_equal(dense, X.toarray())
    np.testing.assert_array_equal(parsed.label_values, y)


def test_svmlight_comments_qid_blank_lines_crlf_duplicates_and_names() -> None:
    text = b"# header\r\n\r\nspam qid:3 5:1 2:2 5:0.5 # trailing\r\n  ham 1:0 7:1\n\nham\n"
    parsed = parse_svmlight(text)
    assert parsed.n == 3 and parsed.labels == [b"spam", b"ham", b"ham"]
    assert parsed.indptr.tolist() == [0, 2, 3, 3]
    assert parsed.indices.tolist() == [2, 5, 7]  # sorted, duplicates summed, zeros dropped
    assert parsed.data.tolist() == [2.0, 1.5, 1.0]
    assert parsed.lines.tolist() == [2, 3, 5]


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        (b"1 1:1\n1 2\n", 2, "idx:val"),
        (b"1 1:1\n\n-1 x:1\n", 3, "index"),
        (b"1 -1:1\n", 1, "index"),
        (b"1 1:abc\n", 1, "decimal"),
        (b"1 1:nan\n", 1, "decimal"),
        (b"1 1:1e999\n", 1, "finite"),
        (b"1 1:1.5.5\n", 1, "decimal"),
        (b"1 99999999999:1\n", 1, "too large"),
    ],
)
def test_svmlight_errors_name_the_line(text: bytes, line: int, needle: str) -> None:
    with pytest.raises(MalformedBody, match=needle) as e:
        parse_svmlight(text)
    assert f"line {line}:" in e.value.message


# --- progressive evaluation ----------------------------------------------------------------------


def test_chunking_is_invisible_and_auc_comes_from_the_served_margins(tmp_path: Path) -> None:
    nd, _ = write_stream(tmp_path)
    opts = {"algorithm": "averaged_perceptron", "hashing": False, "dim": 30}
    whole = evaluate_file(nd, chunk=10_000, **opts)
    small = evaluate_file(nd, chunk=7, **opts)
    fast = evaluate_file(nd, chunk=64, auc=False, **opts)
    for r in (small, fast):
        assert (r.examples, r.mistakes, r.updates) == (
            whole.examples,
            whole.mistakes,
            whole.updates,
        )
    assert small.auc == whole.auc and fast.auc is None
    quality = ("log_loss", "rolling_auc", "rolling_log_loss", "auc_error_bound")
    assert all(getattr(small, k) == getattr(whole, k) is not None for k in quality)
    assert all(getattr(fast, k) is None for k in quality)
    # the reference: one example at a time, margins read from the served model
    spec = ModelSpec.from_dict({"algorithm": "averaged_perceptron", "hashing": False, "dim": 30})
    lines = [json.loads(x) for x in nd.read_text().splitlines()]
    batch = spec.featurizer().transform(lines)
    learner = spec.build_learner()
    margins, mistakes = [], 0
    for i in range(batch.n):
        row = batch.row(i)
        margins.append(float(learner.decision(row)[0]))
        mistakes += int(learner.learn(row)[0])
    assert whole.mistakes == mistakes and whole.examples == 600
    assert whole.auc == roc_auc(np.array(margins), batch.y == 1)
    assert 0.5 < whole.auc <= 1.0
    # log loss of σ(margin), and the rolling figures over the last WINDOW examples
    s, yes = np.array(margins), batch.y == 1
    losses = np.logaddexp(0.0, np.where(yes, -s, s))
    assert whole.log_loss == pytest.approx(losses.mean(), rel=1e-12)
    assert whole.window == 1000 and whole.rolling_auc == roc_auc(s[-1000:], yes[-1000:])
    assert whole.rolling_log_loss == pytest.approx(losses[-1000:].mean(), rel=1e-12)


def test_ndjson_and_svmlight_agree(tmp_path: Path) -> None:
    nd, svm = write_stream(tmp_path, seed=3)
    a = evaluate_file(nd, algorithm="pa1", params={"C": 0.5}, hashing=False, dim=30)
    b = evaluate_file(svm, algorithm="pa1", params={"C": "0.5"}, dim=30)
    assert b.format == "svmlight" and b.dim == 30
    assert (a.mistakes, a.updates, a.auc) == (b.mistakes, b.updates, b.auc)
    assert evaluate_file(svm, algorithm="pa1").dim == 30  # max index + 1 (29 is used)


def test_order_file_reorders_by_id(tmp_path: Path) -> None:
    nd, _ = write_stream(tmp_path, n=200, seed=4)
    lines = nd.read_text().splitlines()
    order = tmp_path / "order.txt"
    order.write_text("\n".join(json.loads(x)["id"] for x in reversed(lines)) + "\n")
    reversed_file = tmp_path / "reversed.jsonl"
    reversed_file.write_text("\n".join(reversed(lines)) + "\n")
    opts = {"algorithm": "perceptron", "hashing": False, "dim": 30}
    by_order = evaluate_file(nd, order=order, **opts)
    direct = evaluate_file(reversed_file, **opts)
    assert (by_order.mistakes, by_order.auc) == (direct.mistakes, direct.auc)
    order.write_text("ex-0\nnope\n")
    with pytest.raises(EvaluationError, match="not in"):
        evaluate_file(nd, order=order, **opts)


def test_multiclass_files_have_no_auc(tmp_path: Path) -> None:
    nd, svm = write_stream(tmp_path, k=3, seed=5)
    for path in (nd, svm):
        hashing = {"hashing": False} if path == nd else {}
        r = evaluate_file(path, algorithm="pa1", classes=["c0", "c1", "c2"], dim=30, **hashing)
        assert r.n_classes == 3 and r.auc is None and 0 < r.mistakes < r.examples / 2
        assert r.log_loss is None and r.rolling_auc is None


def test_bad_inputs_raise_evaluation_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"features": {"a": 1}, "label": 1}\n{"features": {"a": "x"}, "label": 1}\n')
    with pytest.raises(EvaluationError, match=r"example number 2: features\.a"):
        evaluate_file(bad, algorithm="pa1")
    with pytest.raises(EvaluationError, match="--algorithm"):
        evaluate_file(bad)
    assert parse_classes("ham,spam") == ["ham", "spam"] and parse_classes("-1,1") == [-1, 1]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"features": {"a": 1}, "label": 1}\n\n{"features": \n')
    with pytest.raises(EvaluationError, match=r"broken\.jsonl:3: not JSON"):
        evaluate_file(broken, algorithm="pa1", chunk=1)
    broken.write_text('{"features": {"a": 1}, "label": 1}\n[1, 2]\n')
    with pytest.raises(EvaluationError, match=r":2: an example must be a JSON object"):
        evaluate_file(broken, algorithm="pa1")


# --- the command line ------------------------------------------------------------------------------


def test_cli_evaluates_spambase_in_its_shuffled_order(
    spambase_path: Path, spambase_order_path: Path
) -> None:
    args = [
        "evaluate", str(spambase_path), "--order", str(spambase_order_path),
        "--algorithm", "pa1", "--classes", "ham,spam", "--transform", "log1p", "--json",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("examples", "mistakes", "updates", "mistake_rate", "auc", "seconds",
                "learn_seconds"):  # fmt: skip
        assert key in report
    assert report["examples"] == 4601
    assert report["mistake_rate"] < 0.2 and report["auc"] > 0.9
    assert 0 < report["learn_seconds"] <= report["seconds"]
    table = CliRunner().invoke(app, args[:-1])
    assert table.exit_code == 0 and "ROC AUC" in table.stdout and "4,601" in table.stdout
    preset = CliRunner().invoke(
        app, [*args[:4], "--classes", "ham,spam", "--preset", "spam", "--json"]
    )
    assert preset.exit_code == 0, preset.output
    spam = json.loads(preset.stdout.strip().splitlines()[-1])
    assert spam["algorithm"] == "adagrad"  # the preset's log1p applies when --transform is unset
    assert spam["mistake_rate"] < 0.09 and spam["auc"] > 0.96


def test_cli_reports_bad_files_with_exit_code_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:1\n1 oops\n")
    result = CliRunner().invoke(app, ["evaluate", str(bad), "-a", "pa1"])
    assert result.exit_code == 2
    assert "line 2" in result.output
    result = CliRunner().invoke(app, ["evaluate", str(bad), "-a", "pa1", "-p", "C"])
    assert result.exit_code == 2 and "KEY=VALUE" in result.output


def test_python_dash_m_service_cli_evaluate(tmp_path: Path) -> None:
    _, svm = write_stream(tmp_path, n=300, seed=6)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "evaluate",
            str(svm),
            "-a",
            "pa1",
            "-p",
            "C=0.1",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["examples"] == 300 and report["params"] == {"C": 0.1}
    assert report["algorithm"] == "pa1" and report["format"] == "svmlight"


def test_progressive_learning_with_a_batch_equals_evaluate(tmp_path: Path) -> None:
    """evaluate's counters are the learner's own (mistakes as served, updates as changes)."""
    _, svm = write_stream(tmp_path, n=400, seed=7)
    parsed = parse_svmlight(svm.read_bytes())
    y = (parsed.label_values == 1).astype(np.int32)
    learner = ModelSpec.from_dict(
        {"algorithm": "mira", "hashing": False, "dim": 30}
    ).build_learner()
    learner.learn(Batch(parsed.indptr, parsed.indices, parsed.data, y))
    r = evaluate_file(svm, algorithm="mira", dim=30, auc=False)
    assert (r.mistakes, r.updates) == (learner.mistakes, learner.updates)


def _textgen():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("textgen", ROOT / "bench" / "textgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spam_preset_learns_the_synthetic_text_stream(tmp_path: Path) -> None:
    textgen = _textgen()
    first = list(textgen.SpamStream(seed=5).examples(3000))
    assert first == list(textgen.SpamStream(seed=5).examples(3000))  # seeded: reproducible
    assert 0.3 < sum(e["label"] == "spam" for e in first) / len(first) < 0.7
    path = tmp_path / "text.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in first))
    spam = evaluate_file(path, preset="spam", classes=["ham", "spam"])
    assert spam.algorithm == "adagrad" and spam.examples == 3000
    assert spam.mistake_rate < 0.12 and spam.auc is not None and spam.auc > 0.95
    plain = evaluate_file(
        path, algorithm="perceptron", classes=["ham", "spam"], text={"char_ngrams": None}
    )
    assert spam.mistakes < plain.mistakes


def test_long_files_get_a_progress_bar_and_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import service.cli.evaluate_command as evaluate

    nd, _ = write_stream(tmp_path, n=300, seed=8)
    opts = {"algorithm": "pa1", "hashing": False, "dim": 30, "chunk": 50}
    plain = evaluate.run_command(nd, json_out=True, progress=False, **opts)
    ticks: list[int] = []
    real = evaluate.evaluate_file

    def spy(path: Path, **kw: object) -> evaluate.Report:
        progress = kw["progress"]
        assert callable(progress)
        kw["progress"] = lambda k: (ticks.append(k), progress(k))
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluate, "PROGRESS_MIN_BYTES", 0)
    monkeypatch.setattr(evaluate, "evaluate_file", spy)
    with_bar = evaluate.run_command(nd, json_out=True, **opts)
    assert sum(ticks) == 300 and len(ticks) == 6  # one tick per chunk
    assert (with_bar.mistakes, with_bar.auc) == (plain.mistakes, plain.auc)
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1])["examples"] == 300


# --- compressed files and a file's own metadata -------------------------------------------------


def test_compressed_files_and_unknown_keys_are_evaluated_as_they_are(tmp_path: Path) -> None:
    """A .gz/.xz file gives the same figures as the plain one; keys an example does not have
    (a file's own metadata) are dropped and counted, ``meta`` is kept and ignored."""
    import gzip
    import lzma

    nd, svm = write_stream(tmp_path)
    plain = evaluate_file(nd, algorithm="pa1", hashing=False, dim=30)
    assert plain.dropped_keys == {}
    rows = [json.loads(x) for x in nd.read_text().splitlines()]
    tagged = [
        {**r, "source": "list-a", "meta": {"n": i}, **({"day": 3} if i % 2 else {})}
        for i, r in enumerate(rows)
    ]
    gz = tmp_path / "tagged.jsonl.gz"
    gz.write_bytes(gzip.compress("\n".join(json.dumps(r) for r in tagged).encode()))
    report = evaluate_file(gz, algorithm="pa1", hashing=False, dim=30)
    assert (report.examples, report.mistakes, report.auc) == (
        plain.examples,
        plain.mistakes,
        plain.auc,
    )
    assert report.dropped_keys == {"day": len(rows) // 2, "source": len(rows)}
    xz = tmp_path / "stream.svm.xz"
    xz.write_bytes(lzma.compress(svm.read_bytes()))
    from_xz = evaluate_file(xz, algorithm="pa1")
    assert from_xz.format == "svmlight"
    assert from_xz.mistakes == evaluate_file(svm, algorithm="pa1").mistakes
    table = CliRunner().invoke(
        app, ["evaluate", str(gz), "--algorithm", "pa1", "--no-hashing", "--dim", "30"],
        terminal_width=200,
    )  # fmt: skip
    assert table.exit_code == 0, table.output
    assert "unknown keys dropped" in table.stdout and "source (600 lines)" in table.stdout


def test_named_labels_without_classes_say_which_flag_to_pass(tmp_path: Path) -> None:
    mail = tmp_path / "mail.jsonl"
    mail.write_text(
        '{"text": "cheap pills", "label": "spam"}\n{"text": "lunch?", "label": "ham"}\n'
    )
    result = CliRunner().invoke(app, ["evaluate", str(mail), "--algorithm", "pa1"])
    said = " ".join(result.output.split())  # rich wraps to its width
    assert result.exit_code != 0
    assert "--classes ham,spam" in said and "label 'spam'" in said, said
    ok = CliRunner().invoke(
        app, ["evaluate", str(mail), "--algorithm", "pa1", "--classes", "ham,spam", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    preset = CliRunner().invoke(app, ["evaluate", str(mail), "--preset", "spam", "--json"])
    assert preset.exit_code == 0, preset.output  # the spam preset's classes are ham, spam


def test_cli_takes_a_thick_threshold_as_a_json_param(tmp_path: Path) -> None:
    _, svm = write_stream(tmp_path, n=500, seed=8)
    thick = '{"margin": 0.5, "repeats": 2}'
    result = CliRunner().invoke(app, ["evaluate", str(svm), "-a", "pa1", "-p", f"thick={thick}",
                                      "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    assert report["params"] == {"C": 1.0, "thick": {"margin": 0.5, "repeats": 2}}
    plain = evaluate_file(svm, algorithm="pa1")
    assert report["examples"] == plain.examples and report["updates"] < plain.updates


def test_ensemble_reports_its_members(tmp_path: Path) -> None:
    _, svm = write_stream(tmp_path, n=400, seed=9)
    members = '[{"algorithm": "pa1"}, {"algorithm": "adagrad"}]'
    result = CliRunner().invoke(app, ["evaluate", str(svm), "-a", "ensemble", "-p",
                                      f"members={members}", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    names = [m["algorithm"] for m in report["members"]]
    assert names == ["pa1", "adagrad"]
    assert all(m["examples_seen"] == report["examples"] == 400 for m in report["members"])
    assert sum(m["weight"] for m in report["members"]) == pytest.approx(1.0)
    table = CliRunner().invoke(app, ["evaluate", str(svm), "-a", "ensemble", "-p",
                                     f"members={members}"])  # fmt: skip
    assert "member 1: adagrad" in table.output
    assert evaluate_file(svm, algorithm="pa1").members is None
