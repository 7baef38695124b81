"""Every command in the README works: the two first-screen commands are the ones CI runs,
every ``streamlearn`` command named exists, every link resolves, and the curl lines of the
spam example run — with the real ``curl`` — against a live service."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import typer.main

from service.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RUN = "pip install -e . && streamlearn serve"
TEST = "pip install -e '.[test]' && python3 -m pytest -q"


def code_blocks(text: str, lang: str = "sh") -> list[str]:
    pattern = rf"```{lang}\n(.*?)```" if lang != "sh" else r"```(?:sh|bash)?\n(.*?)```"
    return [m.group(1).strip() for m in re.finditer(pattern, text, re.S)]


def curl_lines() -> list[str]:
    return [
        line
        for block in code_blocks(README)
        for line in block.splitlines()
        if line.startswith("curl ")
    ]


def test_first_screen_has_run_and_test_commands() -> None:
    blocks = code_blocks(README)
    assert blocks[:2] == [RUN, TEST]
    first_screen = "\n".join(README.splitlines()[:25])
    assert RUN in first_screen and TEST in first_screen


def test_ci_runs_the_readme_test_command() -> None:
    """``.ci/run`` installs the test extra and runs exactly the README's pytest command."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    install, _, test = TEST.partition(" && ")
    assert any(re.search(r"pip install( -q)? -e '\.\[test\]'", line) for line in ci), install
    pytest_lines = [line for line in ci if re.match(r"python3? -m pytest", line)]
    assert pytest_lines == [test]


def test_streamlearn_commands_named_in_readme_exist() -> None:
    named = set(re.findall(r"`streamlearn (\w+)", README)) | set(
        re.findall(r"&& streamlearn (\w+)", README)
    )
    registered = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert named, "the README names no command"
    assert named <= registered, (
        f"README names commands that do not exist: {sorted(named - registered)}"
    )


def test_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to missing {target}"


def run_curl(line: str, base: str) -> tuple[int, object]:
    args = [a.replace("localhost:8000", base) for a in shlex.split(line)]
    out = subprocess.run(
        [*args, "-sS", "-w", "\n%{http_code}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    body, _, status = out.rpartition("\n")
    return int(status), orjson.loads(body) if body else None


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_spam_example_runs_with_curl(settings) -> None:  # type: ignore[no-untyped-def]
    from tests.live_service import live_service

    lines = curl_lines()
    assert len(lines) == 4, lines
    create, learn, predict, metrics = lines
    with live_service(settings) as live:
        base = live.url.removeprefix("http://")
        status, body = run_curl(create, base)
        assert status == 201, body
        status, body = run_curl(learn, base)
        # ?wait: the answer comes once a version covering the examples is served ...
        assert status == 200 and body["accepted"] == 4 and body["version"] >= 1, body  # type: ignore[index]
        learned = body["version"]  # type: ignore[index]
        # ... so the very next prediction, made at once as the README does, is trained
        status, answer = run_curl(predict, base)
        assert status == 200 and answer["version"] >= learned, answer  # type: ignore[index]
        assert answer["label"] == "spam" and 0.5 < answer["score"] <= 1.0, answer  # type: ignore[index]
        status, body = run_curl(metrics, base)
        assert status == 200 and body["examples_seen"] == 4, body  # type: ignore[index]
        assert {"mistakes", "updates"} <= set(body)  # type: ignore[arg-type]

        # The Python example, run as written (but against this service).
        (snippet,) = code_blocks(README, "python")
        out = subprocess.run(
            [sys.executable, "-c", snippet.replace("http://127.0.0.1:8000", live.url)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        label, score, mistakes = out.stdout.split()
        assert label in ("ham", "spam") and 0 <= float(score) <= 1 and int(mistakes) >= 0
