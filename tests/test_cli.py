"""The command line: every command is there with a ``--help`` that shows an example; the
replay machinery posts what the file says, in order; the client-side commands work against
a live service (typer's CliRunner, in process)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import typer.main
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.datasets import guess_format
from service.cli.replay import apply_order, read_lines, replay
from service.client import Client, ClientError

EXPECTED = {
    "serve",
    "api",
    "worker",
    "evaluate",
    "replay",
    "demo",
    "models",
    "metrics",
    "versions",
    "rollback",
    "pin",
    "unpin",
    "dead-letters",
}
runner = CliRunner()


def commands() -> set[str]:
    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_all_commands_exist() -> None:
    assert commands() >= EXPECTED, f"missing: {sorted(EXPECTED - commands())}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_help_has_an_example(name: str) -> None:
    if name not in commands():
        pytest.fail(f"`streamlearn {name}` is not registered yet")
    result = runner.invoke(app, [name, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "Example" in result.output and f"streamlearn {name}" in result.output


# --- replay machinery ------------------------------------------------------------------------


def write_ndjson(path: Path, n: int) -> Path:
    path.write_bytes(
        b"".join(
            orjson.dumps({"id": f"e{i}", "features": {"x": i}, "label": 1}) + b"\n"
            for i in range(n)
        )
    )
    return path


def test_read_lines_skips_blanks_and_svmlight_comments(tmp_path: Path) -> None:
    f = tmp_path / "d.svm"
    f.write_text("# header\n1 1:2\n\n-1 3:1 # trailing\n")
    assert guess_format(f) == "svmlight" and guess_format(tmp_path / "d.jsonl") == "ndjson"
    assert read_lines(f, "svmlight") == [b"1 1:2", b"-1 3:1 # trailing"]
    with pytest.raises(ValueError, match="format must be one of"):
        read_lines(f, "csv")


def test_read_lines_drops_a_byte_order_mark_and_crlf(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"label": 1}\r\n{"label": -1}\r\n')
    assert [orjson.loads(x) for x in read_lines(f, "ndjson")] == [{"label": 1}, {"label": -1}]


def test_apply_order_reorders_by_id_and_names_what_is_wrong(tmp_path: Path) -> None:
    lines = read_lines(write_ndjson(tmp_path / "d.jsonl", 3), "ndjson")
    ordered = apply_order(lines, ["e2", "e0", "e1"])
    assert [orjson.loads(x)["id"] for x in ordered] == ["e2", "e0", "e1"]
    with pytest.raises(ValueError, match=r"ids not in file, e\.g\. 'e9'"):
        apply_order(lines, ["e0", "e9"])
    with pytest.raises(ValueError, match="more than once"):
        apply_order(lines, ["e0", "e0"])
    with pytest.raises(ValueError, match="line 1 has no 'id'"):
        apply_order([b'{"label": 1}'], ["a"])


def test_replay_posts_batches_in_order_and_retries_backpressure(tmp_path: Path) -> None:
    bodies: list[bytes] = []
    answers = iter([429, 202, 202, 202])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 429:
            return httpx.Response(429, json={"error": {"code": "lag_exceeded", "message": "later"}})
        bodies.append(request.content)
        assert request.headers["content-type"] == "application/x-ndjson"
        return httpx.Response(202, json={"accepted": request.content.count(b"\n")})

    lines = read_lines(write_ndjson(tmp_path / "d.jsonl", 10), "ndjson")
    seen: list[int] = []
    with Client("http://sl.test", transport=httpx.MockTransport(handler)) as c:
        result = replay(c, "m", lines, batch_size=4, on_batch=seen.append)
    assert (result.posted, result.requests, result.retries) == (10, 3, 1)
    assert seen == [4, 4, 2]
    posted = [orjson.loads(x)["id"] for body in bodies for x in body.splitlines()]
    assert posted == [f"e{i}" for i in range(10)]


def test_replay_stops_on_a_client_error(tmp_path: Path) -> None:
    calls = iter([202, 422])

    def handler(request: httpx.Request) -> httpx.Response:
        if next(calls) == 202:
            return httpx.Response(202, json={"accepted": 2})
        return httpx.Response(422, json={"error": {"code": "invalid_example", "message": "bad"}})

    with (
        Client("http://sl.test", transport=httpx.MockTransport(handler)) as c,
        pytest.raises(ClientError) as info,
    ):
        replay(c, "m", [b"{}"] * 5, batch_size=2)
    assert info.value.code == "invalid_example"
    assert (
        "2 examples were accepted before this; the rejected batch is examples 3..4"
        in (info.value.__notes__[0])
    )


def test_unreachable_service_is_a_clean_error() -> None:
    result = runner.invoke(app, ["models", "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "unreachable" in result.output
    assert "Traceback" not in result.output


# --- against a live service ------------------------------------------------------------------


def test_client_commands_against_live_service(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.live_service import live_service

    data = write_ndjson(tmp_path / "d.jsonl", 40)
    order = tmp_path / "order.txt"
    order.write_text("\n".join(f"e{i}" for i in reversed(range(40))))
    with live_service(settings) as live:
        url = ["--url", live.url]
        with Client(live.url) as c:
            c.create_model("cli", {"algorithm": "perceptron", "bits": 8})

        r = runner.invoke(
            app,
            [
                "replay",
                str(data),
                "--model",
                "cli",
                "--order",
                str(order),
                "--batch-size",
                "7",
                *url,
            ],
            terminal_width=200,
        )
        assert r.exit_code == 0, r.output
        assert "posted 40 examples in 6 requests" in r.output
        assert "40 new, 0 already learned" in r.output
        assert re.search(r"learned: version \d+ serves all of it", r.output), r.output
        assert "examples seen" in r.output and "40" in r.output
        assert "lag" in r.output and re.search(r"lag\s+│\s+0 ", r.output), r.output

        again = runner.invoke(
            app, ["replay", str(data), "--model", "cli", *url], terminal_width=200
        )
        assert again.exit_code == 0, again.output
        assert "0 new, 40 already learned" in again.output, again.output
        rates = re.findall(r"([\d,]+) (?:ex|examples)/s", again.output)
        assert len(rates) == 2 and rates[0] == rates[1], f"bar and summary rates differ: {rates}"
        with Client(live.url) as c:
            assert c.metrics("cli")["examples_seen"] == 40

        r = runner.invoke(app, ["models", *url], terminal_width=200)
        assert r.exit_code == 0 and "cli" in r.output, r.output

        r = runner.invoke(app, ["metrics", "cli", "--json", *url])
        assert r.exit_code == 0, r.output
        assert orjson.loads(r.output)["examples_seen"] == 40

        r = runner.invoke(app, ["versions", "cli", *url], terminal_width=200)
        assert r.exit_code == 0 and "serving" in r.output, r.output

        with Client(live.url) as c:
            first = min(int(v["version"]) for v in c.versions("cli")["versions"])
        r = runner.invoke(app, ["rollback", "cli", str(first), *url])
        assert r.exit_code == 0 and f"back to version {first}" in r.output, r.output
        with Client(live.url) as c:
            head = c.versions("cli")["head"]
        assert head > first and f"now serving version {head} " in r.output, r.output

        r = runner.invoke(app, ["metrics", "nope", *url])
        assert r.exit_code == 1 and "model_not_found" in r.output

        svm = tmp_path / "d.svm"
        svm.write_text(
            "# label index:value\n"
            + "".join(f"{1 if i % 2 else -1} {i % 5}:1.5 7:1\n" for i in range(25))
        )
        with Client(live.url) as c:
            c.create_model("svm", {"algorithm": "pa1", "hashing": False, "dim": 8})
        r = runner.invoke(
            app, ["replay", str(svm), "-m", "svm", "--batch-size", "10", *url], terminal_width=200
        )
        assert r.exit_code == 0, r.output
        assert "posted 25 examples in 3 requests" in r.output
        with Client(live.url) as c:
            assert c.metrics("svm")["examples_seen"] == 25


def test_demo_replays_spambase_exactly_as_learned_offline(settings, spambase_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The demo's model, learned through HTTP, the stream and the worker, makes exactly the
    mistakes the same learner makes in process on the same shuffled order."""
    from service.cli.commands import DEMO_SPEC
    from service.learning.spec import ModelSpec
    from tests.live_service import live_service

    order = read_lines(spambase_path.with_name("spambase_order.txt"), "ndjson")
    lines = apply_order(read_lines(spambase_path, "ndjson"), [o.decode() for o in order])
    spec = ModelSpec.from_dict(DEMO_SPEC)
    learner = spec.build_learner()
    offline = learner.learn(spec.featurizer().transform([orjson.loads(x) for x in lines]))

    with live_service(settings) as live:
        r = runner.invoke(
            app,
            ["demo", "--url", live.url, "--rate", "0"],
            terminal_width=200,
        )
        assert r.exit_code == 0, r.output
        with Client(live.url) as c:
            metrics = c.metrics("spambase")
    assert metrics["examples_seen"] == len(lines) == 4601
    assert metrics["mistakes"] == int(offline.sum())
    assert metrics["mistake_rate"] < 0.10  # the demo shows a filter that works


