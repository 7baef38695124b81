"""`streamlearn api --workers 2` serves through the app factory, settings from the env."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_api_command_with_two_workers(settings: Settings) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "STREAMLEARN_API_KEYS": "adm-secret:admin",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "api", "--port", str(port), "--workers", "2",
         "--redis-url", str(settings.redis_url), "--key-prefix", settings.key_prefix,
         "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "streamlearn api did not come up"
            time.sleep(0.2)
        auth = {"Authorization": "Bearer adm-secret"}
        spec = {"algorithm": "perceptron", "hashing": False, "dim": 4}
        assert httpx.put(f"{url}/models/m", json=spec, headers=auth).status_code == 201
        assert httpx.get(f"{url}/models").status_code == 401  # keys came through the env
        for _ in range(6):  # spread over both processes: each loads the model on its own
            r = httpx.post(f"{url}/models/m/predict", json={"features": [1, 0, 0, 0]}, headers=auth)
            assert r.status_code == 200 and r.json()["version"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert b"adm-secret" not in out  # the key is never logged
