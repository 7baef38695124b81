"""Read-your-writes: ``POST /models/{m}/examples?wait=S`` answers once a version that covers
the batch is served, with ``serve`` (API and worker in one process) and with separate
``api`` and ``worker`` processes, as real subprocesses on the real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from service.cli.embedded import free_port
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SPAM = {"preset": "spam", "classes": ["ham", "spam"]}
EXAMPLES = [
    {"text": "WIN a FREE prize now, click here", "label": "spam"},
    {"text": "Are we still on for lunch tomorrow?", "label": "ham"},
    {"text": "Cheap meds, no prescription, order now", "label": "spam"},
    {"text": "Minutes of the project meeting attached", "label": "ham"},
]


@contextmanager
def process(*args: str, env: dict[str, str], url: str | None = None) -> Iterator[list[str]]:
    """``python -m service.cli ARGS`` until ``url``/healthz answers; stopped with SIGINT."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", *args], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while url is not None:
            assert proc.poll() is None, f"{args[0]} exited early:\n" + "".join(lines)
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"{args[0]} did not come up:\n" + "".join(lines)
            time.sleep(0.1)
        yield lines
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(5)


def environment(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLEARN_")}
    env.update(
        STREAMLEARN_REDIS_URL=str(settings.redis_url),
        STREAMLEARN_KEY_PREFIX=settings.key_prefix,
        STREAMLEARN_PUBLISH_MS="200",
    )
    return env


def check_read_your_writes(url: str) -> None:
    """The README's quickstart: learn with ?wait, then the very next prediction is trained."""
    with httpx.Client(base_url=url, timeout=60) as c:
        assert c.put("/models/spam", json=SPAM).status_code == 201
        r = c.post("/models/spam/examples?wait=20", json={"examples": EXAMPLES})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["accepted"] == 4 and body["duplicates"] == 0 and body["version"] >= 1
        p = c.get("/models/spam/predict", params={"text": "claim your free prize"}).json()
        assert p["version"] >= body["version"] and p["label"] == "spam", p
        assert c.get("/models/spam/metrics").json()["examples_seen"] == 4
        versions = c.get("/models/spam/versions").json()["versions"]
        first = min(versions, key=lambda v: v["version"])
        assert first["version"] == body["version"], "the FIRST version covering the batch"

        # already learned (same ids twice): answered at once with a covering version
        tagged = [{**ex, "id": f"q{i}"} for i, ex in enumerate(EXAMPLES)]
        one = c.post("/models/spam/examples?wait=20", json={"examples": tagged})
        assert one.status_code == 200 and one.json()["duplicates"] == 0, one.text
        again = c.post("/models/spam/examples?wait=20", json={"examples": tagged})
        assert again.status_code == 200, again.text
        assert again.json()["duplicates"] == 4
        assert again.json()["version"] <= one.json()["version"]
        assert c.get("/models/spam/metrics").json()["examples_seen"] == 8


def test_wait_with_serve(tmp_path: Path, settings: Settings) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ("serve", "--port", str(port), "--data-dir", str(tmp_path))
    with process(*args, env=environment(settings), url=url):
        check_read_your_writes(url)


def test_wait_with_separate_api_and_worker_processes(settings: Settings) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = environment(settings)
    with process("api", "--port", str(port), "--log-level", "warning", env=env, url=url):
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.put("/models/lonely", json=SPAM).status_code == 201
            # no worker yet: the time runs out, 202 without a version (the batch is kept)
            r = c.post("/models/lonely/examples?wait=0.5", json={"examples": EXAMPLES})
            assert r.status_code == 202 and "version" not in r.json(), r.text
        with ExitStack() as workers:
            workers.enter_context(process("worker", "--log-level", "WARNING", env=env))
            check_read_your_writes(url)
            with httpx.Client(base_url=url, timeout=30) as c:
                r = c.post("/models/lonely/examples?wait=20", json=EXAMPLES[0])
                assert r.status_code == 200 and r.json()["version"] >= 1, r.text
                assert c.get("/models/lonely/metrics").json()["examples_seen"] == 5


@pytest.mark.parametrize("bad", ["31", "0", "-1", "nan", "soon", "inf"])
async def test_wait_out_of_range_is_a_422_and_appends_nothing(bad: str) -> None:
    import uuid

    from tests.api.conftest import assert_error, running

    memory = Settings(redis_url=f"memory://{uuid.uuid4().hex}", key_prefix="t")
    async with running(memory) as (_, c):
        assert (await c.put("/models/m", json=SPAM)).status_code == 201
        r = await c.post(f"/models/m/examples?wait={bad}", json=EXAMPLES[0])
        err = assert_error(r, 422, "invalid_request", "wait", "30")
        assert err["field"] == "wait"
        assert (await c.get("/models/m/metrics")).json()["lag"] == 0