def test_replay_drops_keys_an_example_does_not_have_and_says_how_many(tmp_path: Path) -> None:
    """A file's own metadata (extra keys per line) would be a 422 over HTTP: replay drops
    it, keeps ``meta``, and counts what it dropped; a .gz file is read as it is."""
    import gzip
    import io

    from rich.console import Console

    from service.cli.commands import run_replay

    rows = [
        {"id": f"e{i}", "text": "hi", "label": 1, "source": "a", "meta": {"i": i}} for i in range(5)
    ]
    path = tmp_path / "tagged.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(orjson.dumps(r) for r in rows)))
    posted: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posted.extend(orjson.loads(x) for x in request.content.splitlines())
            return httpx.Response(202, json={"accepted": 5, "duplicates": 0})
        if request.url.path.endswith("/metrics"):
            return httpx.Response(200, json={"examples_seen": 5, "lag": 0})
        return httpx.Response(200, json={"name": "m", "spec": {}, "version": 0})

    out = io.StringIO()
    with Client("http://sl.test", transport=httpx.MockTransport(handler)) as c:
        run_replay(c, Console(file=out, width=200), path, "m", wait=0)
    assert posted == [{k: v for k, v in r.items() if k != "source"} for r in rows]
    assert "unknown keys dropped: source (5 lines)" in out.getvalue()


