"""The test suite without a Redis: it says once how to get one, and runs the rest on request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from service.cli.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMLEARN_TEST_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_without_redis_the_suite_says_once_how_to_get_one() -> None:
    out = run_pytest("tests/api/test_ingest.py", "tests/learning/test_spec.py")
    said = out.stdout + out.stderr
    assert out.returncode == 4, said  # a usage error: nothing ran, nothing "failed"
    assert said.count("need a Redis server") == 1, said
    assert "STREAMLEARN_TEST_REDIS_URL=" in said and "redis-server --port 6379" in said
    assert '-m "not redis"' in said
    assert "ConnectionError" in said and said.count("ConnectionError") == 1, said
    assert " passed" not in said and " failed" not in said, said


def test_without_redis_the_rest_runs_with_not_redis() -> None:
    out = run_pytest("tests/api/test_ingest.py", "tests/learning/test_spec.py", "-m", "not redis")
    said = out.stdout + out.stderr
    assert out.returncode == 0, said
    assert " passed" in said and " deselected" in said and "need a Redis" not in said, said