def test_pin_unpin_dead_letters_and_retention_from_the_cli(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import redis

    from service.store import Keys
    from tests.live_service import live_service, wait_for

    settings = settings.model_copy(update={"keep_versions": 2})
    with live_service(settings) as live, Client(live.url) as c:
        url = ["--url", live.url]
        c.create_model("p", {"algorithm": "perceptron", "bits": 8})
        for i in range(4):  # four versions, of which retention keeps the newest two
            c.learn("p", {"features": {"x": float(i + 1)}, "label": 1 if i % 2 else -1}, wait=20)
        kept = sorted(int(v["version"]) for v in c.versions("p")["versions"])
        assert len(kept) == 2 and kept[0] > 1

        r = runner.invoke(app, ["pin", "p", str(kept[0]), *url], terminal_width=200)
        assert r.exit_code == 0 and f"pinned p to version {kept[0]}" in r.output, r.output
        assert c.versions("p")["head"] == kept[0]
        r = runner.invoke(app, ["unpin", "p", *url], terminal_width=200)
        assert r.exit_code == 0 and f"(now version {kept[-1]})" in r.output, r.output

        r = runner.invoke(app, ["rollback", "p", "1", *url], terminal_width=200)
        said = " ".join(r.output.split())
        assert r.exit_code == 1 and "version_not_found" in said, said
        assert "removed by retention" in said and f"the oldest kept is version {kept[0]}" in said
        r = runner.invoke(app, ["pin", "p", "99", *url], terminal_width=200)
        said = " ".join(r.output.split())
        assert r.exit_code == 1 and f"has no version 99 (the newest is version {kept[-1]})" in said

        r = runner.invoke(app, ["dead-letters", "p", *url], terminal_width=200)
        assert r.exit_code == 0 and "no dead letters for p" in r.output, r.output
        raw = redis.Redis.from_url(str(settings.redis_url))
        keys = Keys(settings.key_prefix)
        raw.xadd(keys.examples("p"), {"b": b"\x07garbage", "n": 1})
        raw.incrby(keys.appended("p"), 1)
        raw.close()
        wait_for(lambda: c.dead_letters("p")["dead_letters"])
        r = runner.invoke(app, ["dead-letters", "p", *url], terminal_width=200)
        assert r.exit_code == 0 and "DecodeError" in r.output, r.output
        (letter,) = c.dead_letters("p", limit=5)["dead_letters"]
        assert letter["bytes"] == 8 and "DecodeError" in letter["reason"]
        assert abs(letter["time"] - time.time()) < 60
        with pytest.raises(ClientError) as missing:
            c.dead_letters("nope")
        assert missing.value.code == "model_not_found"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_help_reads_as_prose(name: str) -> None:
    """No reST backticks; each docstring paragraph is reflowed as one (no sentence broken
    where the source line ended)."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    wide = runner.invoke(app, [name, "--help"], env={"COLUMNS": "400"})
    assert wide.exit_code == 0, wide.output
    assert "`" not in wide.output, wide.output
    lines = [" ".join(line.strip(" │").split()) for line in wide.output.splitlines()]
    for paragraph in (command.help or "").split("\n\n"):
        text = " ".join(paragraph.replace("`", "").split())
        if text and not text.startswith("Example:"):
            assert text in lines, f"{text!r} is not one line of:\n{wide.output}"


@pytest.mark.parametrize("name", ["serve", "api"])
def test_host_and_port_show_their_defaults(name: str) -> None:
    from service.cli.app import DEFAULT_HOST, DEFAULT_PORT
    from service.settings import Settings

    assert (Settings().host, Settings().port) == (DEFAULT_HOST, DEFAULT_PORT)
    out = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"}).output
    flat = " ".join(out.replace("│", " ").split())
    assert "STREAMLEARN_HOST] [default: 127.0.0.1] --port" in flat, flat
    assert "[env var: STREAMLEARN_PORT] [default: 8000]" in flat, flat


# --- start-up: evaluate without the CLI framework or the server stack -------------------------

ROOT = Path(__file__).resolve().parents[1]
SERVER_STACK = ("fastapi", "starlette", "uvicorn", "redis", "httpx", "typer", "click", "rich")


def _run_cli(
    args: list[str], tmp_path: Path, *, probe: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -m service.cli ARGS``; with ``probe``, the modules it loaded (stderr's last line)."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['streamlearn', *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('service.cli', run_name='__main__', alter_sys=True)\n"
        "finally:\n"
        "    import json; print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    argv = [sys.executable, "-c", code] if probe else [sys.executable, "-m", "service.cli", *args]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_evaluate_loads_no_cli_framework_and_no_server_stack(tmp_path: Path) -> None:
    svm = tmp_path / "d.svm"
    svm.write_text("\n".join(f"{1 if i % 3 else -1} {i % 7}:1 {7 + i % 5}:0.5" for i in range(200)))
    out = _run_cli(
        ["evaluate", str(svm), "-a", "pa1", "--json", "-p", "C=0.5"], tmp_path, probe=True
    )
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout.strip().splitlines()[-1])
    assert report["examples"] == 200 and report["params"] == {"C": 0.5}
    loaded = set(orjson.loads(out.stderr.strip().splitlines()[-1]))
    assert "numba" in loaded and "service.cli.evaluate" in loaded  # the probe sees the real run
    top = {m.split(".")[0] for m in loaded}
    assert not top & set(SERVER_STACK), sorted(top & set(SERVER_STACK))
    assert "scipy.linalg" not in loaded and "cffi" not in loaded  # hidden from numba's set-up


def _flat(text: str) -> str:
    """rich's error panel as one line of words."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", text).split())


def test_evaluate_command_lines_argparse_declines_go_to_typer(tmp_path: Path) -> None:
    """Help, a missing file and a bad option get typer's texts (exit 0 / 2), as before."""
    helped = _run_cli(["evaluate", "--help"], tmp_path)
    assert helped.returncode == 0 and "Progressive validation" in helped.stdout
    missing = _run_cli(["evaluate", "nope.svm", "-a", "pa1"], tmp_path)
    assert missing.returncode == 2 and "does not exist" in _flat(missing.stderr)
    svm = tmp_path / "d.svm"
    svm.write_text("1 1:1\n")
    bad = _run_cli(["evaluate", str(svm), "--chunk", "x"], tmp_path)
    assert bad.returncode == 2 and "Invalid value for '--chunk'" in _flat(bad.stderr)
    unknown = _run_cli(["evaluate", str(svm), "--algo", "pa1"], tmp_path)  # no abbreviations
    assert unknown.returncode == 2 and "No such option" in _flat(unknown.stderr)
    wrong = _run_cli(["evaluate", str(svm), "-a", "pa1", "-p", "C"], tmp_path)  # our own error
    assert wrong.returncode == 2 and "KEY=VALUE" in wrong.stderr


def test_evaluate_fast_parser_has_typer_s_options_and_defaults() -> None:
    """service/cli/launch.py reads evaluate's command line itself: same flags, same defaults."""
    from service.cli.launch import evaluate_parser

    command = typer.main.get_command(app).commands["evaluate"]  # type: ignore[attr-defined]
    parser = evaluate_parser()
    ours = {s for a in parser._actions for s in a.option_strings}
    options = [p for p in command.params if p.param_type_name == "option"]
    theirs = {s for p in options for s in (*p.opts, *p.secondary_opts)} - {"--help"}
    assert ours == theirs
    defaults = {a.dest: a.default for a in parser._actions if a.option_strings}
    for p in options:
        assert defaults[p.name] == p.default, p.name
